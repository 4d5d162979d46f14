"""How does the run call asv: streamed (``asv run``, progress visible) or quietly (the rest)?

``stream`` echoes asv's output line by line (its ``[NN%]`` prefix is the progress) and
forwards Ctrl-C; ``asv`` runs a short asv command and turns a failure into one error with
the tail of asv's output.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from vlmpath.core.errors import VlmpathError


def stream(cmd: Sequence[str], env: Mapping[str, str], cwd: Path, out: TextIO,
            on_line: Callable[[str], None] | None = None) -> int:
    """Run ``cmd``, echoing its output line by line; Ctrl-C stops it and re-raises."""
    proc = subprocess.Popen(list(cmd), env=dict(env), cwd=str(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            out.flush()
            if on_line is not None:
                on_line(line)
        return proc.wait()
    except KeyboardInterrupt:
        # A terminal's Ctrl-C reaches asv too; a signal sent to us alone must be forwarded.
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise


def asv(args: Sequence[str], env: Mapping[str, str], cwd: Path, what: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "asv", *args], env=dict(env), cwd=str(cwd),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise VlmpathError(f"asv {what} failed (exit {proc.returncode}):\n{tail}")

