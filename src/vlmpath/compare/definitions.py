"""Which unit does a read row take, and when is its definition not to be trusted?

A row's meaning (unit, hence direction, exactness and band) comes from the metric table
(``vlmpath.core.metrics.metric_for_method``) by the benchmark's method name, never from
what an artifact says: a pull request writes its own ``benchmarks.json``, and a unit it
changed once turned an accuracy drop into an improvement. The artifact's unit is only
checked against the table: when it disagrees, or when the table has no row for the
method, the row is *untrusted*: not judged, named with this reason, and the comparison is
not green (``compare.comparison.ComparisonReport.exit_code``). Every reader of results
that may come from an artifact goes through ``trusted_unit``.
"""

from __future__ import annotations

from vlmpath.core.metrics import metric_for_method

#: How every untrusted row's reason begins (the headline groups reasons by their text).
UNTRUSTED = "untrusted definition"
#: Longest piece of artifact text (a claimed unit, a method name) quoted in a reason.
QUOTE_CHARS = 40


def _quote(text: str) -> str:
    return repr(text[:QUOTE_CHARS] + ("..." if len(text) > QUOTE_CHARS else ""))


def trusted_unit(benchmark: str, claimed: object = None) -> tuple[str, str | None]:
    """``(unit, None)`` when the table defines ``benchmark``'s method and ``claimed`` (the
    artifact's unit, None when it says nothing) agrees; else ``(unit to show, why the row
    is untrusted)``. The unit to show is the table's when it has a row, else the claim."""
    leaf = benchmark.rsplit(".", 1)[-1]
    spec = metric_for_method(benchmark)
    said = None if claimed in (None, "") else str(claimed)
    if spec is None:
        return (said or "unknown"), (f"{UNTRUSTED}: method {_quote(leaf)} has no row in the metric table "
                                     "(core/metrics.py); add one to judge it")
    if said is not None and said != spec.unit:
        return spec.unit, (f"{UNTRUSTED}: the results say unit {_quote(said)} for {_quote(leaf)}, "
                           f"the metric table says {spec.unit!r}")
    return spec.unit, None
