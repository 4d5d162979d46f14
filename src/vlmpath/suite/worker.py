"""Which records does one engine give for lists of cases, measured inside its own environment?

``python -m vlmpath.suite.worker`` reads a job (JSON on stdin, written by ``suite.engine_run``:
the engine's label, ``device``, ``weights``, ``threads`` and its ``sets``, each a case set's
``cases``, ``repeat``, ``count``, ``tower``, ``engine_options``, ``faults`` and ``out``) and
measures every case of every set, in order, with the engine's adapter (its entry in
``vlmpath.engines.registry``) imported in *this* interpreter (an engine environment's python,
with an ``--engine-src`` tree first on its path), through the same ``measure_case`` as the
reference. One start serves every set: the engine is imported once, and the adapter is built
anew for each set, with that set's engine options (checked against the entry once more:
``engines.engine_options``, then handed over untouched and written into each of the set's
records) and planted faults (``adapter_common``: they reach that adapter alone), and closed
after its last case, so nothing of one set (its options, tower, faults, server state) reaches
the next. Each set writes one record per case to its own ``out``
(``suite.record.dumps_record``), appending as it goes, so that a crash still leaves the records
measured so far (``engine_run`` fills in the rest); the stderr line ``worker: set N of M``
comes before set N.

A case that raises is a failed record carrying the error, and the next case runs; an engine
that does not load at all gives every case of the set the same failed record. An engine option
the engine does not declare, or its release cannot honour (``EngineOptionError``: a runner the
release does not have) is bad input, not a result: one ``REFUSED`` line on stderr for that set,
no record, the next set runs, and the worker exits 2 (``engine_run`` reports the refusal for
that set: the CLI's one-line refusal). An adapter's ``close()`` (where it has one: the server
state it set up) runs after each set's last case.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from contextlib import ExitStack

from vlmpath.core.errors import EngineOptionError, VlmpathError
from vlmpath.suite.record import CaseRecord, dumps_record
from vlmpath.engines.base import EngineAdapter


def case_from_dict(d: dict):
    from vlmpath.engines.pipelines import Pipeline
    from vlmpath.suite.measure import Case

    return Case(d["workload"], Pipeline(**d["pipeline"]), d.get("scale", "tiny"), int(d.get("seed", 0)))


def case_to_dict(case) -> dict:
    return {"workload": case.workload, "pipeline": case.pipeline.to_dict(), "scale": case.scale,
            "seed": case.seed}


def failed_record(case, error: str, engine: str, version: str | None = None, seams: dict | None = None,
                  device: str = "cpu") -> CaseRecord:
    """The record of a case that measured nothing: the error and no number at all (not a
    zero: zero encoder calls would read as an improvement)."""
    return CaseRecord(
        workload=case.workload, scale=case.scale, pipeline=case.pipeline.to_dict(), error=error[:500],
        device=device, engine=engine, engine_version=version, engine_seams=dict(seams or {}),
    )


def error_text(exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"[:500]


#: The start of the worker's stderr line that carries a refusal (``EngineOptionError``).
REFUSED = "vlmpath worker refused: "
REFUSED_RC = 2
#: The start of the stderr line before each set: ``worker: set N of M`` (N counts from 1).
SET_LINE = "worker: set "


def options_of(label: str, asked: Mapping[str, str] | None) -> dict[str, str]:
    """The set's engine options checked against the entry of the engine ``label`` names,
    every declared one with its value (``engines.engine_options.resolve``)."""
    from vlmpath.engines.base import EngineSpec
    from vlmpath.engines.engine_options import resolve_for

    return resolve_for(EngineSpec.parse(label), asked or {})


def load_engine(label: str, options: Mapping[str, str] | None = None, faults: str | None = None) -> EngineAdapter:
    """The adapter of the engine ``label`` names (its registry entry's class), built here;
    ``options`` (checked: ``options_of``) go to it untouched when its entry declares any
    (``Class(label, options=...)``); ``faults`` (tests only: the planted faults of one case
    set, ``adapter_common``) to an adapter that takes them, this one alone."""
    from vlmpath.core.errors import EngineError
    from vlmpath.engines import registry
    from vlmpath.engines.base import EngineSpec

    spec = EngineSpec.parse(label)  # the job's label crossed into this process: parsed again here
    entry = registry.get(spec.name)
    chosen = options_of(label, options)
    engine = entry.load_adapter()(label, **({"options": chosen} if entry.options else {}))
    if faults is not None:
        if not hasattr(engine, "faults"):
            raise EngineError(f"engine {spec.name!r}: its adapter takes no planted faults "
                              "(adapter_common.ServerStateHolder.faults; a test hook)")
        engine.faults = faults
    if not isinstance(engine, EngineAdapter):
        raise EngineError(f"engine {spec.name!r}: adapter {entry.adapter} lacks what the suite drives "
                          "(label, version, seams, routine(), arrive(): vlmpath.engines.base.EngineAdapter)")
    missing = [k for k in entry.seams if k not in engine.seams]
    if missing:  # every record must say which variant of each seam the entry promises ran
        raise EngineError(f"engine {spec.name!r} {engine.version}: its adapter found no {', '.join(missing)} "
                          "seam (its registry entry says it probes them)")
    return engine


def run_set(job_set: dict, label: str, session, device: str, threads, out) -> int:
    """Measure one set's cases with an adapter built for it, writing one JSON line per case
    to ``out``; returns its failures (-1: refused, see the module docstring)."""
    from vlmpath.suite.measure import measure_case

    cases = [case_from_dict(d) for d in job_set["cases"]]
    options = dict(job_set.get("engine_options") or {})
    try:
        options = options_of(label, options)  # what the records say the set ran with
        engine = load_engine(label, options, job_set.get("faults"))
    except EngineOptionError as exc:  # bad input: refused before any case of the set
        print(REFUSED + str(exc).splitlines()[0][:400], file=sys.stderr, flush=True)
        return -1
    except Exception as exc:  # an engine that cannot load fails every case, with its reason
        for case in cases:
            rec = replace(failed_record(case, error_text(exc), label, device=device), engine_options=options)
            out.write(dumps_record(rec) + "\n")
            out.flush()
        return len(cases)
    failures = 0
    try:
        for case in cases:
            print(f"worker: {label} {case.label}", file=sys.stderr, flush=True)
            try:
                rec = measure_case(case, session, repeat=int(job_set.get("repeat", 3)),
                                   count=bool(job_set.get("count", True)), engine=engine,
                                   threads=threads, tower=job_set.get("tower") or "ours")
            except Exception as exc:  # one case's failure is a result; the run goes on
                rec = failed_record(case, error_text(exc), label, engine.version, engine.seams, device)
            failures += rec.error is not None
            out.write(dumps_record(replace(rec, engine_options=options)) + "\n")
            out.flush()
    finally:  # what the adapter set up around the engine (a server's groups) is taken down
        close = getattr(engine, "close", None)
        if close is not None:
            close()
    return failures


def run_job(job: dict, outs) -> list[int]:
    """Measure the job's sets in order, set i writing to ``outs[i]``; returns each set's
    ``run_set`` result. One ``Session`` (the built encoders and tables) serves every set."""
    from vlmpath.suite.measure import Session

    device = job.get("device") or "cpu"
    session = Session(device, job.get("weights"))
    sets = job["sets"]
    results = []
    for i, (job_set, out) in enumerate(zip(sets, outs, strict=True)):
        print(f"{SET_LINE}{i + 1} of {len(sets)}", file=sys.stderr, flush=True)
        results.append(run_set(job_set, job["engine"], session, device, job.get("threads"), out))
    return results


def main() -> int:
    """The job (``suite.engine_run._run_worker`` writes it) comes as JSON on stdin; each
    set's ``out`` names the JSON Lines file its records are appended to."""
    try:
        job = json.load(sys.stdin)
    except json.JSONDecodeError as exc:
        raise VlmpathError(f"worker: the job on stdin is not JSON ({exc})") from exc
    with ExitStack() as stack:
        outs = [stack.enter_context(open(s["out"], "a", encoding="utf-8")) for s in job["sets"]]
        refused = any(r < 0 for r in run_job(job, outs))
    return REFUSED_RC if refused else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
