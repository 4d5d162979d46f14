"""Vanished is red, new is never a failure, the selection and the quick flag never decide
(compare.vanished, compare.withheld, compare.spread.indicative; issue 39)."""

from __future__ import annotations

import math

import pytest
from asv_fixtures import sha

from vlmpath.compare.comparison import ComparisonReport, Verdict, dumps_report, loads_report
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.vanished import VANISHED, name_key, near_miss
from vlmpath.compare.verdict import compare
from vlmpath.compare.withheld import TRUSTED_BENCH_ENV, selection_withheld, trusted_selection, withhold

BASE, HEAD = sha("base"), sha("head")
CFG = Thresholds.default()
ACC = "bench_embed.EmbedRoutine.track_accuracy"
SYNCS = "bench_embed.EmbedRoutine.track_syncs"
P = (("pipeline", "default"), ("preset", "multi_region"))


def _m(bench=ACC, value=1.0, unit="fraction", params=P, **kw) -> Metric:
    return Metric(machine="cpu-a", benchmark=bench, params=params, unit=unit, value=value, **kw)


def _pair(base: list[Metric], head: list[Metric]) -> ComparisonReport:
    def run(commit, ms):
        return RunResults(commit=commit, machines=(MachineRun(machine="cpu-a", commit=commit, metrics=tuple(ms)),))
    return compare(run(BASE, base), run(HEAD, head), CFG)


# Nine untouched cases keep the vanished one under half of the comparison: the old rule let
# "at most half the cases affected" through as green.
STEADY = [_m(SYNCS, 0.0, "syncs", params=(("pipeline", "default"), ("preset", f"p{i}"))) for i in range(9)]


def test_an_unchanged_pair_stays_green():
    rep = _pair([_m(), *STEADY], [_m(), *STEADY])
    assert rep.exit_code() == 0 and rep.judged == 10 and not rep.regressions


@pytest.mark.parametrize("spelling, head", [
    ("missing", []),
    ("asv skipped (NaN)", [_m(value=None, skipped=True)]),
    ("not a number", [_m(value=None, invalid="value 'nan' is not a number")]),
    ("failed", [_m(value=None, error="RuntimeError: boom")]),
    ("renamed with a confusable letter", [_m(ACC.replace("a", "\u0430", 1))]),  # Cyrillic a
    ("renamed, fullwidth", [_m("bench_embed.EmbedRoutine.track_\uff41ccuracy")]),
    ("renamed, zero-width inside", [_m("bench_embed.EmbedRoutine.track_acc\u200buracy")]),
    ("parameter renamed", [_m(params=(("pipeline", "default"), ("preset", "multi-region")))]),
    ("parameter key renamed", [_m(params=(("pipe", "default"), ("preset", "multi_region")))]),
])
def test_each_vanish_spelling_is_red(spelling, head):
    rep = _pair([_m(), *STEADY], [*head, *STEADY])
    assert rep.exit_code() == 1, spelling
    (bad,) = rep.regressions
    assert bad.benchmark == ACC and bad.params == P and bad.base == 1.0
    assert bad.verdict is Verdict.NEWLY_FAILING
    if spelling != "failed":  # a failed case keeps its own error as the reason
        assert bad.reason.startswith(VANISHED)


def test_the_near_miss_is_named():
    forged = ACC.replace("track", "tra\u0441k")  # Cyrillic es
    rep = _pair([_m(), *STEADY], [_m(forged), *STEADY])
    (bad,) = rep.regressions
    assert f"near-miss on head: {forged} (pipeline=default, preset=multi_region)" in bad.reason
    rep = _pair([_m(), *STEADY], [_m(params=(("pipeline", "default"), ("preset", "multi_regi0n"))), *STEADY])
    assert "near-miss on head" in rep.regressions[0].reason and "multi_regi0n" in rep.regressions[0].reason


def test_name_key_folds_look_alikes_and_keeps_distinct_names_apart():
    assert name_key("track_\uff41ccuracy") == name_key("track_accuracy") == name_key("TRACK_ACC\u200bURACY")
    assert name_key("tr\u0430ck") == name_key("track") and name_key("track_syncs") != name_key("track_accuracy")
    assert near_miss(_m(), {}) is None


def test_base_that_judged_nothing_leaves_nothing_to_vanish():
    # base skipped it: head has no row: not judged (REMOVED), not a failure
    rep = _pair([_m(value=None, skipped=True), *STEADY], STEADY)
    assert rep.exit_code() == 0 and [c.verdict for c in rep.all() if c.benchmark == ACC] == [Verdict.REMOVED]


def test_new_cases_are_shown_and_never_fail_the_check():
    new_ok = _m("bench_new.New.track_accuracy")
    new_broken = _m("bench_new.Broken.track_accuracy", value=None, error="ValueError: new")
    rep = _pair([_m(), *STEADY], [_m(), *STEADY, new_ok, new_broken])
    assert rep.exit_code() == 0
    assert {c.benchmark for c in rep.by_verdict(Verdict.NEW)} == {new_ok.benchmark, new_broken.benchmark}
    # more new cases than judged ones: still green (new never counts toward "incomplete")
    many = [_m(f"bench_new.N{i}.track_accuracy") for i in range(30)]
    assert _pair([_m()], [_m(), *many]).exit_code() == 0


def _tok(samples, value):
    return Metric(machine="cpu-a", benchmark="bench_embed.EmbedRoutine.time_encode", params=P, unit="seconds",
                  value=value, samples=tuple(samples))


def test_a_quick_flag_never_makes_a_sampled_drop_indicative():
    b = [1.0 + 0.001 * i for i in range(10)]
    h = [2.0 + 0.001 * i for i in range(10)]  # twice as slow, 10 samples a side
    run = lambda c, m, q: RunResults(commit=c, machines=(  # noqa: E731
        MachineRun(machine="cpu-a", commit=c, metrics=(m,), quick=q),))
    rep = compare(run(BASE, _tok(b, 1.0045), True), run(HEAD, _tok(h, 2.0045), True), CFG, quick=True)
    assert rep.exit_code() == 1 and not rep.regressions[0].indicative
    # one sample a side (a quick run's) is indicative by its count, flag or none
    rep = compare(run(BASE, _tok([1.0], 1.0), None), run(HEAD, _tok([2.0], 2.0), None), CFG)
    assert rep.exit_code() == 0 and rep.indicative_moves and not rep.regressions


def test_a_selection_cutting_base_judged_cases_is_incomplete_never_green():
    rep = _pair([_m(), *STEADY], [_m(value=0.5), *STEADY])
    assert rep.exit_code() == 1
    cut_to_syncs = {"cpu-a": "track_syncs"}
    reasons = selection_withheld(rep, cut_to_syncs)
    assert len(reasons) == 1 and "leaves out 1 case(s) base judged" in reasons[0] and ACC in reasons[0]
    from vlmpath.compare.selection import keep_selected

    cut = keep_selected(withhold(rep, reasons), cut_to_syncs)
    assert not cut.regressions and cut.exit_code() == 3  # the regressed row is gone, the verdict is not green
    assert keep_selected(rep, cut_to_syncs).exit_code() == 0  # planted: what the cut alone gave
    # the trusted workflow chose the same selection: nothing withheld
    assert selection_withheld(rep, cut_to_syncs, trusted="track_syncs") == ()
    assert trusted_selection({TRUSTED_BENCH_ENV: "track_syncs"}) == "track_syncs" and trusted_selection({}) is None
    # the reasons survive the JSON round trip the comment job reads
    again = loads_report(dumps_report(withhold(rep, reasons)), "t.json")
    assert again.withheld == reasons and again.incomplete


def test_vanished_value_is_never_a_nan_in_the_row():
    rep = _pair([_m(), *STEADY], [_m(value=None, skipped=True), *STEADY])
    (bad,) = rep.regressions
    assert bad.head is None and not math.isnan(bad.base)
