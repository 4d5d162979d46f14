"""Do two runs on one results directory exclude each other, and does a stopped run end its children?

Real processes throughout: the lock (``core.run_lock``) is taken by one subprocess and
tried by others (the kernel's flock, not a file's contents, decides), and
``core.interrupt`` is shown on a process that orphans a grandchild in a session of its
own, as asv does with its benchmark processes. The real ``vlmpath run`` pair and SIGTERM
mid-``ci pr`` are end to end (``tests/test_run.py``, ``tests/test_interrupt_e2e.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.core.run_lock import LOCK_ENV, lock_path, results_lock

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}

HOLD = r"""
import os, sys
from vlmpath.core.run_lock import results_lock
with results_lock(sys.argv[1], "first run --bench x") as handed:
    print(os.getpid(), handed["VLMPATH_RUN_LOCK"].split("\t")[1], flush=True)
    sys.stdin.read()  # held until the test closes stdin (or kills us)
"""

TRY = r"""
import sys
from vlmpath.core.errors import VlmpathError
from vlmpath.core.run_lock import results_lock
try:
    with results_lock(sys.argv[1], "second run"):
        print("got it")
except VlmpathError as exc:
    print(exc)
    sys.exit(2)
"""


def _holder(results: Path) -> tuple[subprocess.Popen, int, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(results)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=ENV)
    pid, token = proc.stdout.readline().split()  # type: ignore[union-attr]
    return proc, int(pid), token


def _try(results: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", TRY, str(results)], capture_output=True, text=True,
                          env=env or ENV, timeout=60)


def test_a_second_run_refuses_naming_the_first_and_gets_in_once_it_is_gone(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "kept.json").write_text("{}")
    first, pid, _ = _holder(results)
    try:
        second = _try(results)
        assert second.returncode == 2
        assert f"pid {pid}" in second.stdout and "first run --bench x" in second.stdout
        assert "UTC" in second.stdout and "--results-dir" in second.stdout  # when, and the fix
        assert (results / "kept.json").read_text() == "{}"  # the refused run touched nothing
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(timeout=30)
    again = _try(results)
    assert again.returncode == 0 and "got it" in again.stdout


def test_a_killed_holder_frees_the_directory_at_once(tmp_path):
    # The kernel drops the lock with the process: no stale-lock file to clean up by hand.
    first, _, _ = _holder(tmp_path)
    first.kill()
    first.wait(timeout=30)
    assert lock_path(tmp_path).exists()
    assert _try(tmp_path).returncode == 0


def test_a_run_the_holder_starts_is_let_in_and_no_other_is(tmp_path):
    first, _, token = _holder(tmp_path)
    try:
        path = str(lock_path(tmp_path).absolute())
        child = _try(tmp_path, env={**ENV, LOCK_ENV: f"{path}\t{token}"})
        assert child.returncode == 0, child.stdout  # ci pr's own `vlmpath run` per side
        forged = _try(tmp_path, env={**ENV, LOCK_ENV: f"{path}\t{'0' * 32}"})
        assert forged.returncode == 2 and "in use by another run" in forged.stdout
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(timeout=30)


def test_the_lock_is_released_and_removed_when_the_run_ends(tmp_path):
    with results_lock(tmp_path, "vlmpath run") as handed:
        holder = json.loads(lock_path(tmp_path).read_text())
        assert holder["pid"] == os.getpid() and holder["token"] == handed[LOCK_ENV].split("\t")[1]
        with pytest.raises(VlmpathError, match=f"pid {os.getpid()}"):  # another open file: refused
            with results_lock(tmp_path, "again", env={}):
                pass
    assert not lock_path(tmp_path).exists()  # nothing left behind
    with results_lock(tmp_path, "next", env={}):
        pass


def test_vlmpath_run_refuses_a_held_results_directory_in_one_line(tmp_path):
    first, pid, _ = _holder(tmp_path / "results")
    try:
        r = subprocess.run([sys.executable, "-m", "vlmpath.cli", "run", "--repo", SRC.rsplit("/", 1)[0],
                            "--results-dir", str(tmp_path / "results"), "--allow-dirty", "--no-publish",
                            "--reports-dir", str(tmp_path / "reports")],
                           capture_output=True, text=True, env=ENV, timeout=120)
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(timeout=30)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and f"pid {pid}" in r.stderr
    assert not (tmp_path / "reports").exists()


ORPHANS = r"""
import os, subprocess, sys, time
from vlmpath.core.interrupt import interruptible
with interruptible(grace_s=2):
    # As asv does: a child that starts a grandchild in a session of its own, then is gone.
    subprocess.run([sys.executable, "-c",
                    "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                    " start_new_session=True); print(p.pid, flush=True)"], check=True)
    print("ready", flush=True)
    time.sleep(300)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_sigterm_ends_even_the_grandchildren_that_left_the_process_group(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", ORPHANS], stdout=subprocess.PIPE, text=True, env=ENV)
    grandchild = int(proc.stdout.readline())  # type: ignore[union-attr]
    assert proc.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
    assert Path(f"/proc/{grandchild}").exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 1  # the uncaught Interrupted: Python's exit status for it
    deadline = time.monotonic() + 10
    while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{grandchild}").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_a_run_ends_what_it_started_and_leaves_its_callers_children_alone():
    from vlmpath.core.interrupt import interruptible

    sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
    callers = subprocess.Popen(sleep)  # e.g. a test's fake server, there before the run
    try:
        with interruptible(grace_s=2):
            started = subprocess.Popen(sleep)
        assert started.poll() is not None  # ended (and reaped) on the way out
        assert callers.poll() is None
    finally:
        callers.kill()
        callers.wait()


HOLD_WITH_CHILD = r"""
import os, subprocess, sys
from vlmpath.core.run_lock import results_lock
with results_lock(sys.argv[1], "vlmpath ci pr --bench x") as handed:
    # as ci pr starts `vlmpath run` per side: the child carries the handed lock
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, **handed})
    print(os.getpid(), child.pid, flush=True)
    sys.stdin.read()
"""


def test_after_kill_9_of_the_holder_a_second_run_is_refused_while_its_children_live(tmp_path):
    first = subprocess.Popen([sys.executable, "-c", HOLD_WITH_CHILD, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=ENV)
    _, child = map(int, first.stdout.readline().split())  # type: ignore[union-attr]
    try:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        refused = _try(tmp_path)
        assert refused.returncode == 2 and f"children {child} are alive" in refused.stdout, refused.stdout
        assert "was killed" in refused.stdout and "vlmpath ci pr" in refused.stdout
    finally:
        os.kill(child, signal.SIGKILL)
        for _ in range(100):  # reaped by init: gone from /proc
            if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
                break
            time.sleep(0.05)
    assert _try(tmp_path).returncode == 0  # the children are gone: the directory is free
