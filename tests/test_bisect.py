"""Does ``vlmpath bisect`` name the commit that regressed, measuring only what it must?

A real git repository with 8 commits on main; the 5th halves the throughput (the fake
suite of tests/test_ci_flow.py reads the number from each commit's own code, so a wrong
checkout shows as a wrong answer). The two ends already have results, as main's history
would (bench-main.yml): binary search over the 6 commits between needs 3 measurements.
"""

from __future__ import annotations

import pytest
from asv_fixtures import fingerprint, write_asv_run
from test_ci_flow import BENCH, MACHINE, SPEED, FakeSuite, commit_value, git, repo  # noqa: F401 (fixture)

from vlmpath.pr import bisect as ci_bisect
from vlmpath.core.errors import VlmpathError


def history(repo):
    return [commit_value(repo, 1.0, f"commit {i}", speed=1000.0 if i < 5 else 400.0) for i in range(1, 9)]


def known(store, sha, speed):
    """Results main's history already holds for ``sha``."""
    write_asv_run(store, MACHINE, sha, {BENCH: ("fraction", [], [], [1.0], None),
                                        SPEED: ("tok/s", [], [], [speed], None)}, fingerprint("cpu"))


def run(repo, store, good, bad, suite, bench="track_tok_per_s"):
    return ci_bisect.bisect(good, bad, bench, ci_bisect.BisectOptions(repo=repo, machine=MACHINE, results_dir=store),
                            run_suite=suite, env={"PATH": "/usr/bin:/bin"})


def test_bisect_names_the_fifth_commit_measuring_three(repo, tmp_path):
    commits = history(repo)
    store = tmp_path / "store"
    known(store, commits[0], 1000.0)
    known(store, commits[-1], 400.0)
    suite = FakeSuite()
    res = run(repo, store, commits[0], commits[-1], suite)
    assert res.first_bad == commits[4] and res.last_good == commits[3]
    assert res.subject == "commit 5"
    assert suite.commits() == [commits[3], commits[5], commits[4]] == res.measured
    assert len(suite.commits()) <= 4 and res.steps == 3
    assert set(res.reused) == {commits[0], commits[-1]}
    # Every commit ran bad's suite with its own code.
    assert all(c.bench_root == suite.calls[0].bench_root for c in suite.calls)
    assert len({c.source for c in suite.calls}) == 3
    ((case, base, head),) = [(c.benchmark, c.base, c.head) for c in res.regressions]
    assert (case, base, head) == (SPEED, 1000.0, 400.0)
    text = ci_bisect.render(res)
    assert text.startswith(f"first bad commit: {commits[4]} commit 5\n")
    assert "1,000 -> 400 tok/s (-60.0%)" in text.replace("1000 ", "1,000 ")
    assert "3 commit(s) measured, 2 reused" in text
    # A second bisect reuses every result it already has: nothing is measured again.
    again = FakeSuite()
    res2 = run(repo, store, commits[0], commits[-1], again)
    assert again.calls == [] and res2.first_bad == commits[4]
    assert len(git(repo, "worktree", "list").splitlines()) == 1  # temporary worktrees removed


def test_unknown_ends_are_measured_too(repo, tmp_path):
    commits = history(repo)
    suite = FakeSuite()
    res = run(repo, tmp_path / "store", commits[1], commits[6], suite)  # 6 commits, ends unknown
    assert res.first_bad == commits[4] and suite.commits()[:2] == [commits[1], commits[6]]
    assert len(suite.commits()) == 4 and res.steps == 2  # the 2 ends, then 2 of the 4 between


def test_no_regression_between_the_ends_is_a_clear_error(repo, tmp_path):
    commits = history(repo)
    with pytest.raises(VlmpathError, match="no selected case .*track_accuracy.* regressed"):
        run(repo, tmp_path / "store", commits[0], commits[-1], FakeSuite(), bench="track_accuracy")
    with pytest.raises(VlmpathError, match="not a descendant"):
        run(repo, tmp_path / "store", commits[-1], commits[0], FakeSuite())
    with pytest.raises(VlmpathError, match="not a regular expression"):
        run(repo, tmp_path / "store", commits[0], commits[-1], FakeSuite(), bench="(")
