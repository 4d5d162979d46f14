"""When a run is told to stop (SIGTERM, SIGINT), how does it end everything it started?

``interruptible()`` wraps a whole run (``vlmpath run``, ``vlmpath ci pr``): SIGTERM and
SIGINT raise ``Interrupted`` (a ``KeyboardInterrupt``, so every existing Ctrl-C path
applies) in the main thread, so that the ``finally`` blocks that remove worktrees and
temporary directories run; a second signal while those run is ignored, so cleanup is not
cut short. On the way out every process the run started, and theirs, is ended.

Why the descendants and not just a process group: asv starts each benchmark process (and
its fork server) in a process group of its own (``asv.util.check_output``:
``setpgid(0, 0)``), so killing the group of the ``vlmpath run`` we started would leave
them running. So on Linux the run marks itself a child subreaper
(``PR_SET_CHILD_SUBREAPER``): a grandchild whose parent dies is re-parented to the run
rather than to init, and ``end_descendants`` finds every one through ``/proc`` by parent
pid, asks them to stop (SIGTERM), waits a bounded grace, kills what is left (SIGKILL) and
reaps them. Elsewhere only the direct children's groups are ended (``end_group``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
#: Seconds a stopped process gets between SIGTERM and SIGKILL.
GRACE_S = 10.0


#: Longest temporary directory handed to asv as ``TMPDIR``: its fork server's socket
#: (``asv-forkserver-XXXXXXXX/socket`` below it) must fit AF_UNIX's 108 bytes.
MAX_TMPDIR = 60


def scratch_env(tmp: Path) -> dict[str, str]:
    """``TMPDIR`` pointing into ``tmp`` (removed with it, so what a killed child left there
    goes too), or nothing when the path is too long for asv's fork server socket."""
    return {"TMPDIR": str(tmp)} if len(str(tmp)) <= MAX_TMPDIR else {}


class Interrupted(KeyboardInterrupt):
    """The run received SIGTERM or SIGINT (``signum``)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux /proc); empty where there is none."""
    out: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for e in entries:
        if not e.isdigit():
            continue
        try:
            stat = Path(f"/proc/{e}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[0] != "Z":  # a zombie only waits to be reaped
            out[int(e)] = int(fields[1])
    return out


def descendants(pid: int | None = None) -> list[int]:
    """Live processes below ``pid`` (default: this one), by parent pid."""
    root = os.getpid() if pid is None else pid
    parents = _parents()
    found: list[int] = []
    frontier = {root}
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier and p not in found and p != root]
        found.extend(kids)
        frontier = set(kids)
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _signal_all(pids: list[int], sig: int) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_descendants(grace_s: float = GRACE_S, spare: frozenset[int] = frozenset()) -> list[int]:
    """SIGTERM every live descendant but ``spare`` (those that were there before the run),
    SIGKILL what is left after ``grace_s``, reap; returns the pids that had to be ended
    (empty when the run left nothing behind)."""
    def ours() -> list[int]:
        return [p for p in descendants() if p not in spare]

    pids = ours()
    if not pids:
        return []
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        if not ours():
            return pids
        time.sleep(0.05)
    for _ in range(20):  # SIGKILL cannot be refused; a fork in between is caught next round
        left = ours()
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
        _reap()
    return pids


def end_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """End a child started with ``start_new_session=True`` and its process group: SIGTERM,
    then SIGKILL after ``grace_s``; always waited for."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def interruptible(grace_s: float = GRACE_S) -> Iterator[None]:
    """SIGTERM/SIGINT raise ``Interrupted`` inside; every descendant is ended on the way out
    (see the module docstring). Outside the main thread signals cannot be caught: the
    body runs as it is, and its descendants are still ended. Processes that were already
    running below the caller when it entered are left alone."""
    main = threading.current_thread() is threading.main_thread()
    fired: list[int] = []

    def handler(signum, _frame):
        if fired:  # already stopping: let the cleanup finish
            return
        fired.append(signum)
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)} if main else {}
    spare = frozenset(descendants())  # a caller's own children (a test's server) are not ours
    reaper = _subreaper(True)
    try:
        yield
    finally:
        try:
            if reaper or not sys.platform.startswith("linux"):
                end_descendants(grace_s, spare)
        finally:
            if reaper:
                _subreaper(False)
            for s, h in old.items():
                signal.signal(s, h)
