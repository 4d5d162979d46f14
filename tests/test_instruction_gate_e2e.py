"""Does the real counter, under callgrind, turn a planted 5% red and leave unchanged code green?

Three checkouts of this source tree counted at once (one callgrind process each, as the PR
job counts base and head): the tree itself (base), an unchanged copy (A/A) and a copy whose
``EmbedRoutine.run_step`` does extra work after every step (``ci.plant.Plant``: fixed 96x96
matrix products, ``PLANT_MM`` of them, about 5% of the ``video`` case's pass). One small
case only (``EmbedRoutine('default', 'video')``, one counted pass): valgrind's start-up with
torch is the cost (minutes), so this is ``e2e``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vlmpath.ci import ir_cases
from vlmpath.compare.verdict import Thresholds, Verdict, compare

ROOT = Path(__file__).resolve().parents[1]
CASE = r"\('default', 'video'\)"
#: Extra 96x96 products after the step: ~5% of the video pass (measured: see the assertion).
PLANT_MM = 100
PLANT = f"""

# --- planted by tests/test_instruction_gate_e2e.py: extra work after every step ---------
def _planted(run_step):
    import torch

    from vlmpath.ci.plant import UNIT_N, Plant

    a = torch.ones(UNIT_N, UNIT_N)

    def run(self, step):
        out = run_step(self, step)
        Plant(0.05, {PLANT_MM}).work(a)
        return out
    return run


EmbedRoutine.run_step = _planted(EmbedRoutine.run_step)
"""

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (ci/setup.sh installs it)")


def _copy(tmp: Path, name: str, plant: bool) -> Path:
    src = tmp / name / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    if plant:
        with (src / "vlmpath" / "engines" / "reference.py").open("a", encoding="utf-8") as fh:
            fh.write(PLANT)
    return src


@pytest.mark.e2e
def test_a_planted_five_percent_turns_the_instruction_gate_red_under_callgrind(tmp_path):
    sides = [ir_cases.Side("base", ROOT / "src", "a" * 40), ir_cases.Side("head", _copy(tmp_path, "same", False), "b" * 40),
             ir_cases.Side("head", _copy(tmp_path, "planted", True), "c" * 40)]
    base, same, planted = ir_cases.count_sides(sides, bench=CASE, threads=1, log=lambda m: None)
    counts = [s["records"][0]["instructions"] for s in (base, same, planted)]
    assert all(s["not_measured"] is None and len(s["records"]) == 1 for s in (base, same, planted)), (base, same, planted)
    assert all(isinstance(n, int) and n > 1_000_000 for n in counts), counts

    def verdict(b, h, sha_b, sha_h):
        report = compare(ir_cases.run_results(b, "cpu-e2e", sha_b), ir_cases.run_results(h, "cpu-e2e", sha_h),
                         Thresholds.default())
        (row,) = report.all()
        return row.verdict

    assert verdict(base, same, "a" * 40, "b" * 40) is Verdict.UNCHANGED, counts
    planted_size = counts[2] / counts[0] - 1
    assert 0.02 < planted_size < 0.25, f"the plant landed at {planted_size:+.1%}, not ~5%: recalibrate PLANT_MM"
    assert verdict(base, planted, "a" * 40, "c" * 40) is Verdict.REGRESSION, counts
