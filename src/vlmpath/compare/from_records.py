"""What does one ``vlmpath measure --json`` run look like as the comparison's typed results?

``vlmpath measure`` (and the engine layer's ``measure_cases``) writes one ``CaseRecord``
dict per case; the comparison (``compare.verdict.compare``) reads ``RunResults`` of
``Metric``\\ s. ``run_from_records`` turns one side's records into one ``RunResults`` so
that a pull request to an *engine* (``vlmpath ci pr --engine-src``) is judged by exactly
the rules that judge vlmpath's own asv runs: direction and exactness come from the unit
(``thresholds.yaml``: tok/s higher and banded; fraction, syncs and calls exact), never
from this module.

One record gives one ``Metric`` per number in ``RECORD_METRICS``. The benchmark name is
``ENGINE_BENCH.<leaf>`` and the parameters are the workload (and the pipeline when the
records hold more than one), so a comment reads ``Engine.accuracy multi_region``.
A record that failed keeps what it measured: its accuracy (failed items count as
misplaced) is still a value, and its tok/s is a failed case carrying the engine's message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.core.errors import VlmpathError

#: Benchmark-name prefix of every engine metric (a stand-in for asv's module.Class).
ENGINE_BENCH = "engine_embed.Engine"

#: record field -> (benchmark leaf, unit). Units are the keys of ``thresholds.yaml``.
RECORD_METRICS: tuple[tuple[str, str, str], ...] = (
    ("tok_per_s", "track_tok_per_s", "tok/s"),
    ("accuracy", "track_accuracy", "fraction"),
    ("syncs", "track_syncs", "syncs"),
    ("encoder_syncs", "track_encoder_syncs", "syncs"),
    ("encoder_calls", "track_encoder_calls", "calls"),
)

SOURCE = "records"


def _pipeline_label(rec: Mapping[str, Any]) -> str:
    p = rec.get("pipeline")
    if isinstance(p, Mapping):
        return "/".join(str(p[k]) for k in ("encode", "inject", "count", "hash") if k in p) or "default"
    return str(p) if p else "default"


def _params(rec: Mapping[str, Any], with_pipeline: bool) -> tuple[tuple[str, str], ...]:
    out = [("workload", str(rec["workload"]))]
    if with_pipeline:
        out.append(("pipeline", _pipeline_label(rec)))
    return tuple(out)


def _number(rec: Mapping[str, Any], field: str, where: str) -> float | None:
    v = rec.get(field)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise VlmpathError(f"{where}: field {field!r} is {v!r}, not a number; re-run `vlmpath measure --json`")
    return float(v)


def _tok_samples(rec: Mapping[str, Any]) -> tuple[float, ...]:
    # A pass's tok/s is the schedule's prefill tokens over that pass's seconds.
    tokens = rec.get("prefill_tokens")
    if not isinstance(tokens, (int, float)) or tokens <= 0:
        return ()
    return tuple(float(tokens) / float(s) for s in rec.get("samples") or () if isinstance(s, (int, float)) and s > 0)


def metrics_from_record(rec: Mapping[str, Any], *, machine: str, commit: str, with_pipeline: bool,
                        where: str = "record") -> list[Metric]:
    """The ``RECORD_METRICS`` of one CaseRecord dict, as ``Metric``\\ s."""
    if not isinstance(rec, Mapping) or not rec.get("workload"):
        raise VlmpathError(f"{where}: not a CaseRecord (no 'workload'); pass the JSON Lines of `vlmpath measure --json`")
    params = _params(rec, with_pipeline)
    error = rec.get("error")
    error = str(error) if error else None
    out = []
    for field, leaf, unit in RECORD_METRICS:
        value = _number(rec, field, where)
        # A counter or accuracy that was measured is a value even when a step failed;
        # a missing one (not counted, or the case never ran) is a failure with its message.
        failed = value is None and (error is not None or field == "tok_per_s")
        skipped = value is None and not failed
        out.append(Metric(
            machine=machine, benchmark=f"{ENGINE_BENCH}.{leaf}", params=params, unit=unit, value=value,
            samples=_tok_samples(rec) if field == "tok_per_s" and value is not None else (),
            error=(error or "failed (no value recorded)") if failed else None,
            skipped=skipped, commit=commit, source=SOURCE,
        ))
    return out


def run_from_records(records: Iterable[Mapping[str, Any]], *, machine: str, commit: str,
                     notes: Iterable[str] = (), where: str = "records") -> RunResults:
    """One side's records as ``RunResults`` (one machine). Two records of one case are an error."""
    recs = list(records)
    if not recs:
        raise VlmpathError(f"{where}: no records; the measuring run wrote nothing (see its log)")
    with_pipeline = len({_pipeline_label(r) for r in recs if isinstance(r, Mapping)}) > 1
    metrics: dict[tuple, Metric] = {}
    for i, rec in enumerate(recs):
        for m in metrics_from_record(rec, machine=machine, commit=commit, with_pipeline=with_pipeline,
                                     where=f"{where}[{i}]"):
            if m.case in metrics:
                raise VlmpathError(f"{where}: case {m.benchmark} {dict(m.params)} appears twice; "
                                   "measure each workload once per side")
            metrics[m.case] = m
    run = MachineRun(machine=machine, commit=commit, metrics=tuple(metrics[k] for k in sorted(metrics)))
    return RunResults(commit=commit, machines=(run,), source=SOURCE, notes=tuple(notes))


def engines_of(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """``engine version`` of the records (what measured them), e.g. ``['sglang 0.5.23']``."""
    return sorted({f"{r.get('engine')} {r.get('engine_version') or ''}".strip()
                   for r in records if isinstance(r, Mapping) and r.get("engine")})
