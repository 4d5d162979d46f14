"""How do the engine PR tests drive a git repository of an engine and ``vlmpath ci pr --engine-src``?

Shared by ``test_engine_pr_sglang.py`` and ``test_engine_pr_vllm.py``: ``git`` runs git in
the repository with a fixed identity; ``ci_pr`` runs the real CLI in a subprocess between two
commits (one repeat, the PR charts off, tok/s given a band no timing can leave: timings never
decide a pass/fail test) and returns (exit code, comment.md, seconds).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                        "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def ci_pr(repo: Path, python: str, base: str, head: str, out: Path, tmp: Path, workloads: Sequence[str],
          *extra: str) -> tuple[int, str, float]:
    cfg = tmp / "thresholds.yaml"
    cfg.write_text("rules:\n  - pattern: 'track_tok_per_s'\n    factor: {gpu: 1000, cpu: 1000}\n")
    cmd = [sys.executable, "-m", "vlmpath.cli", "ci", "pr", "--engine-src", str(repo), "--base", base,
           "--head", head, "--out", str(out), "--machine", "cpu-engine-test", "--repeat", "1",
           "--engine-python", python, "--config", str(cfg), "--no-charts", *extra]
    for w in workloads:
        cmd += ["--workload", w]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - t0
    print(r.stdout[-4000:], r.stderr[-4000:], sep="\n")
    comment = (out / "comment.md").read_text(encoding="utf-8") if (out / "comment.md").exists() else ""
    return r.returncode, comment, took
