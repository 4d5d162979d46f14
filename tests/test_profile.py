"""Profiler traces for what regressed: the pure diff and its rendering (fast), and on CPU a
planted slowdown (an extra ``torch.sort`` in the injector) that the comparison calls a
regression and whose comment names ``aten::sort`` among the top self-time deltas, with a
Chrome trace per side that loads as JSON."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from test_memory import plant_injector

from vlmpath.compare.comparison import Comparison, ComparisonReport, MachineComparison, Verdict
from vlmpath.compare.profile_diff import CaseProfile, OpTotals, diff_ops, read_ops
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.errors import VlmpathError
from vlmpath.render.profile_section import HEADING, render_profiles

CASE = "embed:default/many_small_images"
TOK = "bench_embed.EmbedRoutine.track_tok_per_s"
PARAMS = (("pipeline", "default"), ("preset", "many_small_images"))


def _row(bench, unit, verdict=Verdict.REGRESSION, params=PARAMS):
    return Comparison("cpu-x", bench, params, unit, 100.0, 40.0, verdict)


def test_diff_ranks_by_self_time_growth_and_counts_one_sided_ops():
    base = {"aten::mm": OpTotals("aten::mm", 10, 500.0), "aten::add": OpTotals("aten::add", 4, 90.0)}
    head = {"aten::mm": OpTotals("aten::mm", 10, 520.0), "aten::add": OpTotals("aten::add", 4, 10.0),
            "aten::sort": OpTotals("aten::sort", 3, 9000.0)}
    d = diff_ops(base, head, top=2)
    assert [x.name for x in d] == ["aten::sort", "aten::mm"]
    assert (d[0].base_calls, d[0].head_calls, d[0].base_us, d[0].delta_us) == (0.0, 3, 0.0, 9000.0)


def test_section_names_operators_calls_times_and_links_both_traces():
    deltas = diff_ops({}, {"aten::sort": OpTotals("aten::sort", 3, 9000.0)})
    md = render_profiles([CaseProfile("cpu-x", CASE, (TOK,), deltas, "profiles/a/base.trace.json",
                                      "profiles/a/head.trace.json")])
    assert HEADING in md and "`aten::sort` | 0 → 3 | 0.000 | 9.000 | +9.000" in md
    assert "(profiles/a/base.trace.json)" in md and "(profiles/a/head.trace.json)" in md
    assert render_profiles([]) == ""


def test_only_regressed_routine_cases_with_banded_units_are_profiled():
    from vlmpath.pr.profile import regressed_cases

    rows = (_row(TOK, "tok/s"), _row("bench_embed.EmbedRoutine.track_peak_bytes", "bytes"),
            _row("bench_embed.EmbedRoutine.track_accuracy", "fraction"),  # exact: not a profile's question
            _row("bench_hash.Hash.time_x", "seconds", params=(("size", "1"),)),  # not a routine case
            _row("bench_encode.EncodeMetrics.track_tok_per_s", "tok/s", Verdict.UNCHANGED,
                 (("strategy", "batched"), ("preset", "video"))))
    rep = ComparisonReport("b" * 40, "h" * 40, (MachineComparison("cpu-x", "both", rows),))
    got = regressed_cases(rep, Thresholds.default())
    assert got == {CASE: ("cpu-x", [TOK, "bench_embed.EmbedRoutine.track_peak_bytes"])}


def test_unreadable_ops_table_is_one_clear_error(tmp_path):
    bad = tmp_path / "x.ops.json"
    bad.write_text("{ nope")
    with pytest.raises(VlmpathError, match="re-run the profile"):
        read_ops(bad)


def _sorting(dest):
    # the planted slowdown: a large sort per injection (an extra operator in the routine)
    return torch.sort(torch.rand(1_500_000, generator=torch.Generator().manual_seed(0)))


@pytest.fixture
def git_repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "base"],
                 ["commit", "-q", "--allow-empty", "-m", "head"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True)
    shas = subprocess.run(["git", "rev-list", "HEAD"], cwd=repo, check=True, capture_output=True, text=True)
    head, base = shas.stdout.split()
    return repo, base, head


def test_planted_slowdown_is_a_regression_whose_comment_names_the_operator(git_repo, tmp_path, monkeypatch):
    from vlmpath.pr.profile import profile_regressions
    from vlmpath.compare.records import MachineRun, Metric, RunResults
    from vlmpath.compare.verdict import compare
    from vlmpath.suite.cases import RoutineCase
    from vlmpath.suite.measure import Session
    from vlmpath.suite.profile import profile_case, write_ops

    repo, base_sha, head_sha = git_repo
    session = Session("cpu")
    case = RoutineCase("embed", "default", "many_small_images")

    def run(commit, tok):
        metric = Metric("cpu-x", TOK, PARAMS, "tok/s", tok, commit=commit)
        return RunResults(commit, (MachineRun("cpu-x", commit, (metric,)),))

    # The regression itself is given (halved tok/s): whether a timing crosses a band is the
    # comparison's business and its tests' (timing never decides a unit test here); this
    # test is about what the profile of a regressed case shows.
    report = compare(run(base_sha, 1000.0), run(head_sha, 500.0))
    assert [c.verdict for c in report.all()] == [Verdict.REGRESSION]

    def in_process(req):  # the runner's contract, in this process: head carries the plant
        with monkeypatch.context() as m:
            if req.side == "head":
                plant_injector(m, _sorting)
            rows = profile_case(case, trace_path=str(req.trace), passes=1, session=session)
        write_ops(str(req.ops), req.case, rows, 1)

    out = tmp_path / "out"
    profiles = profile_regressions(repo, report, out, cfg=Thresholds.default(),
                                   runner=in_process)
    (p,) = profiles
    assert p.case == CASE and p.note is None
    assert "aten::sort" in [d.name for d in p.deltas[:3]]
    md = render_profiles(profiles)
    assert "`aten::sort`" in md
    for trace in (p.base_trace, p.head_trace):
        data = json.loads((out / trace).read_text(encoding="utf-8"))
        assert data["traceEvents"]
    sort = next(d for d in p.deltas if d.name == "aten::sort")
    assert sort.head_calls > sort.base_calls and sort.delta_us > 0  # one more sort per injection


def test_profile_command_rejects_bad_input_with_one_clear_error(capsys):
    from vlmpath.cli import main

    assert main(["profile", "many_small_images"]) == 2
    assert "PATH:VARIANT/PRESET" in capsys.readouterr().err
    assert main(["profile", CASE, "--engine", "vllm"]) == 2
    assert "engine" in capsys.readouterr().err
    assert main(["profile", "encode:nosuch/video"]) == 2


@pytest.mark.e2e
def test_pr_profiles_each_side_in_its_own_worktree_through_the_script(tmp_path):
    """The real runner: a repository whose head adds a sort to the default injector; each
    side's src/ is imported by suite/profile.py run as a script in a fresh interpreter."""
    import os
    import shutil

    from vlmpath.pr.profile import profile_regressions

    src = Path(__file__).resolve().parents[1] / "src"
    repo = tmp_path / "repo"
    shutil.copytree(src, repo / "src", ignore=shutil.ignore_patterns("__pycache__"))

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    base_sha = git("rev-parse", "HEAD")
    inject = repo / "src/vlmpath/paths/inject.py"
    text = inject.read_text()
    planted = text.replace("    dest.masked_scatter_(mask.expand_as(dest), rows.to(dest.dtype))",
                           "    torch.sort(torch.rand(1_500_000))  # planted slowdown\n"
                           "    dest.masked_scatter_(mask.expand_as(dest), rows.to(dest.dtype))")
    assert planted != text
    inject.write_text(planted)
    git("commit", "-q", "-am", "head: sort in the injector")
    head_sha = git("rev-parse", "HEAD")

    rep = ComparisonReport(base_sha, head_sha, (MachineComparison("cpu-x", "both", (_row(TOK, "tok/s"),)),))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLMPATH_", "PYTHONPATH"))}
    env["OMP_NUM_THREADS"] = "1"
    (p,) = profile_regressions(repo, rep, tmp_path / "out", cfg=Thresholds.default(), env=env)
    assert p.note is None, p.note
    assert "aten::sort" in [d.name for d in p.deltas[:3]]
    for trace in (p.base_trace, p.head_trace):
        assert json.loads((tmp_path / "out" / trace).read_text(encoding="utf-8"))["traceEvents"]
