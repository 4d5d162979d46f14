"""Real shards: ``vlmpath run --shard K/2`` in two processes and results directories, then
``vlmpath shards merge`` into one store, ``vlmpath compare`` and ``vlmpath plan`` on it.

One small class (``bench_inject.Count``, 6 cases, 12 benchmark rows) keeps it to about a
minute of asv per shard on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = r"bench_inject\.Count\."
MACHINE = "cpu-shard-e2e"

pytestmark = pytest.mark.e2e


def _vlmpath(args, cwd: Path, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlmpath.cli", *args], cwd=cwd, env=env, check=False,
                          capture_output=True, text=True, timeout=600)


def test_two_real_shards_merge_into_the_whole_selection(tmp_path):
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "-B", "main"], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(clone / "src"))
    dirs = []
    for k in (1, 2):
        d = tmp_path / f"shard{k}"
        proc = _vlmpath(["run", "--quick", "--bench", BENCH, "--shard", f"{k}/2", "--machine", MACHINE, "--trusted",
                         "--results-dir", str(d), "--reports-dir", str(tmp_path / f"r{k}"), "--no-publish"],
                        clone, env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert f"shard {k}/2: 6 of 12 benchmark cases (3 units)" in proc.stdout, proc.stdout[-2000:]
        info = json.loads((d / MACHINE / f"vlmpath-run-{head[:8]}.json").read_text())
        assert info["shard"]["k"] == k and len(info["shard"]["units"]) == 3
        dirs.append(d)
    owned = [set(json.loads((d / MACHINE / f"vlmpath-run-{head[:8]}.json").read_text())["shard"]["units"])
             for d in dirs]
    assert not owned[0] & owned[1] and len(owned[0] | owned[1]) == 6

    store = tmp_path / "store"
    proc = _vlmpath(["shards", "merge", *map(str, dirs), "--into", str(store)], clone, env)
    assert proc.returncode == 0 and "(shards 1, 2 of 2)" in proc.stdout, proc.stdout + proc.stderr
    assert len(list((store / MACHINE).glob(f"{head[:8]}-*.json"))) == 1

    from vlmpath.compare.asv_results import load_asv

    run = load_asv(store, head)
    measured = {(m.benchmark, m.params) for m in run.machines[0].metrics if m.value is not None}
    assert len(measured) == 12  # 6 cases x (time_count, track_syncs): every case, once
    proc = _vlmpath(["compare", head, head, "--results", str(store), "--repo", str(clone)], clone, env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]

    proc = _vlmpath(["plan", "--machine", MACHINE, "--shards", "2", "--results", str(store), "--bench", BENCH],
                    clone, env)
    assert proc.returncode == 0, proc.stderr
    assert f"costs of {MACHINE}'s trusted run {head[:8]}" in proc.stdout
    # Balanced by the measured costs now, so the split need not be 3 + 3 units: together all 6.
    got = [(int(c), int(u)) for c, u in re.findall(r"shard [12]/2: (\d+) cases \((\d+) units\)", proc.stdout)]
    assert len(got) == 2 and sum(c for c, _ in got) == 12 and sum(u for _, u in got) == 6 and all(u >= 1 for _, u in got)
