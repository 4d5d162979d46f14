"""``vlmpath ci pr --interleave N``: base and head alternate (ABAB, one fresh run each),
each round is kept, and timings are judged on the paired rounds (issue 12)."""

from __future__ import annotations

import random
import re

import pytest
from asv_fixtures import fingerprint, write_asv_run
from test_ci_flow import MACHINE, SPEED, FakeSuite, commit_value, repo, run  # noqa: F401 (fixture)

from vlmpath.compare.comparison import Verdict
from vlmpath.compare.paired import MIN_ROUNDS, paired_report
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError

CFG = Thresholds.default()


class DriftingSuite(FakeSuite):
    """tok/s = the commit's SPEED x a load factor that changes per round (both sides of a
    round share it) x 2% own noise: what a neighbour's job does to a shared runner."""

    def __init__(self, seed: int):
        super().__init__(benches=(SPEED,))
        self.rng = random.Random(seed)
        self.load = 1.0

    def __call__(self, req):
        if len(self.calls) % 2 == 0:
            self.load = self.rng.choice([1.0, 0.35, 0.6, 0.9])
        self.calls.append(req)
        text = (req.source / "src" / "vlmpath" / "__init__.py").read_text()
        speed = float(re.search(r"SPEED = (\S+)", text).group(1)) * self.load * self.rng.uniform(0.98, 1.02)
        write_asv_run(req.results_dir, req.machine, req.commit,
                      {SPEED: ("tok/s", [], [], [speed], None)}, fingerprint("cpu"))


@pytest.mark.e2e
@pytest.mark.parametrize("head_speed,expected", [(1300.0, Verdict.REGRESSION), (2000.0, Verdict.UNCHANGED)])
def test_interleaved_rounds_pair_base_and_head(repo, tmp_path, head_speed, expected):  # noqa: F811
    base = commit_value(repo, 1.0, "base", speed=2000.0)
    head = commit_value(repo, 1.0, "head", speed=head_speed)  # 35% fewer tok/s, or A/A
    suite = DriftingSuite(seed=7)
    res = run(repo, tmp_path, base, head, suite, interleave=6)
    assert suite.commits() == [base, head] * 6  # ABAB..., never a reused base
    assert len(list((tmp_path / "out" / "rounds").glob("*/*/" + MACHINE))) == 12
    (c,) = [c for c in res.report.all() if c.benchmark == SPEED]
    assert c.method == "paired" and c.verdict is expected and not c.indicative
    assert res.exit_code == (1 if expected is Verdict.REGRESSION else 0)
    # ci merge of the job's own artifact (what bench-comment.yml posts) judges the same
    # rounds the same way: the merged verdict is the job's (pr.merge_rounds).
    from vlmpath.pr.merge import merge_artifacts

    merged = merge_artifacts(tmp_path / "out", tmp_path / "merged", fail_on_regression=True)
    (m,) = [m for m in merged.report.all() if m.benchmark == SPEED]
    assert (m.method, m.verdict, m.reason) == (c.method, c.verdict, c.reason)
    assert merged.exit_code == res.exit_code


@pytest.mark.e2e
def test_interleave_needs_two_or_more_rounds(repo, tmp_path):  # noqa: F811
    sha = commit_value(repo, 1.0, "one")
    with pytest.raises(VlmpathError, match="--interleave 1"):
        run(repo, tmp_path, sha, sha, FakeSuite(), interleave=1)


def _rr(commit, value):
    m = Metric(machine="cpu-a", benchmark="b.B.time_x", params=(), unit="seconds", value=value)
    return RunResults(commit=commit, machines=(MachineRun(machine="cpu-a", commit=commit, metrics=(m,)),))


def _paired(shift: float, rounds: int, seed: int):
    rng = random.Random(seed)
    loads = [rng.choice([1.0, 2.5, 1.6]) for _ in range(rounds)]
    base = [_rr("a" * 40, load * rng.uniform(0.98, 1.02)) for load in loads]
    head = [_rr("b" * 40, load * (1 + shift) * rng.uniform(0.98, 1.02)) for load in loads]
    last = compare(base[-1], head[-1], CFG)
    return paired_report(base, head, last, CFG)


def test_paired_report_detects_a_known_shift_and_passes_an_aa_pair():
    (c,) = _paired(0.8, 8, seed=1).all()  # 80% slower: beyond the 50% CPU band, under 2.5x drift
    assert c.verdict is Verdict.REGRESSION and c.method == "paired"
    for seed in range(5):
        rep = _paired(0.0, 8, seed=seed)
        assert rep.exit_code() == 0 and rep.all()[0].verdict is Verdict.UNCHANGED


def test_too_few_rounds_are_indicative():
    rep = _paired(0.8, MIN_ROUNDS - 1, seed=1)
    (c,) = rep.all()
    assert c.indicative and rep.exit_code() == 0


def test_too_few_rounds_never_read_unchanged_but_too_noisy():
    """Two rounds, a -40% and a +160% move: the test cannot reach its level at n=2, so the
    row says too noisy to judge, never "unchanged"; enough rounds of an A/A pair do say it."""
    from vlmpath.render.spread_text import TOO_NOISY, verdict_text

    base = [_rr("a" * 40, 1.0), _rr("a" * 40, 1.0)]
    head = [_rr("b" * 40, 0.6), _rr("b" * 40, 2.6)]
    (c,) = paired_report(base, head, compare(base[-1], head[-1], CFG), CFG).all()
    assert c.verdict is Verdict.UNCHANGED and c.too_noisy and verdict_text(c, "unchanged") == TOO_NOISY
    (aa,) = _paired(0.0, 8, seed=0).all()
    assert aa.verdict is Verdict.UNCHANGED and not aa.too_noisy


def test_quick_rounds_are_judged_on_pairs_once_there_are_enough_of_them():
    """The CPU PR job runs its rounds quick (one pass each): each round is one sample of the
    paired test, so six rounds give a full verdict, not an indicative one."""
    rng = random.Random(3)
    loads = [rng.choice([1.0, 2.5, 1.6]) for _ in range(MIN_ROUNDS)]
    base = [_rr("a" * 40, load) for load in loads]
    head = [_rr("b" * 40, load * 1.3) for load in loads]
    quick_last = compare(base[-1], head[-1], CFG, quick=True)
    assert quick_last.all()[0].indicative  # one quick round alone never gates
    (c,) = paired_report(base, head, quick_last, CFG).all()
    assert c.verdict is Verdict.REGRESSION and not c.indicative
