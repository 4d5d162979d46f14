"""Which numbers does vlmpath measure, and what does each one mean?

The one metric table. A row (``MetricSpec``) says, for one named number: its unit, which
way is better, whether it is compared exactly (deterministic counters, accuracy) or within
a noise band (timings), how it is shown, whether charts lead with it, and which
benchmarks report it. The comparison takes each unit's direction and exactness from it
(``thresholds.yaml`` adds only units no row has), the renderers format by it, the
pytest-benchmark reader and the mirror suite take their ``extra_info`` keys from it, and
the asv suite generates its twin ``track_<name>`` methods from it.

Adding a metric: one row here, plus its measurement (a field of the measured record,
``suite.record.CaseRecord``, or a hand-written ``track_`` method for a benchmark of its
own). From the row alone: the case summary, the asv ``track_`` methods of the paths it
names (``benchmarks/_common.metric_tracks``, ``bench_engine``), the engine comparison's
metrics (``compare.from_records``), the unit's direction and exactness in the comparison
(``compare.thresholds``), its formatting in the comment and the terminal table
(``render.fmt``, ``render.tables``). tests/test_metric_table.py adds a row and follows it.

asv's own prefixes imply two more units (``time_`` seconds, ``peakmem_``/``mem_`` bytes):
``IMPLIED_UNITS`` lists them so the unit view (``unit_spec``) covers every unit the suite
produces.

The table is also the only source of a read row's meaning: ``metric_for_method`` maps a
benchmark's method name (``track_accuracy``, ``time_routine``) to its row, whatever unit an
artifact claims (``compare.asv_results``); a method with no row is not judged. Hand-written
``track_`` methods (``benchmarks/``, the instruction counts of ``selfcheck.ir_cases``) have
rows of their own for that reason. ``case_of`` groups a benchmark's rows into the case they
measure (one failure per case, ``compare.verdict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from vlmpath.core.asv_names import IMPLIED_KIND, kind_prefix


class Direction(StrEnum):
    """Which way a number is better. A member is its own string (``"lower"``), so it is
    written into JSON and compared as one; parsed once where it enters (the thresholds
    yaml, a comparison JSON)."""

    LOWER = "lower"
    HIGHER = "higher"


class Method(StrEnum):
    """How the comparison judged a row (``Comparison.method``): exactly, by asv's
    Mann-Whitney test and the band, by the band alone (too few samples for the test), by
    the interleaved rounds' paired test (``compare.paired``); ``NONE`` for a row that was
    not judged (one side only, not comparable)."""

    EXACT = "exact"
    MANN_WHITNEY = "mann-whitney"
    THRESHOLD = "threshold"
    PAIRED = "paired"
    NONE = ""


#: How a value is shown: ``scaled`` (seconds -> ms/µs/ns, bytes -> KiB/MiB/GiB), ``count``
#: (a whole number when it is one), ``fraction`` (fixed decimals), ``plain`` (significant
#: digits, large values without exponent).
FORMATS = ("scaled", "count", "fraction", "plain")

#: The routine benchmark paths (``suite.cases.RoutineCase.path``).
ROUTINE_PATHS = ("encode", "embed")
#: The engine path: ``bench_engine.Engine``'s tracks and the engine comparison
#: (``compare.from_records``) report the rows that name it.
ENGINE_PATH = "engine"
#: Every place a row's ``routine`` may name.
REPORTING_PATHS = ROUTINE_PATHS + (ENGINE_PATH,)


@dataclass(frozen=True, kw_only=True)
class MetricSpec:
    """One measured number's meaning.

    ``name`` is the key in a measured case's summary, in pytest-benchmark ``extra_info``
    and the suffix of its asv ``track_`` method. ``routine`` names the benchmark paths
    that report it (a generated method each): the routine paths' ``*Metrics``/``*Routine``
    classes and ``engine`` (``bench_engine.Engine`` and the engine comparison). Every row
    that names a path is a field of the measured record (``suite.record.CaseRecord``).
    ``report_failed``: recorded even when the case failed (the lower accuracy is in the
    results); otherwise a failed case raises (a failed strategy made fewer encoder calls,
    which must not read as an improvement). The comparison shows a failed case as one
    failure either way (``compare.verdict``; ``case_of`` groups its rows). ``may_be_unmeasured``: None means "this device
    (or an older package) has no counter for it": asv skips it, never a 0
    (``suite.cases.require_measured``).
    """

    name: str
    unit: str
    direction: Direction
    exact: bool
    fmt: str
    headline: bool
    description: str
    routine: tuple[str, ...] = ()
    report_failed: bool = False
    may_be_unmeasured: bool = False
    #: A deterministic count judged by its band (a ``thresholds.yaml`` rule) rather than
    #: exactly: one value per side is a full measurement, but a change inside the band (an
    #: engine refactor's few bytecodes) is not a regression.
    deterministic: bool = False

    def __post_init__(self) -> None:
        # Programmer errors in the table itself: fail at import, loudly.
        if not isinstance(self.direction, Direction):  # a bare "higher" is a string, not a meaning
            raise ValueError(f"metric {self.name}: direction must be a Direction member "
                             f"(Direction.HIGHER or Direction.LOWER), got {self.direction!r}")
        if self.fmt not in FORMATS:
            raise ValueError(f"metric {self.name}: fmt must be one of {FORMATS}, got {self.fmt!r}")
        if not set(self.routine) <= set(REPORTING_PATHS):
            raise ValueError(f"metric {self.name}: routine paths {self.routine} not in {REPORTING_PATHS}")

    @property
    def track_method(self) -> str:
        return f"track_{self.name}"


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(name="tok_per_s", unit="tok/s", direction=Direction.HIGHER, exact=False, fmt="plain",
               headline=True,
               description="multimodal tokens embedded per second over device-timed steps (median of the timed passes)",
               routine=("encode", "embed", "engine")),
    MetricSpec(name="accuracy", unit="fraction", direction=Direction.HIGHER, exact=True, fmt="fraction",
               headline=False, description="share of items whose placed rows match their golden rows",
               routine=("encode", "embed", "engine"), report_failed=True),
    MetricSpec(name="syncs", unit="syncs", direction=Direction.LOWER, exact=True, fmt="count", headline=False,
               description="host-device synchronisations outside the vision tower", routine=("embed", "engine")),
    # Counted on every routine case; reported by the engine path only (the routine
    # suite's asv names stay as its history has them).
    MetricSpec(name="encoder_syncs", unit="syncs", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False, description="host-device synchronisations inside the vision tower",
               routine=("engine",)),
    MetricSpec(name="encoder_calls", unit="calls", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False, description="vision-tower forward calls over the whole schedule",
               routine=("encode", "embed", "engine")),
    MetricSpec(name="bandwidth_fraction", unit="ratio", direction=Direction.HIGHER, exact=False, fmt="plain",
               headline=False,
               description="injection bandwidth as a fraction of a plain copy of the same rows (a timing ratio)"),
    MetricSpec(name="copy_bandwidth", unit="GB/s", direction=Direction.HIGHER, exact=False, fmt="plain",
               headline=True,
               description="plain-copy bandwidth of the injected rows, the reference of bandwidth_fraction"),
    # Peak memory of one pass (vlmpath.measure.memory); its band is a thresholds.yaml rule.
    MetricSpec(name="peak_bytes", unit="bytes", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False,
               description="peak allocated bytes of one pass (allocator counter on a GPU, live tensors on CPU)",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    MetricSpec(name="reserved_bytes", unit="bytes", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="peak bytes the allocator reserved during one pass",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    # The deterministic gate on an engine's own code (``suite.routine_counts``): one pass with
    # the tower replayed, counted natively. The reference routine's twins are counted by
    # ``vlmpath instructions`` / ``ci pr --counts`` (``selfcheck.ir_cases``).
    MetricSpec(name="routine_bytecodes", unit="bytecodes", direction=Direction.LOWER, exact=False, fmt="count",
               headline=False,
               description="Python bytecodes one pass of the engine's routine executes (tower replayed)",
               routine=("engine",), may_be_unmeasured=True, deterministic=True),
    MetricSpec(name="routine_aten_elements", unit="elements", direction=Direction.LOWER, exact=False,
               fmt="count", headline=False,
               description="elements aten operators write in one pass of the engine's routine (tower replayed)",
               routine=("engine",), may_be_unmeasured=True, deterministic=True),
    # The embedding path's exact counts over one pass (``measure.path_ledger``), on the
    # reference and through each engine's own cache classes (issue 38). Judged exactly: one
    # more re-encode, eviction or retained byte is a regression. Unmeasured (an older
    # package, an engine whose cache the adapter cannot see): skipped, never a 0.
    MetricSpec(name="reencodes", unit="encodes", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False,
               description="encodes of an item's content beyond its first (dropped cache entries, duplicates)",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    MetricSpec(name="off_chunk_encodes", unit="encodes", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False, description="items encoded in a step whose chunk touches none of their spans",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    MetricSpec(name="cache_evictions", unit="evictions", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False, description="entries the embedding cache dropped to make room",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    MetricSpec(name="cache_retained_bytes", unit="retained bytes", direction=Direction.LOWER, exact=True,
               fmt="count", headline=False,
               description="peak bytes of storage the embedding cache keeps alive (each storage once)",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    MetricSpec(name="cache_unaccounted_bytes", unit="retained bytes", direction=Direction.LOWER, exact=True,
               fmt="count", headline=False,
               description="peak bytes the cache keeps alive beyond the payload it accounts (views pinning a batch)",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    MetricSpec(name="foreign_rows", unit="items", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False,
               description="items whose placed rows are another item's (served from its cache entry: a key collision)",
               routine=("encode", "embed", "engine"), report_failed=True, may_be_unmeasured=True),
    MetricSpec(name="cache_over_budget_bytes", unit="retained bytes", direction=Direction.LOWER, exact=True,
               fmt="count", headline=False,
               description="peak bytes the cache keeps alive beyond its configured budget",
               routine=("encode", "embed", "engine"), may_be_unmeasured=True),
    # Hand-written tracks with no record field: each needs a row so that its meaning is
    # the table's, never what benchmarks.json says (``metric_for_method``).
    MetricSpec(name="hash_s", unit="seconds", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False,
               description="seconds the receiving side spends hashing items (bench_embed.EmbedRoutine.track_hash_s)"),
    # The instruction counts of ``vlmpath instructions`` / ``ci pr --counts``
    # (``selfcheck.ir_cases``): deterministic, judged by their thresholds.yaml bands.
    MetricSpec(name="instructions", unit="instructions", direction=Direction.LOWER, exact=False, fmt="count",
               headline=False, description="CPU instructions one pass executes (callgrind)", deterministic=True),
    MetricSpec(name="routine_instructions", unit="instructions", direction=Direction.LOWER, exact=False,
               fmt="count", headline=False,
               description="CPU instructions one pass of the routine executes, tower replayed (callgrind)",
               deterministic=True),
    MetricSpec(name="bytecodes", unit="bytecodes", direction=Direction.LOWER, exact=False, fmt="count",
               headline=False,
               description="Python bytecodes one pass executes (the tower, or the pass with it)",
               deterministic=True),
    MetricSpec(name="aten_elements", unit="elements", direction=Direction.LOWER, exact=False, fmt="count",
               headline=False,
               description="elements aten operators write in one pass (the tower, or the pass with it)",
               deterministic=True),
    # A real server's end-to-end numbers (``vlmpath serve-bench``, ``compare.from_serve``):
    # measured per workload and concurrency level, not per routine case (no path row).
    MetricSpec(name="serve_request_per_s", unit="req/s", direction=Direction.HIGHER, exact=False, fmt="plain",
               headline=False,
               description="completed requests per second of a served concurrency level (greedy, fixed max_tokens)"),
    MetricSpec(name="serve_output_tok_per_s", unit="tok/s", direction=Direction.HIGHER, exact=False,
               fmt="plain", headline=True,
               description="completion tokens per second of a served concurrency level"),
    MetricSpec(name="serve_input_tok_per_s", unit="tok/s", direction=Direction.HIGHER, exact=False, fmt="plain",
               headline=False,
               description="prompt tokens (vision placeholders included) per second of a served concurrency level"),
    MetricSpec(name="serve_ttft_p50_s", unit="seconds", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="median time to the first streamed content chunk"),
    MetricSpec(name="serve_ttft_p99_s", unit="seconds", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="99th percentile time to the first streamed content chunk"),
    MetricSpec(name="serve_itl_p50_s", unit="seconds", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="median gap between streamed content chunks (inter-token latency)"),
    MetricSpec(name="serve_itl_p99_s", unit="seconds", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="99th percentile gap between streamed content chunks"),
    MetricSpec(name="serve_agreement_solo", unit="fraction", direction=Direction.HIGHER, exact=True,
               fmt="fraction", headline=False,
               description="share of greedy outputs identical to the same request served alone (concurrency 1)"),
    MetricSpec(name="serve_agreement_base", unit="fraction", direction=Direction.HIGHER, exact=True,
               fmt="fraction", headline=False,
               description="share of head's greedy outputs identical to base's for the same requests"),
    MetricSpec(name="serve_errors", unit="errors", direction=Direction.LOWER, exact=True, fmt="count",
               headline=False,
               description="requests of a served level that failed (HTTP error, timeout, server gone)"),
    MetricSpec(name="serve_labelled_score", unit="fraction", direction=Direction.HIGHER, exact=True,
               fmt="fraction", headline=False,
               description="labelled-set score: share of a labelled set's questions (serve-bench --labelled) whose greedy "
                           "answer equals the label after normalisation"),
)

#: Units asv implies by a benchmark's prefix (no row of their own: ``time_``, ``peakmem_``).
IMPLIED_UNITS: tuple[MetricSpec, ...] = (
    MetricSpec(name="time", unit="seconds", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="wall-clock time of the timed call"),
    MetricSpec(name="peakmem", unit="bytes", direction=Direction.LOWER, exact=False, fmt="scaled",
               headline=False, description="peak resident memory of the benchmark process"),
)

METRIC_BY_NAME: Mapping[str, MetricSpec] = MappingProxyType({m.name: m for m in METRICS})


def by_unit(rows: tuple[MetricSpec, ...]) -> Mapping[str, MetricSpec]:
    """unit -> the first row with it; rows sharing a unit must agree (else ValueError)."""
    out: dict[str, MetricSpec] = {}
    for m in rows:
        seen = out.get(m.unit)
        # A unit's meaning must be one: two rows with one unit must agree on what the
        # comparison and the formatter read from the unit.
        meaning = lambda r: (r.direction, r.exact, r.fmt, r.deterministic)  # noqa: E731
        if seen is not None and meaning(seen) != meaning(m):
            raise ValueError(f"metrics {seen.name} and {m.name} share unit {m.unit!r} but disagree")
        out.setdefault(m.unit, m)
    return MappingProxyType(out)


#: The first row per unit (rows sharing a unit agree: checked above).
METRIC_BY_UNIT: Mapping[str, MetricSpec] = by_unit(METRICS + IMPLIED_UNITS)


def metric_by_unit() -> Mapping[str, MetricSpec]:
    """``METRIC_BY_UNIT`` as the table is now (a row added at run time included)."""
    return by_unit(METRICS + IMPLIED_UNITS)


def unit_spec(unit: str) -> MetricSpec | None:
    return metric_by_unit().get(unit)


def units_with(fmt: str) -> tuple[str, ...]:
    return tuple(u for u, m in metric_by_unit().items() if m.fmt == fmt)


def headline_units() -> tuple[str, ...]:
    """Units of the headline (throughput) metrics, in table order."""
    return tuple(dict.fromkeys(m.unit for m in METRICS if m.headline))


def record_metrics() -> tuple[MetricSpec, ...]:
    """The metrics a measured case reports (every row naming a path): the fields of the
    record's summary, of the mirror suite's ``extra_info`` and of the pytest reader."""
    return tuple(m for m in METRICS if m.routine)


def extra_info_units() -> Mapping[str, str]:
    """pytest-benchmark ``extra_info`` key -> unit: the record's metrics."""
    return MappingProxyType({m.name: m.unit for m in record_metrics()})


def routine_metrics(path: str) -> tuple[MetricSpec, ...]:
    """The metrics a path (``REPORTING_PATHS``) reports, in table order."""
    if path not in REPORTING_PATHS:
        raise ValueError(f"unknown routine path {path!r}: use one of {REPORTING_PATHS}")
    return tuple(m for m in METRICS if path in m.routine)


def _implied(prefix: str | None) -> MetricSpec | None:
    kind = IMPLIED_KIND.get(prefix or "")
    return next((m for m in IMPLIED_UNITS if m.name == kind), None)


def metric_for_method(benchmark: str) -> MetricSpec | None:
    """The row that defines a benchmark by its method name: ``x.Y.track_accuracy`` ->
    ``accuracy``, ``x.Y.time_routine`` -> asv's implied ``time``; None when the table has
    no row for it (the comparison then does not judge it). Read when called, so that a row
    added at run time is seen."""
    leaf = benchmark.rsplit(".", 1)[-1]
    prefix = kind_prefix(leaf)
    if prefix == "track_":
        return next((m for m in METRICS if m.track_method == leaf), None)
    return _implied(prefix)


def case_of(benchmark: str) -> str:
    """The case a benchmark row measures: ``x.Engine.track_syncs`` and ``x.Engine.time_y``
    belong to ``x.Engine`` (asv stores one result per method; with its parameters, the
    class is the case). A pytest-benchmark row ``test_x.accuracy`` belongs to ``test_x``.
    A name with no method leaf is its own case."""
    head, dot, leaf = benchmark.rpartition(".")
    if dot and (kind_prefix(leaf) is not None or any(m.name == leaf for m in METRICS)):
        return head
    return benchmark
