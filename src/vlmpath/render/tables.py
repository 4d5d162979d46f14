"""How are rows of records shown in a terminal?

A plain fixed-width text table (no dependency), used by the CLI for ``measure`` records
(``suite.record.CaseRecord``): one column per metric of the table (``core.metrics``). It
only formats what it is given.
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.core.metrics import record_metrics
from vlmpath.render.fmt import fmt_cell, fmt_value
from vlmpath.suite.record import CaseRecord


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[fmt_cell(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


#: The columns around the metrics: what ran, then how it ran.
_LEAD = ["engine", "workload", "pipeline", "encode", "inject", "count", "hash"]
_TAIL = ["hits", "threads", "error"]


def measure_headers() -> list[str]:
    """The table's columns: every metric a case reports (``vlmpath.core.metrics``, read
    when called so that a row added there is a column) between what ran and how."""
    return _LEAD + [m.name for m in record_metrics()] + _TAIL


def _entry(r: CaseRecord):
    """The registry entry of the engine a record's label names, or None (the reference, or an
    engine this install does not know: its record still prints)."""
    if r.engine == "reference" or not r.engine_seams:
        return None
    from vlmpath.core.errors import VlmpathError
    from vlmpath.engines import registry

    try:  # the engine a record's label names (its label is data read back: never re-parsed as a spec)
        return registry.get(r.engine.split("==")[0].split("@")[0])
    except VlmpathError:
        return None


def _stages(r: CaseRecord) -> list:
    """What ran per stage: the reference's strategies, or the engine's seams (the ones its
    registry entry shows per stage)."""
    if r.engine == "reference" or not r.engine_seams:
        return [r.pipeline.get(k, "?") for k in ("encode", "inject", "count", "hash")]
    entry = _entry(r)
    keys = entry.stage_seams if entry else ()
    return [r.engine_seams.get(k, "?") for k in keys] if keys else ["?"] * 4


def pipeline_name(r: CaseRecord) -> str:
    """Which named pipeline (``engines.pipelines``) a reference case ran: ``default``,
    ``legacy``, else ``custom`` (stages chosen one by one); for an engine's own code ``-``, or
    which of its model runners ran (its entry's ``runner_seam``: ``runner=v1``; the record's
    seam also says why)."""
    if r.engine != "reference" and r.engine_seams:
        entry = _entry(r)
        runner = r.engine_seams.get(entry.runner_seam) if entry and entry.runner_seam else None
        return f"runner={str(runner).split(' ')[0][:8]}" if runner else "-"
    from vlmpath.engines.pipelines import NAMED_PIPELINES

    stages = {k: r.pipeline.get(k) for k in ("encode", "inject", "count", "hash")}
    return next((name for name, p in NAMED_PIPELINES.items() if p.to_dict() == stages), "custom")


def _metric_cell(value: float | None, unit: str) -> str | None:
    return None if value is None else fmt_value(value, unit)  # None: the table's "-"


def measure_table(records: Sequence[CaseRecord]) -> str:
    """``vlmpath measure``'s table over records; each metric formatted by its unit. The
    error column says only which case failed ("yes", see below), and every failed case's
    whole message follows the table (a message cut to 60 characters once hid which item
    did not fit)."""
    rows = [[r.engine, r.workload, pipeline_name(r), *_stages(r),
             *(_metric_cell(getattr(r, m.name), m.unit) for m in record_metrics()),
             r.cache_hits, r.threads, "yes" if r.error else ""] for r in records]
    errors = [f"error: {r.engine} {r.workload}/{'+'.join(map(str, _stages(r)))}: {r.error}"
              for r in records if r.error]
    return "\n".join([text_table(measure_headers(), rows), *runner_lines(records), *errors])


def runner_lines(records: Sequence[CaseRecord]) -> list[str]:
    """Once per engine and runner: which of its model runners ran and why (the ``runner=``
    cell's whole seam, e.g. ``NAME==X: runner v1 (why)``)."""
    out = {}
    for r in records:
        entry = _entry(r)
        if entry and entry.runner_seam and r.engine_seams.get(entry.runner_seam):
            line = f"{r.engine}: runner {str(r.engine_seams[entry.runner_seam])[:200]}"
            out[line] = None
    return list(out)
