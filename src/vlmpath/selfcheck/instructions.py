"""How many instructions does one pass of the routine execute (Valgrind callgrind)?

Instruction counts are deterministic on a noisy CPU (CodSpeed's and PyTorch's own CI use
them): a 1-2% change is visible where time moves 30%. ``torch.utils.benchmark.Timer.
collect_callgrind`` does not work here (torch 2.13: its helper starts ``python`` from
PATH, not this interpreter, and then hung for 5 minutes on this machine), so this module
runs the routine in ONE callgrind subprocess and brackets each pass (the shared driver,
``selfcheck.callgrind``: Valgrind's start-up with torch and transformers costs minutes).

``count_trust`` is what ``vlmpath trust --instructions`` uses: a plain pass, a planted
unit of work (to calibrate the plants in instructions: ``size`` x the pass's own count),
then per round base, A/A and one planted pass per size.
Valgrind comes from the system (Debian: ``apt-get install -y valgrind``; ``ci/setup.sh``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from vlmpath.selfcheck.callgrind import Counter


def count_trust(preset: str, scale: str, rounds: int, sizes: Sequence[float], threads: int,
                log: Callable[[str], None] = print) -> dict:
    """Run the worker under callgrind; returns its JSON (``rounds``: per round the counts).

    The worker writes its result after every round, so a run that breaks or times out
    still returns the rounds it finished, marked ``partial`` with the reason."""
    from vlmpath.selfcheck import callgrind

    with tempfile.TemporaryDirectory(prefix="vlmpath-ir-") as tmp:
        spec = {"preset": preset, "scale": scale, "rounds": rounds, "sizes": list(sizes), "threads": threads,
                "dumps": str(Path(tmp) / "cg"), "out": str(Path(tmp) / "ir.json")}
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        log(f"trust: counting instructions under callgrind (one process, {rounds} rounds; slow)")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        passes = 2 + rounds * (2 + len(sizes))
        proc = callgrind.start([sys.executable, "-m", "vlmpath.selfcheck.instructions", str(Path(tmp) / "spec.json")],
                               Path(tmp), env, instrument=False)
        return callgrind.finish_rounds(proc, Path(tmp), Path(spec["out"]), timeout=PASS_TIMEOUT_S * passes + 900,
                                       rounds=rounds, log=log)


#: Callgrind seconds allowed per counted pass (about 100x a native pass of the tiny cases).
PASS_TIMEOUT_S = 120


# --- the worker (runs under callgrind) ----------------------------------------------------------


def _worker(spec_path: str) -> None:
    import torch

    from vlmpath.selfcheck.plant import UNIT_N, Plant, timed_pass
    from vlmpath.engines.pipelines import DEFAULT_PIPELINE
    from vlmpath.engines.reference import EmbedRoutine
    from vlmpath.suite.measure import Session, prepare

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(int(spec["threads"]))
    prep = prepare(spec["preset"], DEFAULT_PIPELINE.hash, spec["scale"], Session("cpu"))
    wl = prep.workload
    a = torch.randn(UNIT_N, UNIT_N, generator=torch.Generator().manual_seed(0))
    counter = Counter(spec["dumps"])
    out = Path(spec["out"])

    counted = counter.count

    def one_pass(plant):
        routine = EmbedRoutine(wl, prep.encoder, DEFAULT_PIPELINE, prep.table)
        return lambda: timed_pass(routine.run_step, wl.steps, plant, a)

    def write(rounds: list, complete: bool) -> None:
        tmp = out.with_suffix(".tmp")  # atomic: a reader never sees half a file
        tmp.write_text(json.dumps({"plain": plain, "unit": unit, "complete": complete,
                                   "units_per_step": {f"{s}": p.per_step for s, p in plants.items()},
                                   "rounds": rounds}))
        os.replace(tmp, out)

    one_pass(None)()  # warm-up, not counted
    # Set-up and warm-up ran uninstrumented (--instr-atstart=no: ~4x native, not ~100x).
    # Switched on once for all the counted passes: every switch discards Valgrind's
    # translations, and re-translating torch's code cost ~2 CPU-minutes per pass when it
    # was switched per pass; kept on, a later pass costs ~50-100x its native time.
    counter.instrument(True)
    plain = counted(one_pass(None))
    unit = counted(lambda: Plant(0, 10).work(a)) / 10
    steps = max(1, len(wl.steps))
    plants = {s: Plant(s, max(1, round(s * plain / unit / steps))) for s in spec["sizes"]}
    rounds: list = []
    write(rounds, complete=spec["rounds"] == 0)
    for _ in range(spec["rounds"]):
        row = {"base": counted(one_pass(None)), "aa": counted(one_pass(None))}
        row.update({f"{s}": counted(one_pass(plants[s])) for s in spec["sizes"]})
        rounds.append(row)
        write(rounds, complete=len(rounds) == spec["rounds"])


if __name__ == "__main__":  # pragma: no cover - runs under valgrind
    _worker(sys.argv[1])
