"""The GPU smoke check's Python half and its shell wrapper, run on CPU at tiny scale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.selfcheck.smoke import run_smoke
from vlmpath.core.errors import VlmpathError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # see tests/bench/conftest.py
    yield
    torch.set_num_threads(before)


def test_run_smoke_counts_and_times(tmp_path, one_thread):
    res = run_smoke(tmp_path, "tiny", ["video"])
    rows = {r["pipeline"]: r for r in res["syncs"]["pipelines"]}
    assert rows["default"]["count"] == 0
    assert rows["legacy"]["count"] >= 2  # mask_sum + where_index per step with video tokens
    assert rows["default"]["driver_count"] is None  # no driver cross-check without a GPU
    inj = res["syncs"]["inject"]
    assert inj["masked_scatter"]["count"] == 0 and inj["where_index"]["count"] == 1
    t = res["timing"]
    assert t["method"] == "perf_counter" and t["steps"] >= 1
    assert 0 < t["event_s"] and t["events_within_wall"]
    for name in ("syncs.json", "timing.json", "smoke.json"):
        assert json.loads((tmp_path / name).read_text())
    assert json.loads((tmp_path / "smoke.json").read_text())["fingerprint"]["backend"] == "cpu"


def test_run_smoke_rejects_bad_input(tmp_path):
    with pytest.raises(VlmpathError, match="unknown preset"):
        run_smoke(tmp_path, "tiny", ["nope"])
    with pytest.raises(VlmpathError, match="needs a CUDA or ROCm"):
        run_smoke(tmp_path, "full", ["video"])


@pytest.mark.e2e
def test_gpu_smoke_script_on_cpu(tmp_path):
    env = dict(os.environ, SMOKE_PRESETS="video", PYTHON=sys.executable, OMP_NUM_THREADS="1")
    proc = subprocess.run(["bash", str(ROOT / "ci" / "gpu-smoke.sh"), str(tmp_path), "tiny"],
                          env=env, check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads((tmp_path / "fingerprint.json").read_text())["backend"] == "cpu"
    recs = [json.loads(line) for line in (tmp_path / "measure-pipelines.jsonl").read_text().splitlines()]
    by_pipe = {r["pipeline"]["inject"]: r for r in recs}
    assert by_pipe["where_index"]["syncs"] > 0 and by_pipe["masked_scatter"]["syncs"] == 0
    enc = [json.loads(line) for line in (tmp_path / "measure-encode.jsonl").read_text().splitlines()]
    assert {r["pipeline"]["encode"] for r in enc} == {"batched", "per_request"}
    assert all(r["accuracy"] == 1.0 for r in enc + recs)
