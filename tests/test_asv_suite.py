"""The asv suite itself: its config, ``asv check``, and a real ``asv run`` + ``asv publish``.

asv reads ``~/.asv-machine.json``, so every asv call here runs with HOME in a tmp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath import run as runmod
from vlmpath.results import load_asv

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "vlmpath-test"


def _env(home: Path) -> dict:
    return dict(os.environ, HOME=str(home), ASV_PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")


def _config(tmp: Path) -> Path:
    conf = runmod.load_config(ROOT / "asv.conf.json")
    return runmod.write_config(conf, ROOT, tmp / "results", tmp / "html", tmp / "asv.conf.json")


def _asv(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asv", *args], env=_env(home), cwd=ROOT,
                          check=False, capture_output=True, text=True, timeout=timeout)


def test_config_keys():
    conf = runmod.load_config(ROOT / "asv.conf.json")
    assert conf["repo"] == "." and conf["benchmark_dir"] == "benchmarks"
    assert conf["results_dir"] == ".asv/results" and conf["html_dir"] == ".asv/html"
    assert conf["launch_method"] == "spawn"  # never forkserver by default (CUDA)
    assert conf["environment_type"] == "existing"
    assert ".asv/" in (ROOT / ".gitignore").read_text().split()


def test_asv_check_passes(tmp_path):
    proc = _asv("check", "-E", f"existing:{sys.executable}", "--config", str(_config(tmp_path)), home=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "No problems found" in proc.stdout


@pytest.mark.slow
def test_real_asv_run_records_units_samples_and_publishes(tmp_path):
    cfg = _config(tmp_path)
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert _asv("machine", "--yes", "--machine", MACHINE, "--config", str(cfg), home=tmp_path).returncode == 0
    regex = (r"bench_inject\.Count\.(time_count|track_syncs)\('\w+', 'many_small_images'\)"
             r"|bench_embed\.EmbedRoutine\.track_(syncs|accuracy)\('legacy', 'video'\)")
    proc = _asv("run", "--config", str(cfg), "-E", f"existing:{sys.executable}", "--set-commit-hash", sha,
                "--machine", MACHINE, "--record-samples", "--show-stderr", "--launch-method", "forkserver",
                "-b", regex, home=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]

    meta = json.loads((tmp_path / "results" / "benchmarks.json").read_text())
    assert meta["bench_inject.Count.track_syncs"]["unit"] == "syncs"
    assert meta["bench_embed.EmbedRoutine.track_accuracy"]["unit"] == "fraction"
    assert meta["bench_embed.EmbedRoutine.track_tok_per_s"]["unit"] == "tok/s"
    assert meta["bench_inject.Count.time_count"]["unit"] == "seconds"

    (mrun,) = load_asv(tmp_path / "results", sha).machines
    got = {(m.benchmark, tuple(v for _, v in m.params)): m for m in mrun.metrics if m.ok}
    assert got[("bench_inject.Count.track_syncs", ("mask_sum", "many_small_images"))].value == 1.0
    assert got[("bench_inject.Count.track_syncs", ("offsets", "many_small_images"))].value == 0.0
    assert got[("bench_embed.EmbedRoutine.track_syncs", ("legacy", "video"))].value >= 2
    assert got[("bench_embed.EmbedRoutine.track_accuracy", ("legacy", "video"))].value == 1.0
    for strategy in ("mask_sum", "offsets"):
        timing = got[("bench_inject.Count.time_count", (strategy, "many_small_images"))]
        assert len(timing.samples) >= 6, "asv's Mann-Whitney test needs >= 6 samples per side"
        assert timing.value > 0
    assert len(got) == 6  # exactly the selection; unselected combinations are skipped

    pub = _asv("publish", "--config", str(cfg), home=tmp_path)
    assert pub.returncode == 0, pub.stdout[-3000:] + pub.stderr[-2000:]
    assert (tmp_path / "html" / "index.html").is_file()
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    assert {"bench_inject.Count.time_count", "bench_embed.EmbedRoutine.track_syncs"} <= set(index["benchmarks"])
    assert MACHINE in index["params"]["machine"]
