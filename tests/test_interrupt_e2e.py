"""Does SIGTERM mid-``vlmpath ci pr`` leave nothing behind and say that it was interrupted?

A real ``ci pr`` subprocess on a small real git repository whose one benchmark sleeps: the
flow checks both commits out, runs ``vlmpath run`` (asv, its fork server, the benchmark
process in a process group of its own) and is sent SIGTERM while the benchmark runs.
Afterwards: no process that ran with this test's marker in its environment is alive
(``/proc/*/environ``), the repository has no worktree but its own, the temporary
directory the flow was given is empty, ``error.txt`` says it was interrupted, nothing of
head is filed or claimed, and the results directory is free again.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from engine_pr_repo import git

from vlmpath.core.run_lock import results_lock

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

SRC = Path(__file__).resolve().parents[1] / "src"
ASV_CONF = {"version": 1, "project": "sleepy", "repo": ".", "branches": ["main"], "dvcs": "git",
            "environment_type": "existing", "pythons": [], "benchmark_dir": "benchmarks",
            "results_dir": ".asv/results", "html_dir": ".asv/html", "env_dir": ".asv/env",
            "build_command": [], "install_command": [], "uninstall_command": []}
SLEEPY = '''import os, time


class Sleepy:
    def track_nap(self):
        with open(os.environ["SLEEPY_MARK"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(300)
        return 1.0
'''


def _marked(token: str) -> list[int]:
    """Live processes whose environment holds ``token`` (every one the run started)."""
    found = []
    for e in os.listdir("/proc"):
        if not e.isdigit() or int(e) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{e}/environ").read_bytes()
            state = Path(f"/proc/{e}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in env and state != "Z":
            found.append(int(e))
    return found


def test_sigterm_mid_ci_pr_ends_every_child_and_removes_worktrees_and_temp_dirs(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "asv.conf.json").write_text(json.dumps(ASV_CONF))
    (repo / "src" / "vlmpath").mkdir(parents=True)
    (repo / "src" / "vlmpath" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench_sleepy.py").write_text(SLEEPY)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "src" / "vlmpath" / "__init__.py").write_text("VALUE = 2\n")
    git(repo, "commit", "-qam", "head")
    head = git(repo, "rev-parse", "HEAD")

    token = secrets.token_hex(8)
    # Short, as CI's /tmp is: asv's fork server socket lives below it (core.interrupt.MAX_TMPDIR).
    scratch = Path(tempfile.mkdtemp(prefix="vi-", dir="/tmp"))
    mark, out, results = tmp_path / "mark", tmp_path / "out", tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(scratch), "SLEEPY_MARK": str(mark),
           "SLEEPY_TOKEN": token, "HOME": str(tmp_path)}
    try:
        _interrupt_and_check(repo, base, head, env, token, scratch, mark, out, results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _interrupt_and_check(repo, base, head, env, token, scratch, mark, out, results):
    proc = subprocess.Popen([sys.executable, "-m", "vlmpath.cli", "ci", "pr", "--base", base, "--head", head,
                             "--repo", str(repo), "--out", str(out), "--results-dir", str(results),
                             "--machine", "cpu-interrupt", "--quick", "--no-charts"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (mark.is_file() and mark.read_text().strip()) and proc.poll() is None:
            assert time.monotonic() < deadline, "the benchmark never started"
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read()  # type: ignore[union-attr]
        bench_pid = int(mark.read_text().split()[0])
        assert Path(f"/proc/{bench_pid}").exists() and len(_marked(token)) >= 3  # ci pr, vlmpath run, asv, ...
        proc.send_signal(signal.SIGTERM)
        log, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, log[-3000:]
    left = _marked(token)
    assert left == [], f"processes left: {left}"
    assert [ln for ln in git(repo, "worktree", "list", "--porcelain").splitlines()
            if ln.startswith("worktree ")] == [f"worktree {repo}"]
    assert list(scratch.iterdir()) == []  # worktrees, asv's fork server dir, the runs' temp files
    error = (out / "error.txt").read_text()
    assert "interrupted" in error and "SIGTERM" in error
    # Interrupted before asv filed any result of head: nothing of head is claimed at all (no
    # run-info file, no results file), so no later flow can take it for a complete baseline;
    # a run interrupted after asv filed results marks them partial (runner.run._run_locked).
    assert not list((results / "cpu-interrupt").glob(f"{head[:8]}-*.json"))
    assert not (results / "cpu-interrupt" / f"vlmpath-run-{head[:8]}.json").exists()
    with results_lock(results, "after", env={}):  # free again
        pass
