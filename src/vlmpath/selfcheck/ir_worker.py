"""How many instructions does one pass of each routine case of a checkout execute?

The worker of ``selfcheck.ir_cases``: run by file path (``runpy``), under callgrind, with
``PYTHONPATH`` set to one side's ``src``. So this file is the fixed harness (like head's
``benchmarks/`` under asv) and every ``vlmpath`` import below is the code under test: the
case axes (``suite.cases``), ``suite.measure.prepare``, ``engines.reference.EmbedRoutine``.
The callgrind driver (``selfcheck/callgrind.py``) is loaded by path from beside this file, never
from the side, which may predate it.

Per selected ``EmbedRoutine(pipeline, preset)`` case: build it as ``measure_case`` does
(workload, arrival through the pipeline's hash path, tower, text table; none of it counted),
one warm-up pass (uncounted: first calls load kernels and grow the allocator), then one
counted pass of every step through a fresh routine (empty cache, as each timed pass). A
side whose checkout lacks what this file imports is reported as ``not_measured`` with the
reason; a case that raises is a record with its error, as a failing benchmark.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

BENCH = "bench_embed.EmbedRoutine.track_instructions"


def _driver():
    spec = importlib.util.spec_from_file_location("_vlmpath_callgrind", Path(__file__).with_name("callgrind.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _wanted(pattern: str | None, pipeline: str, preset: str) -> bool:
    # asv's --bench spelling of a case, with quoted and with bare parameters.
    names = (f"{BENCH}('{pipeline}', '{preset}')", f"{BENCH}({pipeline}, {preset})")
    return pattern is None or any(re.search(pattern, n) for n in names)


def _imports() -> dict:
    import vlmpath
    from vlmpath.engines.reference import EmbedRoutine
    from vlmpath.suite import cases
    from vlmpath.suite.measure import Session, prepare

    return {"file": vlmpath.__file__, "EmbedRoutine": EmbedRoutine, "Session": Session, "prepare": prepare,
            "cases": [(pl, pr) for pl in cases.PIPELINE_NAMES for pr in cases.ROUTINE_PRESETS],
            "pipeline": cases.pipeline}


def _count_case(api: dict, counter, session, pipeline: str, preset: str, scale: str) -> dict:
    rec: dict = {"pipeline": pipeline, "preset": preset, "instructions": None, "error": None}
    try:
        pipe = api["pipeline"](pipeline)
        pipe.validate()
        prep = api["prepare"](preset, pipe.hash, scale, session)
        wl = prep.workload

        def one_pass():
            routine = api["EmbedRoutine"](wl, prep.encoder, pipe, prep.table)  # built outside the count
            return lambda: [routine.run_step(step) for step in wl.steps]

        one_pass()()  # warm-up, not counted (uninstrumented: it warms the program, not valgrind)
        counter.instrument(True)  # set-up and warm-up ran uninstrumented (~4x native, not ~100x)
        try:
            rec["instructions"] = counter.count(one_pass())
        finally:
            counter.instrument(False)
        rec["steps"] = len(wl.steps)
    except Exception as exc:  # a case that fails is a result (the benchmark's failure), not a crash
        rec["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
    return rec


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    result: dict = {"vlmpath": None, "not_measured": None, "records": []}
    try:
        api = _imports()
    except (ImportError, AttributeError) as exc:
        result["not_measured"] = f"the checkout lacks what the counter imports ({type(exc).__name__}: {exc})"
    else:
        result["vlmpath"] = api["file"]
        if not spec.get("probe"):
            import torch

            torch.set_num_threads(int(spec["threads"]))
            counter = _driver().Counter(spec["dumps"])
            session = api["Session"]("cpu")
            result["records"] = [_count_case(api, counter, session, pl, pr, spec["scale"])
                                 for pl, pr in api["cases"] if _wanted(spec.get("bench"), pl, pr)]
    Path(spec["out"]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - runs by path, under valgrind (see selfcheck.ir_cases)
    main(sys.argv[-1])
