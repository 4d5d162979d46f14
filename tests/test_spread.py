"""What a run can see (issue 12): indicative quick verdicts never fail alone, tok/s with
samples gets the significance test and its interval, the MDE marks "too noisy to judge",
twin rows are reported once, and the paired (interleaved) test on known shifts."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from vlmpath.compare import spread
from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare, judge
from vlmpath.render.comment import render_markdown, render_terminal

CFG = Thresholds.default()
TOK = "bench_embed.EmbedRoutine.track_tok_per_s"


def _m(value, unit="seconds", samples=(), bench="b.B.time_x", params=(), ci=None) -> Metric:
    return Metric(machine="cpu-a", benchmark=bench, params=params, unit=unit, value=value,
                  samples=tuple(samples), ci_99=ci)


def _run(commit, metrics) -> RunResults:
    return RunResults(commit=commit, machines=(MachineRun(machine="cpu-a", commit=commit, metrics=tuple(metrics)),))


# --- quick mode is indicative ----------------------------------------------------------------


def test_one_sample_regression_is_indicative_and_exits_zero():
    # A 3x "slowdown" of one quick sample each: shown, never failing by itself.
    rep = compare(_run("a" * 40, [_m(1e-6, samples=[1e-6])]), _run("b" * 40, [_m(3e-6, samples=[3e-6])]), CFG)
    (c,) = rep.all()
    assert c.verdict is Verdict.REGRESSION and c.indicative
    assert rep.indicative == [c] and not rep.regressions and rep.exit_code() == 0
    assert "indicative" in render_markdown(rep) and "indicative" in render_terminal(rep)


def test_quick_flag_marks_sampleless_band_verdicts_indicative_and_says_one_sample():
    b, h = _m(100.0, unit="GB/s"), _m(40.0, unit="GB/s")
    assert compare(_run("a" * 40, [b]), _run("b" * 40, [h]), CFG).exit_code() == 1  # a real run still gates
    rep = compare(_run("a" * 40, [b]), _run("b" * 40, [h]), CFG, quick=True)
    assert rep.exit_code() == 0 and rep.indicative
    assert any("one sample" in n for n in rep.notes)


def test_quick_never_softens_exact_gates_or_newly_failing():
    b, h = _m(0.0, unit="syncs", samples=[0.0]), _m(1.0, unit="syncs", samples=[1.0])
    assert compare(_run("a" * 40, [b]), _run("b" * 40, [h]), CFG, quick=True).exit_code() == 1
    broken = Metric(machine="cpu-a", benchmark="b.B.time_x", params=(), unit="seconds", value=None, error="failed")
    assert compare(_run("a" * 40, [_m(1.0)]), _run("b" * 40, [broken]), CFG, quick=True).exit_code() == 1


def test_enough_samples_still_fail():
    rng = random.Random(1)
    base = [1.0 + rng.uniform(0, 0.02) for _ in range(7)]
    head = [x * 2.0 for x in base]
    c = judge(_m(1.0, samples=base), _m(2.0, samples=head), CFG, "cpu")
    assert c.verdict is Verdict.REGRESSION and not c.indicative and c.method == "mann-whitney"


# --- tok/s with samples: the test, the interval, the MDE ----------------------------------------


def test_tok_per_s_with_samples_gets_mann_whitney_and_reports_its_interval():
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 1001.0]
    head = [x * 0.4 for x in base]  # 60% fewer tok/s
    c = judge(_m(1000.0, "tok/s", base, TOK, ci=(985.0, 1012.0)), _m(400.0, "tok/s", head, TOK, ci=(394.0, 405.0)),
              CFG, "cpu")
    assert c.verdict is Verdict.REGRESSION and c.method == "mann-whitney" and c.significant
    assert c.head_ci == (394.0, 405.0) and c.mde == pytest.approx(0.02 * 1.0, abs=0.005)
    rep = compare(_run("a" * 40, [_m(1000.0, "tok/s", base, TOK, ci=(985.0, 1012.0))]),
                  _run("b" * 40, [_m(400.0, "tok/s", head, TOK, ci=(394.0, 405.0))]), CFG)
    assert "99% CI 394-405 tok/s" in render_terminal(rep)
    assert ComparisonReport.from_dict(json.loads(json.dumps(rep.to_dict()))) == rep


def test_mde_is_the_shift_at_which_the_verdicts_own_test_fires():
    """The MDE a row states is checked against the test itself: a shift just above it is
    judged significant, just below it is not; one stalled pass (4x) sets the range, so the
    old range estimate said ~150%, while the test needs only a few percent."""
    rng = random.Random(7)
    base = [1.0 + rng.uniform(0, 0.03) for _ in range(16)]
    head = [1.0 + rng.uniform(0, 0.03) for _ in range(15)] + [4.0]
    c = judge(_m(1.0, samples=base), _m(1.0, samples=head), CFG, "cpu")
    assert c.mde is not None and c.mde < 0.1 < spread.mde(base, head)  # exact vs range estimate
    centred = [x * statistics.median(base) / statistics.median(head) for x in head]
    for d, fires in ((c.mde * 1.02, True), (c.mde * 0.9, False)):
        shifted = [x * (1 + d) for x in centred]
        got = judge(_m(1.0, samples=base), _m(statistics.median(shifted), samples=shifted), CFG, "cpu")
        assert got.significant is fires, d
    # At 6 samples per side asv's test can never fire (2/C(12,6) > 0.002): no shift is visible.
    six = CFG.__class__(CFG.gpu_factor, CFG.cpu_factor, 6, CFG.p_threshold, CFG.units, CFG.rules)
    blind = judge(_m(1.0, samples=base[:6]), _m(1.0, samples=head[:6]), six, "cpu")
    assert blind.mde is None and blind.too_noisy and spread.mde(base[:6], head[:6], lambda x, y: False) == math.inf


def test_unchanged_beyond_the_runs_sight_is_too_noisy_to_judge():
    wide = [0.5, 1.0, 2.0, 0.7, 1.5, 1.1, 0.9]  # range 150% of the median > the 50% CPU band
    c = judge(_m(1.0, samples=wide), _m(1.0, samples=list(reversed(wide))), CFG, "cpu")
    assert c.verdict is Verdict.UNCHANGED and c.too_noisy and c.mde > c.factor
    rep = compare(_run("a" * 40, [_m(1.0, samples=wide)]), _run("b" * 40, [_m(1.0, samples=wide)]), CFG)
    assert "too noisy to judge" in render_markdown(rep)
    tight = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0]
    c2 = judge(_m(1.0, samples=tight), _m(1.0, samples=tight), CFG, "cpu")
    assert c2.verdict is Verdict.UNCHANGED and not c2.too_noisy


# --- each finding once --------------------------------------------------------------------------


def test_encode_metrics_twin_of_embed_default_is_reported_once():
    def both(tok):
        return [
            _m(tok, "tok/s", (), "bench_encode.EncodeMetrics.track_tok_per_s",
               (("strategy", "batched"), ("preset", "video"))),
            _m(tok, "tok/s", (), TOK, (("pipeline", "default"), ("preset", "video"))),
            # not a twin: another strategy with other values
            _m(tok * 2, "tok/s", (), "bench_encode.EncodeMetrics.track_tok_per_s",
               (("strategy", "per_request"), ("preset", "video"))),
        ]

    rep = compare(_run("a" * 40, both(1000.0)), _run("b" * 40, both(300.0)), CFG)
    assert len(rep.regressions) == 2
    assert {c.benchmark for c in rep.regressions} == {TOK, "bench_encode.EncodeMetrics.track_tok_per_s"}
    assert any("reported once" in n for n in rep.notes) and not rep.partial


# --- paired (interleaved) comparison ------------------------------------------------------------


def _rounds(shift: float, n: int, seed: int, drift: bool = True):
    """Per-round medians of base and head with a shared drift (a neighbour's load that
    changes between rounds but hits both sides of a round alike) and 3% own noise."""
    rng = random.Random(seed)
    base, head = [], []
    for i in range(n):
        load = 1.0 + (0.8 * (i % 3) if drift else 0.0)
        base.append(load * rng.uniform(0.97, 1.03))
        head.append(load * (1 + shift) * rng.uniform(0.97, 1.03))
    return base, head


def test_paired_detects_a_known_shift_under_drift():
    base, head = _rounds(0.10, 8, seed=3)
    r = spread.paired_shift(base, head, factor=0.05)
    assert r.significant and r.median_ratio == pytest.approx(1.10, abs=0.04) and r.p_value < 0.05
    # The same samples unpaired: the drift (up to 2.6x) swamps a 10% shift.
    c = judge(_m(1.0, samples=base), _m(1.0, samples=head), CFG, "cpu")
    assert c.verdict is Verdict.UNCHANGED


@pytest.mark.parametrize("seed", range(5))
def test_paired_aa_is_not_significant(seed):
    base, head = _rounds(0.0, 8, seed=seed)
    assert not spread.paired_shift(base, head, factor=0.05).significant


def test_signed_rank_p_matches_the_exact_null_distribution():
    # n = 6, W+ = 15 (ranks 1-5 up, 6 down): 14 of the 64 sign patterns have W+ >= 15.
    assert spread.signed_rank_p([1, 2, 3, 4, 5, -6]) == pytest.approx(2 * 14 / 64)
    assert spread.signed_rank_p([0.1] * 6) == pytest.approx(2 / 64)  # all tied, all up: the smallest p
    assert spread.signed_rank_p([1, -1, 2, -2]) == 1.0
    assert spread.signed_rank_p([0.0, 0.0]) == 1.0  # no non-zero pair: no evidence


def test_paired_shift_survives_flipped_pairs_that_sink_a_sign_test():
    """16 pairs with a 25% slowdown, 4 of them flipped by a neighbour's burst on the base pass
    (the trust runs saw this): a sign test needs 13 of 16 in one direction and misses it; the
    signed-rank test weighs the 12 large up-moves against 4 small down-moves and catches it."""
    base = [1.0] * 16
    head = [1.25] * 12 + [0.97, 0.98, 0.96, 0.99]
    r = spread.paired_shift(base, head, factor=0.10)
    assert r.significant and r.p_value < 0.01
    up = sum(h > b for b, h in zip(base, head))
    sign_p = 2 * sum(math.comb(16, i) for i in range(16 - up + 1)) / 2**16
    assert sign_p > 0.05  # what the sign test would have said


def test_paired_rejects_unequal_rounds():
    with pytest.raises(ValueError, match="equal in number"):
        spread.paired_shift([1.0, 2.0], [1.0])


def test_quick_run_summary_says_numbers_are_one_sample():
    from vlmpath.render import summary as summod

    s = summod.Summary(commit="a" * 40, machine="m", status="complete", rows=(), asv_returncode=0,
                       duration_s=1.0, fingerprint=None, options={"quick": True}, notes=())
    assert "ONE sample" in summod.render_terminal(s)
    assert "ONE sample" not in summod.render_terminal(summod.Summary(
        commit="a" * 40, machine="m", status="complete", rows=(), asv_returncode=0, duration_s=1.0,
        fingerprint=None, options={"quick": False}, notes=()))
