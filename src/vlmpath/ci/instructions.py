"""How many instructions does one pass of the routine execute (Valgrind callgrind)?

Instruction counts are deterministic on a noisy CPU (CodSpeed's and PyTorch's own CI use
them): a 1-2% change is visible where time moves 30%. ``torch.utils.benchmark.Timer.
collect_callgrind`` does not work here (torch 2.13: its helper starts ``python`` from
PATH, not this interpreter, and then hung for 5 minutes on this machine), so this module
runs the routine under ``valgrind --tool=callgrind --collect-atstart=no`` in ONE
subprocess (Valgrind's start-up with torch and transformers costs minutes) and brackets
each pass with torch's own client requests (``torch._C._valgrind_toggle`` to start,
``_valgrind_toggle_and_dump_stats`` to stop and dump). Each dump file's ``totals:`` line
is that pass's instruction count (Ir; counters are zeroed at every dump).

``count_trust`` is what ``vlmpath trust --instructions`` uses: a plain pass, a planted
unit of work (to calibrate the plants in instructions: ``size`` x the pass's own count),
then per round base, A/A and one planted pass per size.
Valgrind comes from the system (Debian: ``apt-get install -y valgrind``; ``ci/setup.sh``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from vlmpath.core.errors import VlmpathError

TIMEOUT_S = 3600


def parse_totals(text: str) -> int:
    for line in text.splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise VlmpathError("callgrind output has no totals/summary line: is it a callgrind file?")


def valgrind() -> str:
    path = shutil.which("valgrind")
    if path is None:
        raise VlmpathError("instruction counts need Valgrind: install it (Debian: apt-get install -y valgrind; "
                           "ci/setup.sh does it as root) or leave out --instructions")
    return path


def count_trust(preset: str, scale: str, rounds: int, sizes: Sequence[float], threads: int,
                log: Callable[[str], None] = print) -> dict:
    """Run the worker under callgrind; returns its JSON (``rounds``: per round the counts)."""
    with tempfile.TemporaryDirectory(prefix="vlmpath-ir-") as tmp:
        spec = {"preset": preset, "scale": scale, "rounds": rounds, "sizes": list(sizes), "threads": threads,
                "dumps": str(Path(tmp) / "cg"), "out": str(Path(tmp) / "ir.json")}
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        cmd = [valgrind(), "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={tmp}/cg.%p",
               sys.executable, "-m", "vlmpath.ci.instructions", str(Path(tmp) / "spec.json")]
        log(f"trust: counting instructions under callgrind (one process, {rounds} rounds; slow)")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, check=False)
        out = Path(spec["out"])
        if proc.returncode != 0 or not out.is_file():
            raise VlmpathError(f"callgrind run failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
        return json.loads(out.read_text())


# --- the worker (runs under callgrind) ----------------------------------------------------------


def _newest_dump(prefix: str, seen: set[str]) -> Path:
    files = [p for p in Path(prefix).parent.glob(Path(prefix).name + ".*") if str(p) not in seen]
    if not files:
        raise VlmpathError("callgrind wrote no dump: is this process running under valgrind --tool=callgrind?")
    newest = max(files, key=lambda p: p.stat().st_mtime_ns)
    seen.add(str(newest))
    return newest


def _worker(spec_path: str) -> None:
    import torch

    from vlmpath.ci.plant import UNIT_N, Plant, timed_pass
    from vlmpath.engines.reference import DEFAULT_PIPELINE, EmbedRoutine
    from vlmpath.suite.measure import Session, prepare

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(int(spec["threads"]))
    prep = prepare(spec["preset"], DEFAULT_PIPELINE.hash, spec["scale"], Session("cpu"))
    wl = prep.workload
    a = torch.randn(UNIT_N, UNIT_N, generator=torch.Generator().manual_seed(0))
    seen = {str(p) for p in Path(spec["dumps"]).parent.glob("*")}

    def counted(fn) -> int:
        torch._C._valgrind_toggle()
        fn()
        torch._C._valgrind_toggle_and_dump_stats()
        return parse_totals(_newest_dump(spec["dumps"], seen).read_text())

    def one_pass(plant):
        routine = EmbedRoutine(wl, prep.encoder, DEFAULT_PIPELINE, prep.table)
        return lambda: timed_pass(routine.run_step, wl.steps, plant, a)

    one_pass(None)()  # warm-up, not counted
    plain = counted(one_pass(None))
    unit = counted(lambda: Plant(0, 10).work(a)) / 10
    steps = max(1, len(wl.steps))
    plants = {s: Plant(s, max(1, round(s * plain / unit / steps))) for s in spec["sizes"]}
    rounds = []
    for _ in range(spec["rounds"]):
        row = {"base": counted(one_pass(None)), "aa": counted(one_pass(None))}
        row.update({f"{s}": counted(one_pass(plants[s])) for s in spec["sizes"]})
        rounds.append(row)
    Path(spec["out"]).write_text(json.dumps({"plain": plain, "unit": unit,
                                             "units_per_step": {f"{s}": p.per_step for s, p in plants.items()},
                                             "rounds": rounds}))


if __name__ == "__main__":  # pragma: no cover - runs under valgrind
    _worker(sys.argv[1])
