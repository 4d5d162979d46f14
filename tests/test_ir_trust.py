"""Does ``vlmpath trust`` judge the routine-only and tower counts at their PR bands (issue 22, item 5)?

Synthetic rounds in the shape ``selfcheck.ir_trust``'s worker writes (no valgrind): an A/A pair
whose counts differ by the cross-process jitter stays green, planted 2% and 5% changes are
caught at the routine band, and the report says what each plant really added. The real
counts under callgrind: ``vlmpath trust --rounds 0 --instructions 10`` (figures in docs/verified.md).
"""

from __future__ import annotations

from vlmpath.selfcheck import ir_trust
from vlmpath.selfcheck import trust
from vlmpath.compare.thresholds import Thresholds


def _ir(rounds: int = 10) -> dict:
    rows = [{"base": 3_000_000, "aa": 3_000_090, "0.02": 3_063_000, "0.05": 3_150_000,
             "tower_base": 300_000_000, "tower_aa": 300_000_000, "tower_0.02": 306_500_000,
             "tower_0.05": 315_000_000} for _ in range(rounds)]
    return {"sizes": [0.02, 0.05], "rounds": rows}


def test_a_a_is_green_and_planted_changes_are_caught_at_the_pr_bands():
    tallies: dict = {}
    ir_trust.tally_counts(tallies, _ir(), Thresholds.default(), trust.tally, trust.thresholds_with_band)
    got = {g: (t.rounds, t.false_regressions, dict(t.detected)) for (g, _), t in tallies.items()}
    assert got == {"routine instructions": (10, 0, {"2%": 10, "5%": 10}),
                   "tower instructions": (10, 0, {"2%": 10, "5%": 10})}
    bands = {g: b for g, b in tallies}
    assert bands["routine instructions"] <= 0.02 and bands["tower instructions"] <= 0.02


def test_the_report_says_what_each_plant_added():
    real = ir_trust.realized(_ir(2))
    assert real["routine instructions 2%"] == [0.021, 0.021]
    assert real["tower instructions 5%"] == [0.05, 0.05]


def test_the_native_counter_really_counts_a_a_alike_and_catches_each_plant_at_its_band():
    """The real worker, natively (``--counter ops``, the PR job's default): two rounds of
    A/A and planted 2%/5% changes of each tally, judged at the PR bands."""
    ir = ir_trust.count_trust("video", "tiny", 2, ir_trust.SIZES, 1, log=lambda m: None, counter="ops")
    assert ir["complete"] and len(ir["rounds"]) == 2
    assert all(r["base"] == r["aa"] and r["bc_base"] == r["bc_aa"] and r["tower_base"] == r["tower_aa"]
               for r in ir["rounds"])  # exact: the same pass counts the same, every time
    tallies: dict = {}
    ir_trust.tally_counts(tallies, ir, Thresholds.default(), trust.tally, trust.thresholds_with_band)
    got = {g: (t.rounds, t.false_regressions, dict(t.detected)) for (g, _), t in tallies.items()}
    assert got == {g: (2, 0, {"2%": 2, "5%": 2}) for g in ir_trust.OPS_GATES}
    landed = ir_trust.realized(ir)  # each plant landed near its size, in its own unit
    assert all(0.012 < min(v) and max(v) < 0.03 for k, v in landed.items() if k.endswith(" 2%")), landed
