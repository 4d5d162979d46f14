"""Is another run writing to this results directory, and who is it?

One run at a time per results directory: ``results_lock`` takes an exclusive
``fcntl.flock`` on ``<results>/.vlmpath-run.lock`` for as long as the run lasts, and writes
the holder (pid, command, start time) into the file. A second ``vlmpath run`` or
``vlmpath ci pr`` on the same directory **refuses at once** (``VlmpathError``, exit 2)
naming the first run; it never waits. Why refuse rather than wait: a run holds the
directory for minutes to hours, so any bounded wait shorter than that only delays the same
refusal, and a longer one parks a CI job silently; two jobs that should queue say so with
their CI's own concurrency group, or use two results directories. Nothing is lost either
way: the refused run has not touched the directory.

The lock is the kernel's, not the file's: it goes with the holder's process (a killed run
frees it at once; no stale-lock cleanup). A run that ends removes the file while it still
holds it, and a run that wins a lock on a file no longer at that path opens it again, so
two runs never hold two inodes of one lock (a killed run's empty file stays, harmlessly).

A run started by the holder on the same directory (``ci pr`` runs ``vlmpath run`` per side)
is let through: the holder hands its children ``VLMPATH_RUN_LOCK=<lock file>\\t<token>``,
and a child whose token matches the one in the file, while the lock is held, runs under
its parent's lock.

The lock covers the children too. A holder killed with ``SIGKILL`` frees the kernel's lock
at once, but its children (``vlmpath run``, asv, the benchmark processes) live on and still
write the directory. So a run that wins the lock reads the last holder's token from the
file (a killed holder never removed it) and looks for live processes that carry it in
their environment (``live_holders``, from ``/proc``): while any does, it refuses, naming
them, exactly as if the holder were alive.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from vlmpath.core.errors import VlmpathError

LOCK_NAME = ".vlmpath-run.lock"
LOCK_ENV = "VLMPATH_RUN_LOCK"
#: Longest command shown in a refusal (the holder's own argv, clipped).
COMMAND_CHARS = 300


def lock_path(results_dir: str | os.PathLike[str]) -> Path:
    return Path(results_dir) / LOCK_NAME


def _read_holder(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 1 << 14).decode("utf-8", "replace")
        data = json.loads(raw) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _inherited(path: Path, fd: int, env: Mapping[str, str]) -> bool:
    """Is this run a child of the holder (same lock file, same token)?"""
    given, _, token = env.get(LOCK_ENV, "").partition("\t")
    if not token or Path(given) != path:
        return False
    return secrets.compare_digest(str(_read_holder(fd).get("token", "")), token)


def _refusal(path: Path, holder: Mapping) -> VlmpathError:
    started = holder.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)) if isinstance(started, (int, float)) else "?"
    cmd = str(holder.get("command", "?"))[:COMMAND_CHARS]
    return VlmpathError(
        f"results directory {path.parent} is in use by another run (pid {holder.get('pid', '?')}, started {when}: "
        f"{cmd}); wait for it to finish, or pass another --results-dir"
    )


def _open_locked(path: Path) -> tuple[int, bool]:
    """(fd of the lock file, locked?). A holder removes the file as it lets go; one opened just
    before that is a dead inode, so a lock won on it is dropped and the path opened again."""
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return fd, False
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd, True
        os.close(fd)
    raise VlmpathError(f"cannot lock {path}: it keeps being replaced; is another tool removing it?")


def live_holders(path: Path, token: str, proc_root: str = "/proc", me: int | None = None) -> list[int]:
    """Pids of live processes whose environment carries this lock's ``LOCK_ENV`` value
    (a killed holder's children); [] where there is no ``/proc``."""
    want = f"{LOCK_ENV}={path}\t{token}".encode()
    me = os.getpid() if me is None else me
    out = []
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(os.path.join(proc_root, name, "environ"), "rb") as f:
                env = f.read(1 << 20)
        except OSError:  # gone, or another user's
            continue
        if want in env.split(b"\0"):
            out.append(int(name))
    return sorted(out)


def _orphans_refusal(path: Path, holder: Mapping, pids: list[int]) -> VlmpathError:
    shown = ", ".join(str(p) for p in pids[:5]) + (" ..." if len(pids) > 5 else "")
    return VlmpathError(
        f"results directory {path.parent} is still written by {len(pids)} process(es) of a run that was killed "
        f"(pid {holder.get('pid', '?')}: {str(holder.get('command', '?'))[:COMMAND_CHARS]}); its children "
        f"{shown} are alive: wait for them to end or stop them, or pass another --results-dir"
    )


@contextmanager
def results_lock(results_dir: str | os.PathLike[str], command: str,
                 env: Mapping[str, str] | None = None) -> Iterator[dict[str, str]]:
    """Hold ``results_dir`` for this run; yields the variables to hand the runs it starts on
    the same directory (``{LOCK_ENV: ...}``). Refuses with a ``VlmpathError`` naming the
    holder when another run has it (see the module docstring)."""
    env = os.environ if env is None else env
    path = lock_path(results_dir).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, locked = _open_locked(path)
    try:
        if not locked:
            if not _inherited(path, fd, env):
                raise _refusal(path, _read_holder(fd))
            yield {LOCK_ENV: env[LOCK_ENV]}
            return
        last = _read_holder(fd)  # a killed holder's file: are its children still writing?
        if last.get("token"):
            pids = live_holders(path, str(last["token"]))
            if pids:
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise _orphans_refusal(path, last, pids)
        token = secrets.token_hex(16)
        holder = {"pid": os.getpid(), "command": command[:COMMAND_CHARS], "started": time.time(), "token": token}
        os.ftruncate(fd, 0)  # a killed run's file may still hold its holder
        os.pwrite(fd, (json.dumps(holder) + "\n").encode("utf-8"), 0)
        try:
            yield {LOCK_ENV: f"{path}\t{token}"}
        finally:
            path.unlink(missing_ok=True)  # while still held: nothing is left in the directory
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
