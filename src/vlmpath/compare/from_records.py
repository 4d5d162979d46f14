"""What does one ``vlmpath measure --json`` run look like as the comparison's typed results?

``vlmpath measure`` (and the engine layer's ``measure_cases``) gives one ``CaseRecord``
(``vlmpath.suite.record``, parsed there) per case; the comparison
(``compare.verdict.compare``) reads ``RunResults`` of ``Metric``\\ s. ``run_from_records``
turns one side's records into one ``RunResults`` so that a pull request to an *engine*
(``vlmpath ci pr --engine-src``) is judged by exactly the rules that judge vlmpath's own
asv runs: direction and exactness come from the unit (the metric table: tok/s higher and
banded; fraction, syncs and calls exact), never from this module.

One record gives one ``Metric`` per engine row of the metric table (``record_metrics``,
from ``vlmpath.core.metrics``). The benchmark name is ``ENGINE_BENCH.<leaf>`` and the
parameters are the workload (and the pipeline when the records hold more than one), so a
comment reads ``Engine.accuracy multi_region``. A record that failed keeps what it
measured: its accuracy (failed items count as misplaced) is still a value, and its tok/s
is a failed row carrying the engine's message; the comparison shows the whole case as one
failure with that message (``compare.verdict``: a failed case is one failure).
"""

from __future__ import annotations

from collections.abc import Iterable

from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import ENGINE_PATH, routine_metrics
from vlmpath.suite.record import CaseRecord

#: Benchmark-name prefix of every engine metric (a stand-in for asv's module.Class).
ENGINE_BENCH = "engine_embed.Engine"


def record_metrics() -> tuple[tuple[str, str, str], ...]:
    """record field -> (benchmark leaf, unit): the metric table's engine rows
    (``vlmpath.core.metrics``), read when called so that a row added there is seen."""
    return tuple((m.name, m.track_method, m.unit) for m in routine_metrics(ENGINE_PATH))


SOURCE = "records"


def _pipeline_label(rec: CaseRecord) -> str:
    p = rec.pipeline
    return "/".join(str(p[k]) for k in ("encode", "inject", "count", "hash") if k in p) or "default"


def _params(rec: CaseRecord, with_pipeline: bool) -> tuple[tuple[str, str], ...]:
    out = [("workload", rec.workload)]
    if with_pipeline:
        out.append(("pipeline", _pipeline_label(rec)))
    return tuple(out)


def _tok_samples(rec: CaseRecord) -> tuple[float, ...]:
    # A pass's tok/s is the schedule's prefill tokens over that pass's seconds.
    tokens = rec.prefill_tokens
    if tokens is None or tokens <= 0:
        return ()
    return tuple(float(tokens) / s for s in rec.samples if s > 0)


def metrics_from_record(rec: CaseRecord, *, machine: str, commit: str, with_pipeline: bool) -> list[Metric]:
    """The engine metrics of the table (``record_metrics``) of one record, as ``Metric``\\ s."""
    params = _params(rec, with_pipeline)
    error = rec.error or None
    out = []
    for field, leaf, unit in record_metrics():
        raw = getattr(rec, field)
        value = None if raw is None else float(raw)
        # A counter or accuracy that was measured is a value even when a step failed;
        # a missing one (not counted, or the case never ran) is a failure with its message.
        failed = value is None and (error is not None or field == "tok_per_s")
        if value is None and not failed:
            # Not measured by this engine on this device (GPU allocator bytes on a CPU): no
            # row. A side that measured it and a side that did not still differ: the case
            # is then on one side only, which the verdict names as not judged.
            continue
        out.append(Metric(
            machine=machine, benchmark=f"{ENGINE_BENCH}.{leaf}", params=params, unit=unit, value=value,
            samples=_tok_samples(rec) if field == "tok_per_s" and value is not None else (),
            error=(error or "failed (no value recorded)") if failed else None,
            commit=commit, source=SOURCE,
        ))
    return out


def run_from_records(records: Iterable[CaseRecord], *, machine: str, commit: str,
                     notes: Iterable[str] = (), where: str = "records") -> RunResults:
    """One side's records as ``RunResults`` (one machine). Two records of one case are an error."""
    recs = list(records)
    if not recs:
        raise VlmpathError(f"{where}: no records; the measuring run wrote nothing (see its log)")
    with_pipeline = len({_pipeline_label(r) for r in recs}) > 1
    metrics: dict[tuple, Metric] = {}
    for rec in recs:
        for m in metrics_from_record(rec, machine=machine, commit=commit, with_pipeline=with_pipeline):
            if m.case in metrics:
                raise VlmpathError(f"{where}: case {m.benchmark} {dict(m.params)} appears twice; "
                                   "measure each workload once per side")
            metrics[m.case] = m
    run = MachineRun(machine=machine, commit=commit, metrics=tuple(metrics[k] for k in sorted(metrics)))
    return RunResults(commit=commit, machines=(run,), source=SOURCE, notes=tuple(notes))


def engines_of(records: Iterable[CaseRecord]) -> list[str]:
    """``engine version`` of the records (what measured them), e.g. ``['NAME==X X']``; with the
    model runner that ran and why where the record says (an engine's seam ``runner``:
    ``['NAME==X X runner v1 (why)']``), at most 200 characters."""
    def one(r: CaseRecord) -> str:
        runner = (r.engine_seams or {}).get("runner")
        text = f"{r.engine} {r.engine_version or ''}".strip() + (f" runner {runner}" if runner else "")
        return text[:200]

    return sorted({one(r) for r in records if r.engine})
