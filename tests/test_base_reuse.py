"""Is a stored base result reused only when it is valid for this comparison, and does a
comparison that could not judge its cases say so instead of reading green?

Uses the PR flow's small git repositories and fake suite (``tests/test_ci_flow.py``): the
trusted store is filled the way the main workflow fills it (the suite's results, stamped
``trusted`` as ``vlmpath run --trusted`` does), then one thing about it is made invalid.
Each refusal test has the unchanged twin (``test_valid_trusted_base_is_reused``) green.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, write_asv_run
from test_ci_flow import BENCH, MACHINE, SPEED, FakeSuite, commit_value, repo, run  # noqa: F401 (fixture)

from vlmpath.pr import side as pr_side
from vlmpath.runner.run_files import read_run_info, RunInfo, write_run_info
from vlmpath.compare.comparison import (
    EXIT_INCOMPLETE,
    Comparison,
    ComparisonReport,
    MachineComparison,
    Verdict,
)
from vlmpath.render.escape import md_escape
from vlmpath.render.headline import headline


def trusted_base(tmp_path: Path, repo: Path, sha: str, *, quick: bool = False, scale: str | None = None) -> Path:
    """Measure ``sha`` into a separate trusted store, as the main workflow would."""
    store = tmp_path / "trusted"
    suite = FakeSuite()
    suite(pr_side.SuiteRequest(commit=sha, source=_checkout(repo, sha, tmp_path), bench_root=repo,
                               results_dir=store, machine=MACHINE, bench=None, quick=quick,
                               env={"ASV_PYTHONPATH": str(_checkout(repo, sha, tmp_path) / "src")}))
    write_run_info(store, MACHINE, sha, RunInfo(quick=quick, scale=scale, bench=None, trusted=True))
    return store


def _checkout(repo: Path, sha: str, tmp_path: Path) -> Path:
    import subprocess

    dest = tmp_path / f"co-{sha[:8]}"
    if not dest.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(dest), sha], check=True)
    return dest


def pr(repo, tmp_path, base, head, store, **kw):
    suite = FakeSuite()
    res = run(repo, tmp_path, base, head, suite, trusted_results=store, **kw)
    return suite, res


@pytest.fixture
def history(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad", speed=500.0)
    return good, bad, trusted_base(tmp_path, repo, good)


def test_valid_trusted_base_is_reused(repo, tmp_path, history):
    good, bad, store = history
    suite, res = pr(repo, tmp_path, good, bad, store)
    assert suite.commits() == [bad] and res.reused_base
    assert len(res.report.regressions) == 2
    assert not (tmp_path / "store" / MACHINE / f"{good[:8]}-existing-py_usr_bin_python3.json").exists()
    # What the PR flow measured is stamped untrusted: it never becomes a baseline.
    assert read_run_info(tmp_path / "store", MACHINE, bad)["trusted"] is False


def test_base_measured_by_a_pr_run_is_not_reused(repo, tmp_path, history):
    good, bad, store = history
    write_run_info(store, MACHINE, good, RunInfo(quick=False, scale=None, bench=None, trusted=False))
    suite, res = pr(repo, tmp_path, good, bad, store)
    assert suite.commits() == [bad, good] and not res.reused_base
    assert any("not written by a trusted" in n for n in res.notes)


def test_changed_benchmark_version_is_measured_again(repo, tmp_path, history):
    good, bad, store = history
    (f,) = (store / MACHINE).glob(f"{good[:8]}-*.json")
    data = json.loads(f.read_text())
    data["results"][BENCH][data["result_columns"].index("version")] = "0" * 64
    f.write_text(json.dumps(data))
    suite, res = pr(repo, tmp_path, good, bad, store)
    assert suite.commits() == [bad, good]
    assert any(f"benchmark {BENCH} changed" in n for n in res.notes)


def test_changed_fingerprint_is_measured_again(repo, tmp_path, history):
    good, bad, store = history
    (store / MACHINE / f"vlmpath-fingerprint-{good[:8]}.json").write_text(json.dumps(fingerprint("cpu", torch="2.6.0")))
    suite, res = pr(repo, tmp_path, good, bad, store)
    assert suite.commits() == [bad, good]
    assert any("toolchain changed since the stored base: torch 2.6.0 -> 2.7.1" in n for n in res.notes)


@pytest.mark.parametrize("kw", [{"quick": True}, {"scale": "full"}])
def test_other_options_are_measured_again(repo, tmp_path, history, kw):
    good, bad, store = history
    suite, res = pr(repo, tmp_path, good, bad, store, **kw)
    assert suite.commits() == [bad, good]
    assert any("other options" in n for n in res.notes)


def test_base_from_a_narrower_bench_is_measured_and_the_regression_found(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 1.0, "bad", speed=500.0)  # the regression is in SPEED only
    store = tmp_path / "trusted"
    # A trusted run with --bench accuracy: asv files the unselected benchmark as NaN.
    write_asv_run(store, MACHINE, good, {BENCH: ("fraction", [], [], [1.0], None),
                                         SPEED: ("tok/s", [], [], [float("nan")], None)}, fingerprint("cpu"))
    write_run_info(store, MACHINE, good, RunInfo(quick=False, scale=None, bench="accuracy", trusted=True))
    suite, res = pr(repo, tmp_path, good, bad, store)
    assert suite.commits() == [bad, good]
    assert any(f"did not measure {SPEED}" in n for n in res.notes)
    assert [(c.benchmark, c.base, c.head) for c in res.report.regressions] == [(SPEED, 1000.0, 500.0)]
    assert res.exit_code == 1
    # --bench selecting only the accuracy: the narrower base is enough, and only it is shown.
    suite, res = pr(repo, tmp_path, good, bad, store, bench="accuracy")
    assert suite.commits() == [bad] and [c.benchmark for c in res.report.all()] == [BENCH]


def test_a_comparison_of_skipped_cases_is_incomplete_not_green(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 1.0, "bad", speed=500.0)

    def suite(req):  # the base side skipped everything (NaN): nothing can be judged
        nan = req.commit == good
        write_asv_run(req.results_dir, req.machine, req.commit, {
            BENCH: ("fraction", [], [], [float("nan") if nan else 1.0], None),
            SPEED: ("tok/s", [], [], [float("nan") if nan else 500.0], None)}, fingerprint("cpu"))

    res = run(repo, tmp_path, good, bad, suite)
    assert res.exit_code == EXIT_INCOMPLETE == 3
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "No regressions" not in comment
    assert "**Incomplete: nothing judged**: 2 of 2 cases not judged (" + md_escape("skipped on base: 2") + ")" in comment
    assert "incomplete, nothing judged (2 case(s) not judged): exit 3" in (tmp_path / "out" / "summary.txt").read_text()
    assert json.loads((tmp_path / "out" / "run.json").read_text())["incomplete"] is True


def _rows(verdicts):
    return tuple(Comparison(machine="m", benchmark=f"b.B.track_{i}", params=(), unit="calls", base=1.0, head=1.0,
                            verdict=v, reason="skipped on base" if v is Verdict.NOT_COMPARABLE else "")
                 for i, v in enumerate(verdicts))


@pytest.mark.parametrize(("verdicts", "lead", "code"), [
    ([Verdict.UNCHANGED] * 3, "**No regressions**:", 0),
    ([Verdict.UNCHANGED] * 2 + [Verdict.NOT_COMPARABLE], "**No regressions among 2 judged**: 1 of 3 cases not judged", 0),
    ([Verdict.UNCHANGED] + [Verdict.NOT_COMPARABLE] * 2, "**Incomplete**: 2 of 3 cases not judged", 3),
    ([Verdict.REGRESSION] + [Verdict.NOT_COMPARABLE] * 2, "**1 regression", 1),
])
def test_not_judged_cases_are_counted_in_the_headline_and_exit_status(verdicts, lead, code):
    rep = ComparisonReport("a" * 40, "b" * 40, (MachineComparison("m", "both", _rows(verdicts)),))
    assert headline(rep).startswith(lead)
    assert rep.exit_code() == code and rep.exit_code(fail_on_regression=False) == 0


def test_only_run_trusted_stamps_results_trusted(monkeypatch):
    from vlmpath.runner import run as run_mod
    from vlmpath.cli import main

    seen = []

    class Stop(Exception):
        pass

    def fake_run(opts):
        seen.append(opts.trusted)
        raise Stop

    monkeypatch.setattr(run_mod, "run", fake_run)
    for argv, want in ((["run", "--quick"], False), (["run", "--quick", "--trusted"], True)):
        with pytest.raises(Stop):
            main(argv)
        assert seen.pop() is want
