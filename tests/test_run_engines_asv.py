"""Does ``vlmpath run --engine NAME==X`` measure each engine release through asv, filed so the
dashboard shows the releases side by side (issue 23, item 3)?

Real asv runs of ``bench_engine.Engine`` (quick, tiny) for the reference and for the newest
complete sglang and vLLM environments (``VLMPATH_ENGINE_INSTALL``'s releases in CI), into one
results directory: each engine's results are filed under its own machine name
(``cpu-e2e``, ``cpu-e2e-sglang-X``, ``cpu-e2e-vllm-X``) with accuracy 1.0 and the engine's
routine counts, and the published dashboard lists every one of those machines. Only the
last run publishes (``asv publish`` reads the whole results directory): one dashboard,
published once, must hold all three machines, and two publishes fewer are ~2 x 10 s. Skipped,
with the reason, where an engine has no environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.compare.asv_results import load_asv
from vlmpath.engines import envs

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "cpu-e2e"
BENCH = r"bench_engine\.Engine\.track_(accuracy|routine_bytecodes|routine_aten_elements)\('multi_region'\)"


def _run(engine: str | None, tmp: Path, publish: bool) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "vlmpath.cli", "run", "--repo", str(ROOT), "--quick", "--scale", "tiny",
           "--machine", MACHINE, "--bench", BENCH, "--results-dir", str(tmp / "results"),
           "--html-dir", str(tmp / "html"), "--reports-dir", str(tmp / "reports"), "--allow-dirty", "--strict"]
    if engine:
        cmd += ["--engine", engine]
    if not publish:
        cmd.append("--no-publish")
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1500)


@pytest.mark.timeout(1800)
def test_each_release_is_its_own_machine_of_one_dashboard(tmp_path):
    found = {name: envs.env_for_tests(name) for name in ("sglang", "vllm")}
    missing = [n for n, e in found.items() if e is None]
    if missing:
        pytest.skip(f"no complete engine environment for {', '.join(missing)} (vlmpath engine install NAME==X)")
    labels = [None, *(e.spec.label for e in found.values())]
    for i, label in enumerate(labels):
        r = _run(label, tmp_path, publish=i == len(labels) - 1)
        assert r.returncode == 0, (label, r.stdout[-3000:], r.stderr[-3000:])
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    runs = {m.machine: m for m in load_asv(tmp_path / "results", sha).machines}
    slugs = [MACHINE, *(f"{MACHINE}-{e.spec.slug}" for e in found.values())]
    assert set(slugs) <= set(runs), sorted(runs)
    for machine in slugs:
        got = {m.benchmark.rsplit(".", 1)[1]: m for m in runs[machine].metrics if m.ok}
        assert got["track_accuracy"].value == 1.0, machine
        if machine != MACHINE:  # the engines' own routine counts (the reference's: vlmpath instructions)
            assert got["track_routine_bytecodes"].value > 1000 and got["track_routine_aten_elements"].value > 1000
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    assert set(slugs) <= set(index["params"]["machine"])
