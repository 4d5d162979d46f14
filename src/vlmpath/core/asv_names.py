"""What kind of number does an asv benchmark name stand for?

asv finds benchmarks by method-name prefix (``asv_runner.benchmarks``): ``time_`` (seconds),
``timeraw_`` (seconds, own process), ``mem_`` / ``peakmem_`` (bytes) and ``track_`` (any
unit the benchmark declares). The suite's failure wrapper, the metric table's lookup by
method name (``core.metrics.metric_for_method``: the unit a prefix implies is the table's,
``IMPLIED_UNITS``) and the renderers' short labels all need this list; it lived in four
copies before.
"""

from __future__ import annotations

#: asv's benchmark-method prefixes. ``peakmem_`` before ``mem_`` does not matter for
#: ``startswith``, but longer first keeps ``strip_kind`` obviously right.
BENCHMARK_PREFIXES = ("timeraw_", "time_", "peakmem_", "mem_", "track_")


def kind_prefix(name: str) -> str | None:
    """The asv prefix of a benchmark's leaf name (``a.B.time_x`` -> ``time_``), or None."""
    leaf = name.rsplit(".", 1)[-1]
    return next((p for p in BENCHMARK_PREFIXES if leaf.startswith(p)), None)


def strip_kind(leaf: str) -> str:
    """``track_tok_per_s`` -> ``tok_per_s``: the leaf without its asv prefix."""
    p = next((p for p in BENCHMARK_PREFIXES if leaf.startswith(p)), None)
    return leaf[len(p):] if p else leaf



#: What each prefix implies: ``time`` (seconds) and ``peakmem`` (bytes) are the metric
#: table's ``IMPLIED_UNITS`` rows; ``track_`` methods are defined by a row of their own.
IMPLIED_KIND = {"timeraw_": "time", "time_": "time", "peakmem_": "peakmem", "mem_": "peakmem"}
