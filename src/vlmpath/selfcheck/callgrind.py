"""How is a Python worker's work counted in instructions under Valgrind's callgrind?

The one callgrind driver behind ``vlmpath trust --instructions`` (``selfcheck.instructions``) and the
per-case instruction counts of the PR job (``selfcheck.ir_cases``). Valgrind's start-up with torch
and transformers costs minutes, so a caller starts ONE process per side under
``valgrind --tool=callgrind --collect-atstart=no`` (``command`` / ``run``), and the worker
inside brackets each counted region with torch's own client requests (``Counter.count``:
``torch._C._valgrind_toggle`` to start, ``_valgrind_toggle_and_dump_stats`` to stop and
dump). Each dump's ``totals:`` line is that region's instruction count (Ir; counters are
zeroed at every dump). ``torch.utils.benchmark.Timer.collect_callgrind`` does not work with
torch 2.13 here (it starts ``python`` from PATH and hung; issue 12).

The module imports only the standard library at load time: the PR job's worker loads it by
file path (``selfcheck.ir_worker``) while ``vlmpath`` itself resolves to the commit under test.
Valgrind comes from the system (Debian: ``apt-get install -y valgrind``; ``ci/setup.sh``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

TIMEOUT_S = 3600
#: The worker's environment under Valgrind (the caller's own values win). MKL's AVX2 and
#: AVX-512 kernels use FMA, which Valgrind emulates: a matmul runs ~20x slower there than
#: through MKL's SSE4.2 kernels (3 matmuls 256x1280x1280 under callgrind, instrumentation
#: off: 0.5 s with SSE4.2, over 10 s with AVX2), and the tower passes of a worker (its
#: recording, warm-up and tower count) were most of its minutes. Every side of a count runs
#: with it, so the counts stay comparable; a native worker keeps MKL's own choice.
VALGRIND_ENV = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
INSTALL_HINT = "install it (Debian: apt-get install -y valgrind; ci/setup.sh does it as root)"


def _error(message: str) -> Exception:
    from vlmpath.core.errors import VlmpathError  # lazily: see the module docstring

    return VlmpathError(message)


def parse_totals(text: str) -> int:
    """The instruction count of one callgrind dump."""
    for line in text.splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise _error("callgrind output has no totals/summary line: is it a callgrind file?")


def valgrind(fix: str = "or leave out --instructions") -> str:
    """The valgrind executable, or one error naming the fix."""
    path = shutil.which("valgrind")
    if path is None:
        raise _error(f"instruction counts need Valgrind, which is not on PATH: {INSTALL_HINT}, {fix}")
    return path


def command(argv: Sequence[str], dumps: Path, instrument: bool = True) -> list[str]:
    """``argv`` under callgrind, collecting nothing until the worker toggles it on.
    ``instrument=False``: not even simulating (~4x slower than native instead of ~50x) until
    the worker switches it on (``Counter.instrument``): import and set-up cost minutes less."""
    return [valgrind(), "--tool=callgrind", "--collect-atstart=no", f"--instr-atstart={'yes' if instrument else 'no'}",
            f"--callgrind-out-file={dumps}.%p", *argv]


def start(argv: Sequence[str], tmp: Path, env: Mapping[str, str], cwd: Path | None = None,
          instrument: bool = True, native: bool = False) -> subprocess.Popen:
    """One worker under callgrind; its dumps go to ``tmp/cg.<pid>.<n>``, stderr to ``tmp/stderr``.
    Several may run at once (one core each: valgrind runs a process's threads one at a time).
    ``native``: the same worker without Valgrind (its counter counts natively: ``op_count``)."""
    err = (tmp / "stderr").open("w", encoding="utf-8", errors="replace")
    try:
        argv = list(argv) if native else command(argv, tmp / "cg", instrument)
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                env=dict(env) if native else {**VALGRIND_ENV, **env}, cwd=str(cwd or tmp), text=True)
    finally:
        err.close()  # the child holds its own descriptor


def finish(proc: subprocess.Popen, tmp: Path, out: Path, timeout: float = TIMEOUT_S) -> dict:
    """Wait for a worker started by ``start``; its JSON result, or one error with its stderr tail."""
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise _error(f"counting run did not finish within {timeout:.0f} s") from None
    if rc != 0 or not out.is_file():
        tail = (tmp / "stderr").read_text(encoding="utf-8", errors="replace").strip()[-600:]
        raise _error(f"counting run failed (exit {rc}): {tail}")
    return json.loads(out.read_text(encoding="utf-8"))



def finish_rounds(proc: subprocess.Popen, tmp: Path, out: Path, *, timeout: float, rounds: int,
                  log: Callable[[str], None]) -> dict:
    """``finish`` for a worker that writes its rounds as each ends (the trust rounds): a run
    stopped early keeps the rounds it finished, marked partial, instead of losing them."""
    from vlmpath.core.errors import VlmpathError  # lazily: see the module docstring

    try:
        return finish(proc, tmp, out, timeout=timeout)
    except VlmpathError as exc:
        if not out.is_file():
            raise
        got = json.loads(out.read_text(encoding="utf-8"))
        log(f"trust: WARNING: instruction counting stopped after {len(got['rounds'])} of {rounds} rounds: {exc}")
        return {**got, "partial": True, "error": str(exc)}

def run(argv: Sequence[str], tmp: Path, out: Path, env: Mapping[str, str], timeout: float = TIMEOUT_S) -> dict:
    return finish(start(argv, tmp, env), tmp, out, timeout)


# --- the worker's side (runs under callgrind) ------------------------------------------------


class Counter:
    """Counts the instructions of callables, one callgrind dump each (``dumps``: the prefix
    given to ``--callgrind-out-file``, without ``.%p``)."""

    def __init__(self, dumps: str | Path):
        self.prefix = Path(dumps)
        self.seen = set(self._dumps())
        self.last: Path | None = None  # the last count's dump (its per-function costs: ``compare.ir_grew``)

    def _dumps(self) -> list[Path]:
        return list(self.prefix.parent.glob(self.prefix.name + ".*"))

    def _newest(self) -> Path:
        fresh = [p for p in self._dumps() if p not in self.seen]
        if not fresh:
            raise RuntimeError("callgrind wrote no dump: is this process running under valgrind --tool=callgrind?")
        newest = max(fresh, key=lambda p: p.stat().st_mtime_ns)
        self.seen.add(newest)
        return newest

    def instrument(self, on: bool) -> None:
        """Switch this process's instrumentation (started with ``instrument=False``) through
        ``callgrind_control`` (Valgrind's gdbserver; it discards the translations made so far)."""
        import os

        ctl = subprocess.Popen(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while ctl.poll() is None:  # keep running guest code: the gdbserver polls between blocks
            sum(range(100))
        said = ctl.stdout.read() if ctl.stdout else ""
        if ctl.returncode != 0 or "OK" not in said:
            raise RuntimeError(f"callgrind_control -i {'on' if on else 'off'} failed: {said.strip()[-300:]}")

    def count(self, fn: Callable[[], object]) -> int:
        import torch

        torch._C._valgrind_toggle()
        fn()
        torch._C._valgrind_toggle_and_dump_stats()
        self.last = self._newest()
        return parse_totals(self.last.read_text())
