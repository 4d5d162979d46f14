"""How much work does one pass of each routine case of a checkout do, counted exactly?

The worker of ``selfcheck.ir_cases``: run by file path (``runpy``), natively (counter ``ops``:
bytecodes and aten elements) or under callgrind (counter ``callgrind``: instructions), with
``PYTHONPATH`` set to one side's ``src``. So this file is the fixed harness (like head's
``benchmarks/`` under asv) and every ``vlmpath`` import below is the code under test: the
case axes (``suite.cases``), ``suite.measure.prepare``, ``engines.reference.EmbedRoutine``.
The counters (``selfcheck/callgrind.py``, ``measure/op_count.py``) and the tower replay
(``measure/tower_replay.py``) are loaded by path from this file's own tree, never from the
side, which may predate them.

Per selected ``EmbedRoutine(pipeline, preset)`` case: build it as ``measure_case`` does
(workload, arrival through the pipeline's hash path, tower, text table; none of it counted).
Mode ``routine`` (the default): one uncounted pass through the real encoder records every
tower call (``measure/tower_replay.py``: it also warms the program up), one uncounted pass through
the replay warms the replayed path, and then one counted pass through a fresh routine
(empty cache, as each timed pass) whose encoder replays the recorded rows: the count is
the routine's own code. The tower is counted apart, once per encoder and scale over the
distinct item shapes the selected cases sent it (one call per shape): a ``tower`` record.
Mode ``full``: the counted pass runs the real tower (the count is mostly its arithmetic).
Every uncounted pass runs before instrumentation is switched on, once, for all counted
passes (every switch discards Valgrind's translations: minutes each with torch). With
``profiles``: each counted pass's callgrind dump is kept there, with the Python calls and
aten operators of one more uncounted replay pass (``CallCounts``), to say what grew; the
native counter keeps its own per-function breakdown of the counted pass (``*.ops.json``).
A side whose checkout lacks what this file imports is reported as ``not_measured`` with the
reason; a case that raises is a record with its error, as a failing benchmark.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import time
from pathlib import Path

BENCH = "bench_embed.EmbedRoutine.track_instructions"
#: CPU seconds of this process's phases (start-up and imports, uncounted, counted): the cost figures.
PHASES: dict = {}


#: The harness files, by path beside this one (``selfcheck/``) or in ``measure/``.
_HARNESS = {"callgrind": Path(__file__).with_name("callgrind.py"),
            "tower_replay": Path(__file__).parents[1] / "measure" / "tower_replay.py",
            "op_count": Path(__file__).parents[1] / "measure" / "op_count.py"}


def _driver(name: str = "callgrind"):
    spec = importlib.util.spec_from_file_location(f"_vlmpath_{name}", _HARNESS[name])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and pickling look modules up by name
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


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]


class _Case:
    """One routine case between the uncounted and the counted phase."""

    def __init__(self, api: dict, session, pipeline: str, preset: str, scale: str):
        self.rec: dict = {"kind": "routine", "pipeline": pipeline, "preset": preset, "instructions": None,
                          "error": None}
        self.api, self.pipe = api, api["pipeline"](pipeline)
        self.pipe.validate()
        self.prep = api["prepare"](preset, self.pipe.hash, scale, session)
        self.wl = self.prep.workload
        self.rec["steps"] = len(self.wl.steps)
        self.recorder = None

    def one_pass(self, encoder):
        routine = self.api["EmbedRoutine"](self.wl, encoder, self.pipe, self.prep.table)  # built outside the count
        return lambda: [routine.run_step(step) for step in self.wl.steps]

    def replay(self):
        return self.recorder.replay() if self.recorder is not None else self.prep.encoder


def _uncounted(case: _Case, mode: str, rp, profiles: Path | None, memos: dict, native: bool = False) -> None:
    """Warm-up (and, replaying, the recording), before instrumentation is switched on."""
    if mode == "full":
        case.one_pass(case.prep.encoder)()
        return
    case.recorder = rp.Recorder(case.prep.encoder, memos.setdefault(case.wl.model, {}))
    case.one_pass(case.recorder)()  # the real tower, recorded: also the program's warm-up
    warm = case.replay()
    case.one_pass(warm)()  # the replayed path warmed up as it will be counted
    if warm.left:
        raise RuntimeError(f"the replayed pass left {warm.left} recorded tower call(s) unmade")
    if profiles is not None and not native:  # the native counter's breakdown already names calls
        one = case.one_pass(case.replay())
        with rp.CallCounts() as calls:
            one()
        case.rec["calls"] = calls.to_dict()


def _towers(cases: list[_Case]) -> dict[str, tuple]:
    """Per encoder: (encoder, one item per distinct shape, in first-seen order)."""
    seen: dict[str, tuple] = {}
    for c in cases:
        if c.recorder is None or c.rec["error"]:
            continue
        enc, shapes = seen.setdefault(c.wl.model, (c.prep.encoder, {}))
        for call in c.recorder.items:
            for it in call:
                shapes.setdefault((it.grid_thw, it.span, bool(it.frame_tokens)), it)
    return {m: (enc, list(sh.values())) for m, (enc, sh) in seen.items()}


def _shape_label(items) -> str:
    return ",".join("+".join("x".join(map(str, g)) for g in it.grid_thw) for it in items)


def _keep(counter, profiles: Path | None, name: str, rec: dict) -> None:
    if profiles is not None and counter.last is not None:
        profiles.mkdir(parents=True, exist_ok=True)
        kept = f"{name}.ops.json" if counter.last.name.endswith(".ops.json") else f"{name}.callgrind"
        counter.last.replace(profiles / kept)
        rec["profile"] = kept
        if "calls" in rec:
            (profiles / f"{name}.calls.json").write_text(json.dumps(rec.pop("calls"), sort_keys=True))


def _counted(counter, rec: dict, fn) -> None:
    """The count of ``fn`` into ``rec`` (the native counter's tallies too: ``parts``)."""
    rec["instructions"] = counter.count(fn)
    if getattr(counter, "parts", None):
        rec["parts"] = dict(counter.parts)


def count_all(api: dict, spec: dict, counter, session) -> list[dict]:
    rp = _driver("tower_replay")
    mode = spec.get("mode") or "routine"
    profiles = Path(spec["profiles"]) if spec.get("profiles") else None
    cases: list[_Case] = []
    records: list[dict] = []
    memos: dict = {}  # per encoder: tower outputs by items, shared by the cases' recordings
    t0 = time.process_time()
    for pl, pr in api["cases"]:
        if not _wanted(spec.get("bench"), pl, pr):
            continue
        try:
            case = _Case(api, session, pl, pr, spec["scale"])
            _uncounted(case, mode, rp, profiles, memos, getattr(counter, "unit", "") == "ops")
            cases.append(case)
        except Exception as exc:  # a case that fails is a result (the benchmark's failure), not a crash
            records.append({"kind": "routine", "pipeline": pl, "preset": pr, "instructions": None, "error": _error(exc)})
    towers = _towers(cases) if mode == "routine" and spec.get("towers", True) else {}
    for enc, items in towers.values():
        for it in items:
            enc.encode([it])  # warm-up, uncounted
    PHASES["uncounted_cpu_s"] = round(time.process_time() - t0, 1)
    t0 = time.process_time()
    counter.instrument(True)  # once for every counted pass (see the module docstring)
    try:
        for case in cases:
            try:
                enc = case.replay()  # fresh copies of the recorded rows, made outside the count
                _counted(counter, case.rec, case.one_pass(enc))
                if getattr(enc, "left", 0):
                    raise RuntimeError(f"the counted pass left {enc.left} recorded tower call(s) unmade")
                _keep(counter, profiles, f"{case.rec['pipeline']}.{case.rec['preset']}", case.rec)
            except Exception as exc:
                case.rec.update(instructions=None, error=_error(exc))
                case.rec.pop("calls", None)  # only kept beside a profile
            records.append(case.rec)
        for model, (enc, items) in towers.items():
            rec = {"kind": "tower", "encoder": model, "shapes": _shape_label(items), "instructions": None,
                   "error": None, "calls_counted": len(items)}
            try:
                _counted(counter, rec, lambda: [enc.encode([it]) for it in items])
                _keep(counter, profiles, f"tower.{model}", rec)
            except Exception as exc:
                rec["error"] = _error(exc)
            records.append(rec)
    finally:
        counter.instrument(False)
        PHASES["counted_cpu_s"] = round(time.process_time() - t0, 1)
    return records


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    t0 = time.process_time()
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
            if spec.get("counter", "callgrind") == "ops":
                counter = _driver("op_count").OpCounter(spec["dumps"], harness=(__file__,))
            else:
                counter = _driver().Counter(spec["dumps"])
            PHASES["startup_cpu_s"] = round(time.process_time() - t0, 1)
            result["records"] = count_all(api, spec, counter, api["Session"]("cpu"))
            result["phases"] = PHASES
    Path(spec["out"]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - runs by path, under valgrind (see selfcheck.ir_cases)
    main(sys.argv[-1])
