"""Which records does one engine give for a list of cases, measured inside its own environment?

``python -m vlmpath.suite.worker --out RECORDS.jsonl`` reads a job (JSON on stdin: the
cases, ``repeat``, ``count``, ``device``, ``weights`` and the engine's label) and measures
every case with the engine's adapter (its entry in ``vlmpath.engines.registry``) imported
in *this* interpreter (an engine environment's python, with an ``--engine-src`` tree first
on its path), through the same ``measure_case`` as the
reference. It writes one JSON record per case, in order, appending as it goes, so that a
crash still leaves the records measured so far (``engine_run`` fills in the rest).

A case that raises is a failed record carrying the error, and the next case runs; an
engine that does not load at all gives every case the same failed record.
"""

from __future__ import annotations

import argparse
import json
import sys

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineAdapter


def case_from_dict(d: dict):
    from vlmpath.engines.reference import Pipeline
    from vlmpath.suite.measure import Case

    return Case(d["workload"], Pipeline(**d["pipeline"]), d.get("scale", "tiny"), int(d.get("seed", 0)))


def case_to_dict(case) -> dict:
    return {"workload": case.workload, "pipeline": case.pipeline.to_dict(), "scale": case.scale,
            "seed": case.seed}


def failed_record(case, error: str, engine: str, version: str | None = None, seams: dict | None = None,
                  device: str = "cpu") -> dict:
    """The record of a case that measured nothing: the error, no tok/s, no accuracy."""
    from vlmpath.suite.measure import CaseRecord

    return CaseRecord(
        workload=case.workload, scale=case.scale, pipeline=case.pipeline.to_dict(), tok_per_s=None,
        accuracy=None, max_abs_err=None, encoder_calls=0, cache_hits=0, wall_s=None, samples=(),
        error=error[:500], prefill_tokens=0, steps=0, failed_steps=0, items=0, placed=0, hash_s=None,
        sha256_digests=0, syncs=None, encoder_syncs=None, device=device, engine=engine,
        engine_version=version, engine_seams=dict(seams or {}),
    ).to_dict()


def error_text(exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"[:500]


def load_engine(label: str) -> EngineAdapter:
    """The adapter of the engine ``label`` names (its registry entry's class), built here."""
    from vlmpath.engines import registry
    from vlmpath.engines.base import EngineError, parse_engine

    spec = parse_engine(label)
    entry = registry.get(spec.name)
    engine = entry.load_adapter()(label)
    if not isinstance(engine, EngineAdapter):
        raise EngineError(f"engine {spec.name!r}: adapter {entry.adapter} lacks what the suite drives "
                          "(label, version, seams, routine(), arrive(): vlmpath.engines.base.EngineAdapter)")
    missing = [k for k in entry.seams if k not in engine.seams]
    if missing:  # every record must say which variant of each seam the entry promises ran
        raise EngineError(f"engine {spec.name!r} {engine.version}: its adapter found no {', '.join(missing)} "
                          "seam (its registry entry says it probes them)")
    return engine


def run_job(job: dict, out) -> int:
    """Measure the job's cases, writing one JSON line per case to ``out``; returns failures."""
    from vlmpath.suite.measure import Session, measure_case

    cases = [case_from_dict(d) for d in job["cases"]]
    label = job["engine"]
    device = job.get("device") or "cpu"
    try:
        engine = load_engine(label)
    except Exception as exc:  # an engine that cannot load fails every case, with its reason
        for case in cases:
            out.write(json.dumps(failed_record(case, error_text(exc), label, device=device), sort_keys=True) + "\n")
            out.flush()
        return len(cases)
    session = Session(device, job.get("weights"))
    failures = 0
    for case in cases:
        print(f"worker: {label} {case.label}", file=sys.stderr, flush=True)
        try:
            rec = measure_case(case, session, repeat=int(job.get("repeat", 3)),
                               count=bool(job.get("count", True)), engine=engine,
                               threads=job.get("threads")).to_dict()
        except Exception as exc:  # one case's failure is a result; the run goes on
            rec = failed_record(case, error_text(exc), label, engine.version, engine.seams, device)
        failures += rec["error"] is not None
        out.write(json.dumps(rec, sort_keys=True) + "\n")
        out.flush()
    return failures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vlmpath.suite.worker", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSON Lines file the records are appended to")
    a = p.parse_args(argv)
    try:
        job = json.load(sys.stdin)
    except json.JSONDecodeError as exc:
        raise VlmpathError(f"worker: the job on stdin is not JSON ({exc})") from exc
    with open(a.out, "a", encoding="utf-8") as out:
        run_job(job, out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
