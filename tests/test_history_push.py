"""Do two history jobs pushing the bench-results branch at once both land (ci/history.sh push)?

bench-main.yml appends CPU and GPU results in separate jobs with no run-wide queue, so two
pushes can race. The real script runs against a real bare repository (``file://``): the
second push is rejected, rebases onto the first and lands; every result file is on the
branch afterwards. A push whose rebase conflicts (the same file changed both ways) exits
non-zero, so the job fails instead of dropping results.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "ci" / "history.sh"


def _env(tmp: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp / "home"), "GIT_CONFIG_NOSYSTEM": "1",
            "REPO": "owner/name", "SERVER_URL": f"file://{tmp / 'server'}", "GITHUB_TOKEN": "unused-for-file-urls"}


def _history(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(HISTORY), *args], env=_env(tmp), capture_output=True, text=True, timeout=120)


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}).stdout


def _remote(tmp: Path) -> Path:
    (tmp / "home").mkdir()
    bare = tmp / "server" / "owner" / "name.git"
    _git("init", "-q", "--bare", "-b", "bench-results", str(bare))
    seed = tmp / "seed"
    _git("init", "-q", "-b", "bench-results", str(seed))
    (seed / "results").mkdir()
    (seed / "results" / "old.json").write_text("{}")
    _git("add", "-A", cwd=seed)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed", cwd=seed)
    _git("push", "-q", str(bare), "HEAD:refs/heads/bench-results", cwd=seed)
    return bare


def test_two_racing_pushes_both_land(tmp_path):
    bare = _remote(tmp_path)
    cpu, gpu = tmp_path / "cpu", tmp_path / "gpu"
    for d in (cpu, gpu):  # both fetched before either pushes: the race
        r = _history(tmp_path, "fetch", "bench-results", str(d))
        assert r.returncode == 0, r.stderr
    (cpu / "results" / "cpu-ci.json").write_text('{"m": "cpu"}')
    (gpu / "results" / "cuda-ci.json").write_text('{"m": "cuda"}')
    first = _history(tmp_path, "push", str(cpu), "cpu results")
    second = _history(tmp_path, "push", str(gpu), "gpu results")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    files = _git("ls-tree", "-r", "--name-only", "bench-results", cwd=bare).split()
    assert files == ["results/cpu-ci.json", "results/cuda-ci.json", "results/old.json"]


def test_a_push_that_cannot_rebase_fails_loudly(tmp_path):
    _remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        assert _history(tmp_path, "fetch", "bench-results", str(d)).returncode == 0
    (a / "results" / "old.json").write_text('{"v": 1}')
    (b / "results" / "old.json").write_text('{"v": 2}')  # the same file, changed both ways
    assert _history(tmp_path, "push", str(a), "a").returncode == 0
    r = _history(tmp_path, "push", str(b), "b")
    assert r.returncode != 0
