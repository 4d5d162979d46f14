"""Does the PR flow measure the right commits, clean up, and never report a silent "no change"?

The flow runs against small real git repositories with a fake suite runner (injected
``run_suite``) that writes asv-format results from the commit it was given: the value it
records is read from that commit's own ``src/vlmpath/__init__.py``, so a wrong checkout,
a wrong baseline or a stale file shows up as a wrong verdict. The real runner is
exercised end to end in ``tests/test_pr_replay.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, write_asv_run

from vlmpath.pr import merge as ci_merge
from vlmpath.pr import flow as ci_flow
from vlmpath.pr.options import PrOptions
from vlmpath.pr import outputs as pr_outputs
from vlmpath.compare.selection import asv_selects
from vlmpath.pr import side as pr_side
from vlmpath.runner.run_files import RunInfo, write_run_info
from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.core.errors import VlmpathError
from vlmpath.render.escape import md_escape

MACHINE = "cpu-test"
BENCH = "bench_embed.Embed.track_accuracy"
SPEED = "bench_embed.Embed.track_tok_per_s"


def git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                        "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def commit_value(repo: Path, accuracy: float, msg: str, speed: float = 1000.0) -> str:
    pkg = repo / "src" / "vlmpath"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(f"ACCURACY = {accuracy}\nSPEED = {speed}\n")
    (repo / "benchmarks").mkdir(exist_ok=True)
    (repo / "benchmarks" / "suite.txt").write_text(f"suite of {msg}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    return r


class FakeSuite:
    """Records each request and writes results computed from the requested commit."""

    def __init__(self, skip: set[str] = frozenset(), benches=(BENCH, SPEED), corrupt: set[str] = frozenset(),
                 fail: bool = False):
        self.calls: list[pr_side.SuiteRequest] = []
        self.skip, self.benches, self.corrupt, self.fail = set(skip), benches, set(corrupt), fail

    def __call__(self, req: pr_side.SuiteRequest) -> None:
        self.calls.append(req)
        # The flow's promise: the benchmarks import the commit's src/ first.
        assert req.env["ASV_PYTHONPATH"].split(os.pathsep)[0] == str(req.source / "src")
        assert req.source.is_dir() and (req.bench_root / "benchmarks").is_dir()
        if self.fail:
            raise RuntimeError("runner crashed")
        if req.commit in self.skip:
            return
        text = (req.source / "src" / "vlmpath" / "__init__.py").read_text()
        acc = float(re.search(r"ACCURACY = (\S+)", text).group(1))
        speed = float(re.search(r"SPEED = (\S+)", text).group(1))
        # A negative SPEED is a failing case, filed with its message as ``vlmpath run`` does.
        specs = {BENCH: ("fraction", [], [], [acc], None),
                 SPEED: ("tok/s", [], [], [speed if speed >= 0 else None], None)}
        path = write_asv_run(req.results_dir, req.machine, req.commit,
                             {k: specs[k] for k in self.benches}, fingerprint("cpu"))
        if speed < 0:
            why = [{"benchmark": SPEED, "params": {}, "error": f"RuntimeError: split_with_sizes <{speed}>"}]
            (path.parent / f"vlmpath-failures-{req.commit[:8]}.json").write_text(json.dumps(why))
        if req.commit in self.corrupt:
            path.write_text("{ not json")

    def commits(self) -> list[str]:
        return [c.commit for c in self.calls]


def run(repo: Path, tmp_path: Path, base: str, head: str, suite: FakeSuite, **kw) -> pr_outputs.FlowResult:
    kw.setdefault("results_dir", tmp_path / "store")
    fakes = {k: kw.pop(k) for k in ("profile", "profiler") if k in kw}  # not options: what replaces the world
    return ci_flow.run_pr(PrOptions(base, head, out_dir=tmp_path / "out", repo=repo, machine=MACHINE,
                                    charts=False, **kw), run_suite=suite, env={"PATH": os.environ["PATH"]}, **fakes)


def worktrees(repo: Path) -> list[str]:
    return [ln for ln in git(repo, "worktree", "list", "--porcelain").splitlines() if ln.startswith("worktree ")]


def test_regression_is_reported_from_the_commits_own_code(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    suite = FakeSuite()
    res = run(repo, tmp_path, good, bad, suite)
    assert suite.commits() == [bad, good]
    # Both sides ran base's benchmark files (the yardstick), each with its own code.
    assert suite.calls[0].bench_root == suite.calls[1].bench_root == suite.calls[1].source
    assert suite.calls[0].source != suite.calls[1].source
    assert res.exit_code == 1
    reg = res.report.regressions
    assert [(c.benchmark, c.base, c.head) for c in reg] == [(BENCH, 1.0, 0.6)]
    out = tmp_path / "out"
    comment = (out / "comment.md").read_text()
    assert comment.startswith("<!-- vlmpath-bench -->")
    assert "1.00 -> 0.60" in comment and "regression" in comment
    data = json.loads((out / "comparison.json").read_text())
    assert data["base_commit"] == good and data["head_commit"] == bad
    meta = json.loads((out / "run.json").read_text())
    assert meta["base_sha"] == good and meta["head_sha"] == bad and meta["exit_code"] == 1
    assert "exit 1" in (out / "summary.txt").read_text()
    copied = sorted(p.name for p in (out / "results" / MACHINE).iterdir())
    assert copied == sorted(["machine.json", f"{good[:8]}-existing-py_usr_bin_python3.json",
                             f"{bad[:8]}-existing-py_usr_bin_python3.json",
                             f"vlmpath-fingerprint-{good[:8]}.json", f"vlmpath-fingerprint-{bad[:8]}.json"])
    # Temporary worktrees are gone.
    assert len(worktrees(repo)) == 1
    assert not any(Path(c.source).exists() for c in suite.calls)


def test_why_a_case_failed_reaches_the_comment_and_survives_the_merge(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 1.0, "bad", speed=-1.0)
    res = run(repo, tmp_path, good, bad, FakeSuite())
    (c,) = res.report.regressions
    assert (c.benchmark, c.verdict, c.error) == (SPEED, Verdict.NEWLY_FAILING, "RuntimeError: split_with_sizes <-1.0>")
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "failing: " + md_escape("RuntimeError: split_with_sizes <-1.0>") in comment and "<-1.0>" not in comment
    assert (tmp_path / "out" / "results" / MACHINE / f"vlmpath-failures-{bad[:8]}.json").is_file()
    (tmp_path / "out" / "pr-number").write_text("42\n")
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "out").rename(tmp_path / "artifacts" / "bench-cpu")
    merged = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged", head_sha=bad)
    assert [x.error for x in merged.report.regressions] == [c.error]


def test_revert_is_an_improvement_and_exits_zero(repo, tmp_path):
    commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    fixed = commit_value(repo, 1.0, "revert")
    res = run(repo, tmp_path, bad, fixed, FakeSuite())
    assert res.exit_code == 0
    assert [c.verdict for c in res.report.all() if c.benchmark == BENCH] == [Verdict.IMPROVEMENT]


def test_baseline_is_the_merge_base_not_the_base_tip(repo, tmp_path):
    fork = commit_value(repo, 1.0, "fork point")
    git(repo, "checkout", "-q", "-b", "feature")
    head = commit_value(repo, 1.0, "pr change")
    git(repo, "checkout", "-q", "main")
    # main moved on and got worse: against the tip, the PR would look like an improvement.
    tip = commit_value(repo, 0.5, "later on main")
    suite = FakeSuite()
    res = run(repo, tmp_path, "main", "feature", suite)
    assert suite.commits() == [head, fork]
    assert res.base_sha == fork and tip not in suite.commits()
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert meta["base_tip"] == tip and meta["base_sha"] == fork
    assert not res.report.improvements and not res.report.regressions


def test_no_fail_reports_the_regression_but_exits_zero(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    res = run(repo, tmp_path, good, bad, FakeSuite(), fail_on_regression=False)
    assert res.exit_code == 0 and len(res.report.regressions) == 1


def trust(store: Path, sha: str) -> None:
    """Stamp stored results as the main workflow's `vlmpath run --trusted` would."""
    write_run_info(store, MACHINE, sha, RunInfo(quick=False, scale=None, bench=None, trusted=True))


def test_base_results_are_reused_only_when_they_cover_head(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    h1 = commit_value(repo, 1.0, "h1")
    run(repo, tmp_path, good, h1, FakeSuite())
    trust(tmp_path / "store", good)
    h2 = commit_value(repo, 0.6, "h2")
    suite = FakeSuite()
    res = run(repo, tmp_path, good, h2, suite)
    assert suite.commits() == [h2] and res.reused_base
    assert any("reused" in n for n in res.notes)
    assert len(res.report.regressions) == 1  # the reused base still compares
    # --rerun-base measures it again.
    suite = FakeSuite()
    run(repo, tmp_path, good, h2, suite, rerun_base=True)
    assert suite.commits() == [h2, good]


def test_base_results_missing_a_head_benchmark_are_measured_again(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    h1 = commit_value(repo, 1.0, "h1")
    run(repo, tmp_path, good, h1, FakeSuite(benches=(BENCH,)))
    trust(tmp_path / "store", good)
    suite = FakeSuite()  # head now also has SPEED: the stored base lacks it
    run(repo, tmp_path, good, h1, suite)
    assert suite.commits() == [h1, good]


def test_base_results_of_another_machine_are_never_used(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    store = tmp_path / "store"
    write_asv_run(store, "other-box", good, {BENCH: ("fraction", [], [], [0.6], None)})
    suite = FakeSuite()
    res = run(repo, tmp_path, good, bad, suite, results_dir=store)
    assert suite.commits() == [bad, good] and not res.reused_base
    assert res.machines == (MACHINE,) and [m.machine for m in res.report.machines] == [MACHINE]
    assert not (tmp_path / "out" / "results" / "other-box").exists()
    assert len(res.report.regressions) == 1


def test_head_only_results_in_a_merge_are_a_marked_partial_comparison(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    art = make_artifact(tmp_path, repo, "bench-cpu", "cpu-ci", good, bad)
    for f in (art / "results" / "cpu-ci").glob(f"{good[:8]}-*.json"):
        f.unlink()  # the base run of this machine is missing from the artifact
    with pytest.raises(VlmpathError, match=rf"no results for commit {good}"):
        ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged")
    make_artifact(tmp_path, repo, "bench-amd", "rocm-ci", good, bad)
    res = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged")
    status = {m.machine: m.status for m in res.report.machines}
    assert status == {"cpu-ci": "head-only", "rocm-ci": "both"}
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert "partial comparison" in comment.splitlines()[1]
    assert md_escape("cpu-ci: no base results") in comment


def test_combinations_bench_did_not_select_are_left_out_of_the_comment(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    nan = float("nan")
    name = "bench_embed.EmbedRoutine.track_accuracy"

    def suite(req):  # asv records unselected combinations as skipped (NaN)
        acc = float(re.search(r"ACCURACY = (\S+)", (req.source / "src/vlmpath/__init__.py").read_text()).group(1))
        spec = ("fraction", ["pipeline", "preset"], [["default", "legacy"], ["video", "multi_region"]],
                [nan, acc, nan, nan], None)
        write_asv_run(req.results_dir, req.machine, req.commit,
                      {name: spec, "bench_hash.Hash.track_x": ("calls", [], [], [nan], None)})

    res = run(repo, tmp_path, good, bad, suite, bench=r"track_accuracy\('default', 'multi_region'\)")
    rows = [(c.params, c.verdict) for c in res.report.all()]
    assert rows == [((("pipeline", "default"), ("preset", "multi_region")), Verdict.REGRESSION)]
    assert asv_selects(r"\('legacy', 'video'\)", name, (("pipeline", "legacy"), ("preset", "video")))
    # Without --bench nothing is dropped: skipped rows stay visible.
    res = run(repo, tmp_path, good, bad, suite, rerun_base=True)
    assert len(res.report.all()) == 5


def test_same_commit_runs_once_and_reports_no_change(repo, tmp_path):
    c = commit_value(repo, 1.0, "only")
    suite = FakeSuite()
    res = run(repo, tmp_path, c, c, suite)
    assert suite.commits() == [c]
    assert res.exit_code == 0 and not res.report.regressions
    assert all(x.verdict is Verdict.UNCHANGED for x in res.report.all())
    assert any("same commit" in n for n in res.notes)


def test_unknown_commit_is_a_clear_error_and_leaves_nothing_behind(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    suite = FakeSuite()
    with pytest.raises(VlmpathError, match=r"unknown commit 'no-such-branch'.*fetch-depth"):
        run(repo, tmp_path, good, "no-such-branch", suite)
    with pytest.raises(VlmpathError, match=r"unknown commit 'deadbeef'"):
        run(repo, tmp_path, "deadbeef", good, suite)
    with pytest.raises(VlmpathError, match="not a git ref"):
        run(repo, tmp_path, "--output=/tmp/x", good, suite)
    assert suite.calls == [] and len(worktrees(repo)) == 1


def test_missing_base_result_is_an_error_not_a_silent_no_change(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    with pytest.raises(VlmpathError, match=rf"commit {good[:8]} on machine {MACHINE} wrote no"):
        run(repo, tmp_path, good, bad, FakeSuite(skip={good}))
    assert len(worktrees(repo)) == 1
    assert not (tmp_path / "out" / "comment.md").exists()


def test_stale_head_results_do_not_count_as_a_new_run(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    run(repo, tmp_path, good, bad, FakeSuite(), fail_on_regression=False)
    # The head's file is already there from the first run; a runner that writes nothing
    # must not make the flow compare that old file as if it were new.
    with pytest.raises(VlmpathError, match=rf"{bad[:8]}.*wrote no \(new\) results"):
        run(repo, tmp_path, good, bad, FakeSuite(skip={bad}))


def test_corrupted_results_file_is_named(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    # Read by the judge's checked reader (pr.artifact), as ci merge reads it: the file named.
    with pytest.raises(VlmpathError, match=rf"results file .*{bad[:8]}-.*not JSON"):
        run(repo, tmp_path, good, bad, FakeSuite(corrupt={bad}))


def test_runner_crash_still_removes_the_worktrees(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    suite = FakeSuite(fail=True)
    with pytest.raises(RuntimeError, match="runner crashed"):
        run(repo, tmp_path, good, bad, suite)
    assert len(worktrees(repo)) == 1 and not suite.calls[0].source.exists()


def test_commit_without_the_package_is_refused_before_running(repo, tmp_path):
    (repo / "README").write_text("no package here\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "empty")
    empty = git(repo, "rev-parse", "HEAD")
    good = commit_value(repo, 1.0, "good")
    suite = FakeSuite()
    with pytest.raises(VlmpathError, match="would not import the commit under test"):
        run(repo, tmp_path, good, empty, suite)
    assert suite.calls == []


def test_side_env_puts_the_commit_first_and_keeps_the_runner_on_this_package(tmp_path):
    env = pr_side.side_env(tmp_path / "wt", {"ASV_PYTHONPATH": "/image/src", "PYTHONPATH": "/image/src"})
    assert env["ASV_PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "wt" / "src"), "/image/src"]
    import vlmpath

    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(vlmpath.__file__).resolve().parents[1])


def test_cli_writes_error_file_and_exits_2_on_unknown_commit(repo, tmp_path, capsys):
    commit_value(repo, 1.0, "good")
    out = tmp_path / "cli-out"
    code = main(["ci", "pr", "--repo", str(repo), "--base", "main", "--head", "nope", "--machine", MACHINE, "--no-charts",
                 "--out", str(out), "--results-dir", str(tmp_path / "store")])
    assert code == 2
    assert "unknown commit 'nope'" in capsys.readouterr().err
    assert "unknown commit 'nope'" in (out / "error.txt").read_text()


# --- merging the machines' artifacts ---------------------------------------------------


def make_artifact(tmp_path: Path, repo: Path, name: str, machine: str, base: str, head: str,
                  pr: str | None = "42") -> Path:
    res = ci_flow.run_pr(PrOptions(base, head, out_dir=tmp_path / "artifacts" / name, repo=repo, machine=machine,
                                   results_dir=tmp_path / f"store-{machine}", fail_on_regression=False, charts=False),
                         run_suite=FakeSuite(), env={"PATH": os.environ["PATH"]})
    if pr is not None:
        (res.out_dir / "pr-number").write_text(pr + "\n")
    return res.out_dir


def test_merge_makes_one_comparison_over_all_machines(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    make_artifact(tmp_path, repo, "bench-nvidia", "cuda-h200", good, bad)
    make_artifact(tmp_path, repo, "bench-amd", "rocm-mi300x", good, bad)
    make_artifact(tmp_path, repo, "bench-cpu", "cpu-ci", good, bad)
    res = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged", head_sha=bad)
    assert set(res.machines) == {"cuda-h200", "rocm-mi300x", "cpu-ci"}
    assert {c.machine for c in res.report.regressions} == set(res.machines)
    assert res.exit_code == 0  # report only, unless --fail
    assert (tmp_path / "merged" / "pr-number").read_text() == "42\n"
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert comment.count("<!-- vlmpath-bench -->") == 1
    assert all(md_escape(m) in comment for m in res.machines)
    assert ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "m2", fail_on_regression=True).exit_code == 1
    with pytest.raises(VlmpathError, match="workflow run is for"):
        ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "m3", head_sha=good)


def test_merge_reports_a_failed_machine_instead_of_dropping_it(repo, tmp_path):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 1.0, "same")
    make_artifact(tmp_path, repo, "bench-cpu", "cpu-ci", good, bad)
    failed = tmp_path / "artifacts" / "bench-amd"
    failed.mkdir(parents=True)
    pr_outputs.write_error(failed, "vlmpath ci pr: unknown commit 'x'")
    (failed / "pr-number").write_text("42\n")
    crashed = tmp_path / "artifacts" / "bench-nvidia"
    crashed.mkdir()
    (crashed / "pr-number").write_text("42\n")
    res = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged")
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert md_escape("bench-amd: benchmark run failed: vlmpath ci pr: unknown commit 'x'") in comment
    assert md_escape("bench-nvidia: no run.json") in comment
    assert not res.report.regressions


def test_merge_with_no_results_at_all_posts_the_failures(tmp_path):
    failed = tmp_path / "artifacts" / "bench-amd"
    failed.mkdir(parents=True)
    pr_outputs.write_error(failed, "boom <script>")
    (failed / "pr-number").write_text("7\n")
    res = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged")
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert "did not run" in comment and "boom &lt;script&gt;" in comment and "<script>" not in comment
    assert res.report is None and res.exit_code == 0
    assert ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "m2", fail_on_regression=True).exit_code == 1
    (tmp_path / "empty").mkdir()
    with pytest.raises(VlmpathError, match="no benchmark artifacts"):
        ci_merge.merge_artifacts(tmp_path / "empty", tmp_path / "m3")


@pytest.mark.parametrize("attack", ["pr-letters", "pr-disagree", "same-machine", "other-commits",
                                    "symlink", "odd-file", "bad-sha"])
def test_merge_rejects_untrusted_artifact_contents(repo, tmp_path, attack):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    a = make_artifact(tmp_path, repo, "bench-a", "cuda-h200", good, bad)
    other_machine = "cuda-h200" if attack == "same-machine" else "rocm-mi300x"
    b_head = commit_value(repo, 0.5, "other") if attack == "other-commits" else bad
    b = make_artifact(tmp_path, repo, "bench-b", other_machine, good, b_head)
    mdir = b / "results" / other_machine
    if attack == "pr-letters":
        (b / "pr-number").write_text("42; rm -rf /\n")
    elif attack == "pr-disagree":
        (b / "pr-number").write_text("43\n")
    elif attack == "symlink":
        (mdir / "machine.json").unlink()
        (mdir / "machine.json").symlink_to("/etc/passwd")
    elif attack == "odd-file":
        (mdir / "..evil.sh").write_text("echo hi\n")
    elif attack == "bad-sha":
        meta = json.loads((a / "run.json").read_text())
        meta["head_sha"] = "$(curl evil)"
        (a / "run.json").write_text(json.dumps(meta))
    expected = {"pr-letters": "not a pull request number", "pr-disagree": "disagree on the pull request",
                "same-machine": "appears in artifacts", "other-commits": "compared different commits",
                "symlink": "unexpected file", "odd-file": "unexpected file", "bad-sha": "head_sha is not"}
    with pytest.raises(VlmpathError, match=expected[attack]):
        ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged")


def test_cli_merge_prints_the_summary(repo, tmp_path, capsys):
    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    make_artifact(tmp_path, repo, "bench-cpu", "cpu-ci", good, bad)
    assert main(["ci", "merge", str(tmp_path / "artifacts"), "--out", str(tmp_path / "m"), "--fail"]) == 1
    assert "1 regression(s)" in capsys.readouterr().out


@pytest.mark.e2e
def test_module_does_not_import_torch_for_the_comment_workflow():
    # The comment job installs no torch: merging and comparing must not need it.
    code = "import sys, vlmpath.pr.flow, vlmpath.pr.merge, vlmpath.cli; assert 'torch' not in sys.modules"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(Path(ci_flow.__file__).parents[1])})
    assert r.returncode == 0, r.stderr


def test_merge_shows_each_machines_profiles_sanitised_and_a_malformed_file_as_a_note(repo, tmp_path):
    from vlmpath.compare.profile_diff import CaseProfile, OpDelta, profiles_to_json

    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 0.6, "bad")
    nv = make_artifact(tmp_path, repo, "bench-nvidia", "cuda-h200", good, bad)
    amd = make_artifact(tmp_path, repo, "bench-amd", "rocm-mi300x", good, bad)
    prof = CaseProfile("cuda-h200", "embed:default/video", ("bench_embed.EmbedRoutine.track_tok_per_s",),
                       (OpDelta("aten::sort`|<b>", 0, 3, 0.0, 9000.0),), "profiles/x/base.trace.json",
                       "../../etc/passwd")
    (nv / "profiles.json").write_text(profiles_to_json([prof]))
    (amd / "profiles.json").write_text("{ not json")
    ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged", head_sha=bad)
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert "`aten::sort b` | 0 → 3" in comment  # no code-span, table or HTML break-out
    assert "sort`|" not in comment  # the backtick and the pipe did not survive
    assert "(bench-nvidia/profiles/x/base.trace.json)" in comment and "passwd" not in comment
    assert "is malformed" in comment and "bench\\-amd" in comment


@pytest.mark.parametrize("head_speed, band, expected", [(950.0, 0.05, 1), (700.0, 0.5, 0)])
def test_pr_flow_charts_agree_with_the_comment_under_config(repo, tmp_path, head_speed, band, expected):
    # --config whose band disagrees with the packaged one (10% on CPU): the charts get the
    # flow's own report and thresholds, so their marks count what the comment counts.
    from test_inproc_charts import chart_regressions, comment_regressions, manifest

    good = commit_value(repo, 1.0, "good")
    bad = commit_value(repo, 1.0, "bad", speed=head_speed)
    (tmp_path / "t.yaml").write_text(f"factor: {{gpu: {band}, cpu: {band}}}\n")
    res = ci_flow.run_pr(PrOptions(good, bad, out_dir=tmp_path / "out", repo=repo, machine=MACHINE,
                                   results_dir=tmp_path / "store", thresholds=tmp_path / "t.yaml"),
                         run_suite=FakeSuite(), env={"PATH": os.environ["PATH"]}, profile=False)
    out = tmp_path / "out"
    assert len(res.report.regressions) == comment_regressions(out) == expected
    man = manifest(out)
    assert chart_regressions(man, bad) == {"history": expected, "pr": expected}
    assert "t.yaml" in man["thresholds"]


def test_a_malformed_accepted_file_on_head_is_refused_before_any_side_is_measured(repo, tmp_path):
    a = commit_value(repo, 1.0, "a")
    (repo / "benchmarks").mkdir(exist_ok=True)
    (repo / "benchmarks" / "accepted.yaml").write_text("- benchmark: [unclosed\n")
    b = commit_value(repo, 1.0, "b")
    suite = FakeSuite()
    with pytest.raises(VlmpathError, match="accepted.yaml"):
        run(repo, tmp_path, a, b, suite)
    assert suite.calls == []  # seconds, not a measured suite
    assert not worktrees(repo)[1:]  # and nothing left behind


def test_a_well_formed_accepted_file_on_head_is_read_and_both_sides_measured(repo, tmp_path):
    a = commit_value(repo, 1.0, "a")
    (repo / "benchmarks").mkdir(exist_ok=True)
    (repo / "benchmarks" / "accepted.yaml").write_text("[]\n")
    b = commit_value(repo, 1.0, "b")
    suite = FakeSuite()
    res = run(repo, tmp_path, a, b, suite)
    assert res.exit_code == 0 and len(suite.calls) == 2


class RoutineSuite(FakeSuite):
    """A routine case (pipeline and preset parameters, as bench_embed's) whose tok/s is the
    commit's SPEED: a slower head is a regression ``ci pr`` profiles."""

    def __call__(self, req: pr_side.SuiteRequest) -> None:
        self.calls.append(req)
        text = (req.source / "src" / "vlmpath" / "__init__.py").read_text()
        speed = float(re.search(r"SPEED = (\S+)", text).group(1))
        write_asv_run(req.results_dir, req.machine, req.commit,
                      {"bench_embed.EmbedRoutine.track_tok_per_s": ("tok/s", ["pipeline", "preset"],
                                                                    [["default"], ["many_small_images"]],
                                                                    [speed], None)}, fingerprint("cpu"))


def test_a_regressed_routine_case_is_profiled_on_both_sides_into_the_comment(repo, tmp_path):
    a = commit_value(repo, 1.0, "a", speed=1000.0)
    b = commit_value(repo, 1.0, "b", speed=400.0)
    seen = []

    def profiler(req):  # the runner's contract: an ops table per side; head's sorts more
        seen.append((req.side, req.case, req.source))
        calls = 9 if req.side == "head" else 1
        req.ops.write_text(json.dumps({"passes": 1, "ops": [
            {"name": "aten::sort", "calls": calls, "self_cpu_us": 100.0 * calls, "self_device_us": 0.0}]}))
        req.trace.write_text(json.dumps({"traceEvents": [{"name": "aten::sort"}]}))

    res = run(repo, tmp_path, a, b, RoutineSuite(), profiler=profiler)
    assert res.exit_code == 1 and [c.benchmark for c in res.report.regressions] == [
        "bench_embed.EmbedRoutine.track_tok_per_s"]
    assert [s for s, _, _ in seen] == ["base", "head"] and seen[0][2] != seen[1][2]
    assert {c for _, c, _ in seen} == {"embed:default/many_small_images"}
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "aten::sort" in comment  # the profile section joined the comment
    assert (tmp_path / "out" / "profiles.json").is_file()
    assert any(n.startswith("profiled 1 regressed case(s)") for n in res.notes)
