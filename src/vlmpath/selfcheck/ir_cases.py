"""How much work does one pass of each routine case do, counted exactly, per checkout (side)?

``count_sides`` counts every selected ``EmbedRoutine(pipeline, preset)`` case of one or more
checkouts: per side ONE worker process (the cases share its start-up), all sides at once,
threads pinned (``measure.pinning``), tiny scale by default. Two counters (``counter``):

- ``ops`` (the default): the worker runs natively and counts with ``measure/op_count.py``:
  Python bytecodes and aten elements, two tallies gated apart (seconds per side);
- ``callgrind``: the worker runs under Valgrind and counts CPU instructions (start-up with
  torch under Valgrind costs minutes; one core per process).

The worker (``selfcheck/ir_worker.py``) runs by path with ``PYTHONPATH`` = the side's
``src``: the harness is fixed, the code under test varies (as asv runs head's benchmarks on
each side's package). The side must import its own ``vlmpath`` and have what the worker
needs; if not, the side is *not measured* with that reason, never a crash. Under callgrind a
quick plain-Python probe proves it first (a broken side would cost minutes of Valgrind);
natively the worker's own result says it (a probe would cost one more torch import per
side, ~2.7 s of CPU, as long as the native worker's own start-up).

``records`` are what ``vlmpath instructions --out FILE`` writes (one JSON: case, benchmark,
params, the count (under ``instructions``, whatever its unit: the benchmark names it),
commit; ``profile``: the kept callgrind dump's or ops breakdown's name); ``run_results``
turns a side into compare ``Metric`` rows (deterministic, judged by their band;
``thresholds.yaml``). Mode ``routine`` (the default) gives per case the routine with its
tower replayed (``EmbedRoutine.track_routine_instructions``, or ``track_routine_bytecodes``
and ``track_routine_aten_elements``) and per encoder the tower on its own
(``VisionTower.track_instructions``, or ``track_bytecodes`` and ``track_aten_elements``);
mode ``full`` counts the pass with its tower (``EmbedRoutine.track_instructions``, ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import vlmpath
from vlmpath.selfcheck import callgrind
from vlmpath.core.errors import VlmpathError
from vlmpath.core.option_enums import Counter

BENCH = "bench_embed.EmbedRoutine.track_instructions"  # mode "full": the pass with its tower
#: Mode "routine" (the default): the pass with the tower replayed, and the tower on its own.
ROUTINE_BENCH = "bench_embed.EmbedRoutine.track_routine_instructions"
TOWER_BENCH = "bench_embed.VisionTower.track_instructions"
MODES = ("routine", "full")
UNIT = "instructions"
SCHEMA_VERSION = 1
SOURCE = "callgrind"
#: ``ops`` (the default): counted natively (``measure/op_count.py``), two gated tallies per
#: case; ``callgrind``: CPU instructions under Valgrind (minutes per side to start torch).
COUNTERS = tuple(Counter)  # core.option_enums: parsed once, by the CLI
DEFAULT_COUNTER = Counter.OPS
#: The native counter's rows: (kind, tally) -> benchmark; kinds as the worker's records.
OPS_BENCHES = {
    ("routine", "bytecodes"): "bench_embed.EmbedRoutine.track_routine_bytecodes",
    ("routine", "elements"): "bench_embed.EmbedRoutine.track_routine_aten_elements",
    ("tower", "bytecodes"): "bench_embed.VisionTower.track_bytecodes",
    ("tower", "elements"): "bench_embed.VisionTower.track_aten_elements",
    ("full", "bytecodes"): "bench_embed.EmbedRoutine.track_bytecodes",
    ("full", "elements"): "bench_embed.EmbedRoutine.track_aten_elements",
}
#: Every counted benchmark and its unit (what ``compare`` gates deterministically).
UNITS = {BENCH: UNIT, ROUTINE_BENCH: UNIT, TOWER_BENCH: UNIT,
         **{bench: tally for (_, tally), bench in OPS_BENCHES.items()}}
COUNT_UNITS = frozenset(UNITS.values())
OPS_SOURCE = "op_count"
WORKER = Path(__file__).with_name("ir_worker.py")
# Run the worker by path without putting its folder (src/vlmpath/ci: bisect.py, ...) on sys.path.
_RUN_BY_PATH = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
PROBE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Side:
    """One checkout to count: its ``src`` folder (None: this process's own package)."""

    label: str
    src: Path | None
    commit: str | None = None


def own_src() -> Path:
    return Path(vlmpath.__file__).resolve().parents[1]


def _env(src: Path, threads: int, base: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(PYTHONPATH=str(src), OMP_NUM_THREADS=str(threads), PYTHONHASHSEED="0")  # hash seed: same work each run
    env.pop("ASV_PYTHONPATH", None)
    return env


def _argv(spec: Path) -> list[str]:
    return [sys.executable, "-c", _RUN_BY_PATH, str(WORKER), str(spec)]


def _spec(tmp: Path, **fields: Any) -> Path:
    path = tmp / "spec.json"
    path.write_text(json.dumps({"dumps": str(tmp / "cg"), "out": str(tmp / "result.json"), **fields}))
    return path


def _probe(src: Path, env: Mapping[str, str]) -> str | None:
    """Why this side cannot be counted (None: it can): missing imports, or a shadowed vlmpath."""
    with tempfile.TemporaryDirectory(prefix="vlmpath-ir-probe-") as tmp:
        spec = _spec(Path(tmp), probe=True)
        try:
            r = subprocess.run(_argv(spec), env=dict(env), cwd=tmp, capture_output=True, text=True,
                               timeout=PROBE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return f"the counter's probe (plain Python, importing the side) took over {PROBE_TIMEOUT_S} s"
        out = Path(tmp) / "result.json"
        if r.returncode != 0 or not out.is_file():
            return f"the counter's probe failed (exit {r.returncode}): {r.stderr.strip()[-300:]}"
        result = json.loads(out.read_text(encoding="utf-8"))
    return result.get("not_measured") or _shadowed(result, src)


def _shadowed(result: Mapping[str, Any], src: Path) -> str | None:
    """Why a worker's (or probe's) result is not ``src``'s: it imported another ``vlmpath``."""
    got = Path(result["vlmpath"]).resolve().parent
    if got != (src / "vlmpath").resolve():
        return f"the counter would import vlmpath from {got}, not from {src} (a .pth or editable-install hook?)"
    return None


def count_sides(sides: Sequence[Side], *, bench: str | None = None, scale: str = "tiny", threads: int = 1,
                env: Mapping[str, str] | None = None, timeout: float = callgrind.TIMEOUT_S,
                log: Callable[[str], None] = print, mode: str = "routine",
                profiles: Path | None = None, counter: Counter = DEFAULT_COUNTER) -> list[dict]:
    """Per side: ``{"side", "commit", "not_measured", "records", "seconds", ...}``; see module doc.
    ``mode``: "routine" (tower replayed, plus tower records) or "full" (``selfcheck/ir_worker.py``);
    ``profiles``: keep each counted pass's callgrind dump and call counts in ``profiles/<side>``."""
    if counter == "callgrind":
        callgrind.valgrind("or count with --counter ops")  # one clear error before any work
    results: list[dict] = []
    running = []
    with tempfile.TemporaryDirectory(prefix="vlmpath-ir-") as root:
        for i, side in enumerate(sides):
            src = (side.src or own_src()).resolve()
            side_env = _env(src, threads, env)
            res = {"side": side.label, "commit": side.commit, "source": str(src), "scale": scale,
                   "threads": threads, "bench": bench, "mode": mode, "counter": counter,
                   "not_measured": None if counter == "ops" else _probe(src, side_env), "records": []}
            results.append(res)
            if res["not_measured"]:
                log(f"instructions: {side.label} not measured: {res['not_measured']}")
                continue
            tmp = Path(root) / f"side{i}"
            tmp.mkdir()
            spec = _spec(tmp, bench=bench, scale=scale, threads=threads, mode=mode, counter=counter,
                         profiles=str(profiles / side.label) if profiles is not None else None)
            how = "natively (bytecodes, aten elements)" if counter == "ops" else "under callgrind, one process (minutes)"
            log(f"counts: counting {side.label} ({src}) {how}")
            running.append((res, src, tmp, time.monotonic(), callgrind.start(_argv(spec), tmp, side_env, instrument=False,
                                                                        native=counter == "ops")))
        try:
            for res, src, tmp, t0, proc in running:
                try:
                    out = callgrind.finish(proc, tmp, tmp / "result.json", timeout)
                except VlmpathError as exc:  # this side's run broke: said, and the other sides still count
                    out = {"not_measured": str(exc)}
                why = out.get("not_measured") or (_shadowed(out, src) if out.get("vlmpath") else None)
                if why:  # not this side's code: nothing it counted stands
                    out = {"not_measured": why}
                res["not_measured"] = why
                res["records"] = [x for r in out.get("records", ()) for x in _records(r, res["commit"], mode, counter)]
                res["seconds"] = round(time.monotonic() - t0, 1)
                res["phases"] = out.get("phases")  # CPU seconds: start-up, uncounted, counted
        finally:
            for *_, proc in running:  # never leave a valgrind behind (an interrupt, a timeout)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return results


def _record(raw: Mapping[str, Any], commit: str | None, mode: str = "full") -> dict:
    extra = {k: raw[k] for k in ("profile", "calls_counted") if k in raw}
    if raw.get("kind") == "tower":
        params = {"encoder": str(raw["encoder"]), "shapes": str(raw["shapes"])}
        return {"case": f"tower:{params['encoder']}", "benchmark": TOWER_BENCH, "params": params,
                "instructions": raw.get("instructions"), "error": raw.get("error"), "commit": commit, **extra}
    params = {"pipeline": str(raw["pipeline"]), "preset": str(raw["preset"])}
    return {"case": f"embed:{params['pipeline']}/{params['preset']}",
            "benchmark": ROUTINE_BENCH if mode == "routine" else BENCH, "params": params,
            "instructions": raw.get("instructions"), "error": raw.get("error"), "commit": commit, **extra}


def _records(raw: Mapping[str, Any], commit: str | None, mode: str, counter: str) -> list[dict]:
    """The records of one worker record: one (callgrind's instructions), or one per tally of
    the native counter (``OPS_BENCHES``; the count under ``instructions``, its unit by benchmark)."""
    one = _record(raw, commit, mode)
    if counter != "ops":
        return [one]
    kind = "tower" if raw.get("kind") == "tower" else mode
    parts = raw.get("parts") if isinstance(raw.get("parts"), Mapping) else {}
    error = one["error"] or (None if parts else "the native counter returned no tallies")
    return [{**one, "benchmark": OPS_BENCHES[(kind, tally)], "instructions": None if error else parts.get(tally),
             "error": error} for tally in ("bytecodes", "elements")]


def to_json(sides: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, "benchmark": BENCH, "sides": list(sides)},
                      indent=1, sort_keys=True) + "\n"


def load_sides(text: str, where: str) -> list[dict]:
    """The sides of a records file (``to_json``), checked: it may come from an untrusted artifact."""
    from vlmpath.core import safe_json

    data = safe_json.loads(text, where, "re-run `vlmpath instructions --out FILE`")
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or not isinstance(
            data.get("sides"), list):
        raise VlmpathError(f"{where}: not an instruction-count file (schema_version {SCHEMA_VERSION}, sides)")
    for s in data["sides"]:
        recs = s.get("records") if isinstance(s, dict) else None
        if not isinstance(recs, list) or not all(_valid(r) for r in recs):
            raise VlmpathError(f"{where}: a side has malformed records (need case params, instructions or error)")
    return data["sides"]


def _valid(r: Any) -> bool:
    if not isinstance(r, dict) or not isinstance(r.get("params"), dict):
        return False
    n = r.get("instructions")
    ok_n = n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 0)
    bench, keys = r.get("benchmark", BENCH), _keys(r)
    return (ok_n and bench in UNITS and set(r["params"]) == set(keys)
            and all(isinstance(r["params"][k], str) and len(r["params"][k]) <= 300 for k in keys))


def _keys(r: Mapping[str, Any]) -> tuple[str, ...]:
    return ("encoder", "shapes") if ".VisionTower." in str(r.get("benchmark")) else ("pipeline", "preset")


def metrics(side: Mapping[str, Any], machine: str, commit: str) -> list:
    """One ``Metric`` per record (an error or a missing count is a failed case)."""
    from vlmpath.compare.records import Metric

    out = []
    for r in side.get("records", ()):
        n = r.get("instructions")
        error = str(r["error"])[:500] if r.get("error") else (None if n is not None else "no count")
        bench = r.get("benchmark", BENCH)
        out.append(Metric(machine=machine, benchmark=bench, unit=UNITS[bench], commit=commit,
                          source=SOURCE if UNITS[bench] == UNIT else OPS_SOURCE,
                          params=tuple((k, r["params"][k]) for k in _keys(r)),
                          value=None if error else float(n), samples=() if error else (float(n),), error=error))
    return out


def run_results(side: Mapping[str, Any], machine: str, commit: str):
    """A side as ``RunResults`` (one machine) to merge with its asv results; a side that was
    not measured has no rows and a note saying why."""
    from vlmpath.compare.records import MachineRun, RunResults

    rows = tuple(metrics(side, machine, commit))
    why = side.get("not_measured")
    notes = (f"counts: {side.get('side', 'side')} {commit[:8]} not measured: {str(why)[:300]}",) if why else ()
    return RunResults(commit=commit, machines=(MachineRun(machine, commit, rows),), source=SOURCE, notes=notes)
