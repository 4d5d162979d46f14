"""Does ``vlmpath ci pr --engine-src`` measure the right engine commits, judge them by the
usual rules, clean up, and exit 1 exactly when the engine got worse?

The engine here is a fake: a small git repository whose ``python/knobs.json`` holds what
the measured records will say, and an injected measurer that writes CaseRecords from
the ``knobs.json`` of the checkout it was handed. A wrong checkout, a wrong baseline or a
stale records file therefore shows up as a wrong verdict. The real engine (sglang built
from a released wheel) is ``tests/test_engine_pr_sglang.py``. The record-to-metric
converter is tested without git at the top.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from vlmpath.pr import engine as engine_pr
from vlmpath.pr.options import PrOptions
from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_records import ENGINE_BENCH, engines_of, run_from_records
from vlmpath.compare.thresholds import load_thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError
from vlmpath.suite.record import CaseRecord, dumps_record, loads_record, read_records, write_records

WORKLOADS = ("multi_region", "many_small_images")


def run_engine(repo, base, head, *, measure, subdir=None, **kw):
    """``ci pr --engine-src repo`` as the CLI calls it: one options record, the measurer injected."""
    return engine_pr.run_engine_pr(PrOptions(base, head, engine_src=repo, engine_subdir=subdir, **kw),
                                   measure=measure)


def raw(workload: str, **kw) -> dict:
    """A record as its JSON line holds it (what the measuring job writes)."""
    r = {"workload": workload, "scale": "tiny", "pipeline": {"encode": "engine"}, "tok_per_s": 1000.0,
         "accuracy": 1.0, "syncs": 0, "encoder_syncs": 2, "encoder_calls": 1, "error": None,
         "samples": [0.01, 0.011, 0.012], "prefill_tokens": 10, "peak_bytes": 4096, "reserved_bytes": 8192,
         "engine": "sglang", "engine_version": "0.5.23"}
    r.update(kw)
    return r


def record(workload: str, **kw) -> CaseRecord:
    return loads_record(raw(workload, **kw))


def verdicts(base: list[CaseRecord], head: list[CaseRecord]) -> dict[tuple[str, str], Verdict]:
    rep = compare(run_from_records(base, machine="m", commit="a" * 40),
                  run_from_records(head, machine="m", commit="b" * 40), load_thresholds())
    return {(c.benchmark.rsplit(".", 1)[1], dict(c.params)["workload"]): c.verdict for c in rep.all()}


# --- the converter (no git) -------------------------------------------------------------


def test_records_give_one_metric_per_number_with_the_units_of_the_thresholds():
    run = run_from_records([record("multi_region")], machine="m", commit="a" * 40)
    got = {m.benchmark: (m.unit, m.value, m.params) for m in run.metrics()}
    assert got[f"{ENGINE_BENCH}.track_accuracy"] == ("fraction", 1.0, (("workload", "multi_region"),))
    assert got[f"{ENGINE_BENCH}.track_encoder_syncs"][:2] == ("syncs", 2.0)
    assert got[f"{ENGINE_BENCH}.track_encoder_calls"][:2] == ("calls", 1.0)
    tok = next(m for m in run.metrics() if m.unit == "tok/s")
    assert tok.samples == pytest.approx((1000.0, 10 / 0.011, 10 / 0.012))
    assert engines_of([record("multi_region")]) == ["sglang 0.5.23"]
    assert not run.machines[0].notes  # a note would mark the comparison partial


def test_an_accuracy_drop_and_a_new_sync_are_regressions_and_the_rest_unchanged():
    base = [record(w) for w in WORKLOADS]
    head = [record("multi_region", accuracy=0.5, syncs=1), record("many_small_images")]
    v = verdicts(base, head)
    assert v[("track_accuracy", "multi_region")] is Verdict.REGRESSION
    assert v[("track_syncs", "multi_region")] is Verdict.REGRESSION
    assert v[("track_accuracy", "many_small_images")] is Verdict.UNCHANGED
    assert v[("track_tok_per_s", "multi_region")] is Verdict.UNCHANGED


def test_identical_records_are_all_unchanged_and_fewer_calls_is_an_improvement():
    base = [record(w) for w in WORKLOADS]
    assert set(verdicts(base, base).values()) == {Verdict.UNCHANGED}
    v = verdicts([record("multi_region", encoder_calls=3)], [record("multi_region", encoder_calls=1)])
    assert v[("track_encoder_calls", "multi_region")] is Verdict.IMPROVEMENT


def test_a_failed_case_is_one_newly_failing_row_with_the_engines_message():
    head = [record("multi_region", tok_per_s=None, accuracy=0.0, error="RuntimeError: split_with_sizes")]
    run = run_from_records(head, machine="m", commit="b" * 40)
    assert any(m.benchmark.endswith("track_accuracy") and m.value == 0.0 for m in run.metrics())  # still recorded
    rep = compare(run_from_records([record("multi_region")], machine="m", commit="a" * 40), run, load_thresholds())
    (c,) = rep.all()  # the case, once: its accuracy and counters are not compared one by one
    assert c.verdict is Verdict.NEWLY_FAILING and "split_with_sizes" in c.error and c.left_out >= 1
    assert rep.exit_code() == 1 and not rep.improvements


def test_uncounted_syncs_are_no_row_not_a_failure_or_a_zero():
    run = run_from_records([record("multi_region", syncs=None)], machine="m", commit="a" * 40)
    names = {m.benchmark.rsplit(".", 1)[1] for m in run.metrics()}
    assert "track_syncs" not in names and "track_accuracy" in names
    assert all(m.error is None for m in run.metrics())


@pytest.mark.parametrize("bad, words", [
    ([], "no records"),
    ([{"tok_per_s": 1.0}], "not a CaseRecord"),
    ([raw("multi_region", accuracy="high")], "not a number"),
    ([raw("multi_region", accuracy=True)], "not a number"),
    ([raw("multi_region", samples=[0.1, "x"])], "not a list of numbers"),
    ([{**raw("multi_region"), "workload": 7}], "not a CaseRecord"),
    ([raw("multi_region", schema_version=2)], "schema_version 2"),
    ([raw("multi_region"), raw("multi_region")], "appears twice"),
])
def test_bad_records_are_one_clear_error(bad, words):
    with pytest.raises(VlmpathError, match=words):
        run_from_records([loads_record(d, "r") for d in bad], machine="m", commit="a" * 40)


def test_a_record_crosses_a_file_unchanged_and_a_missing_number_is_not_a_zero(tmp_path):
    rec = record("multi_region", peak_bytes=2048, sync_events={"Tensor.item": 2})
    assert loads_record(dumps_record(rec)) == rec
    write_records(tmp_path / "r.jsonl", [rec, record("mixed")])
    assert read_records(tmp_path / "r.jsonl") == [rec, record("mixed")]
    old = loads_record({"workload": "mixed", "tok_per_s": 5.0})  # an older writer: no counters
    assert old.encoder_calls is None and old.syncs is None and old.samples == ()
    assert loads_record({**raw("mixed"), "from_a_newer_writer": 1}) == record("mixed")


# --- the flow against a fake engine repository ------------------------------------------


def git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                        "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def commit_knobs(repo: Path, knobs: dict, msg: str, subdir: str = "python") -> str:
    d = repo / subdir if subdir else repo
    d.mkdir(parents=True, exist_ok=True)
    (d / "knobs.json").write_text(json.dumps(knobs, indent=1) + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "engine"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    return r


class FakeMeasure:
    """Writes one record per workload from the checkout's knobs.json; remembers what it saw."""

    def __init__(self, fail_on: str | None = None):
        self.seen: list[tuple[str, Path]] = []
        self.fail_on = fail_on

    def __call__(self, side: engine_pr.EngineSide) -> None:
        self.seen.append((side.commit, side.source))
        if self.fail_on and side.commit.startswith(self.fail_on):
            raise VlmpathError("measuring exploded")
        knobs = json.loads((side.source / "knobs.json").read_text())
        write_records(side.json_path, [record(w, **knobs.get(w, {})) for w in side.workloads])


def worktrees(repo: Path) -> list[str]:
    return [ln for ln in git(repo, "worktree", "list", "--porcelain").splitlines() if ln.startswith("worktree ")]


def test_mistake_commit_exits_1_and_names_the_accuracy_drop(repo, tmp_path):
    base = commit_knobs(repo, {}, "as released")
    head = commit_knobs(repo, {"multi_region": {"accuracy": 0.25}}, "split by span counts")
    fake = FakeMeasure()
    res = run_engine(repo, base, head, out_dir=tmp_path / "out", workloads=WORKLOADS,
                                  machine="cpu-test", measure=fake, charts=False)
    assert res.exit_code == 1
    assert [(c, s) for c, s in fake.seen] == [(head, s) for c, s in fake.seen[:1]] + [(base, fake.seen[1][1])]
    assert all(s.name == "python" for _, s in fake.seen)
    comment = (tmp_path / "out" / "comment.md").read_text()
    first = comment.splitlines()[1].replace("\\", "")  # markdown escapes
    assert first.startswith("**1 regression") and "accuracy multi_region fraction 1.00 -> 0.25" in first
    assert "partial" not in first
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (run["kind"], run["base_sha"], run["head_sha"], run["exit_code"]) == ("engine", base, head, 1)
    assert (tmp_path / "out" / "records" / "head.jsonl").is_file()
    assert len(worktrees(repo)) == 1  # only the repository itself: the side worktrees are gone


def test_identical_commit_exits_0(repo, tmp_path):
    base = commit_knobs(repo, {}, "as released")
    (repo / "python" / "knobs.json").write_text((repo / "python" / "knobs.json").read_text() + "\n")
    head = commit_knobs(repo, {}, "whitespace only")
    res = run_engine(repo, base, head, out_dir=tmp_path / "out", workloads=WORKLOADS,
                                  machine="cpu-test", measure=FakeMeasure(), charts=False)
    assert res.exit_code == 0
    lines = (tmp_path / "out" / "comment.md").read_text().splitlines()
    assert lines[1].startswith("**No regressions**")
    # The yardstick is vlmpath's own, never the engine PR's: said under the verdict.
    assert any("never the engine pull request" in ln.replace("\\", "") for ln in lines[:6])


def test_baseline_is_the_merge_base_not_the_moved_base_tip(repo, tmp_path):
    fork = commit_knobs(repo, {}, "fork point")
    git(repo, "checkout", "-q", "-b", "pr")
    head = commit_knobs(repo, {}, "pr: no change")
    git(repo, "checkout", "-q", "main")
    commit_knobs(repo, {"multi_region": {"accuracy": 0.0}}, "base moved on (broken)")
    fake = FakeMeasure()
    res = run_engine(repo, "main", "pr", out_dir=tmp_path / "out", workloads=WORKLOADS,
                                  machine="cpu-test", measure=fake, charts=False)
    assert res.base_sha == fork and res.exit_code == 0
    assert [c for c, _ in fake.seen] == [head, fork]


def test_worktrees_are_removed_when_measuring_fails(repo, tmp_path):
    base = commit_knobs(repo, {}, "a")
    head = commit_knobs(repo, {"multi_region": {"syncs": 3}}, "b")
    with pytest.raises(VlmpathError, match="exploded"):
        run_engine(repo, base, head, out_dir=tmp_path / "out", workloads=WORKLOADS,
                                machine="cpu-test", measure=FakeMeasure(fail_on=base[:8]), charts=False)
    assert len(worktrees(repo)) == 1


def test_subdir_default_is_the_root_without_python_and_a_missing_subdir_is_named(repo, tmp_path):
    base = commit_knobs(repo, {}, "a", subdir="")
    head = commit_knobs(repo, {}, "b", subdir="")
    fake = FakeMeasure()
    run_engine(repo, base, head, out_dir=tmp_path / "out", workloads=WORKLOADS,
                            machine="cpu-test", measure=fake, charts=False)
    assert all(s.name in ("head", "base") for _, s in fake.seen)
    with pytest.raises(VlmpathError, match="--engine-subdir"):
        run_engine(repo, base, head, out_dir=tmp_path / "out2", subdir="pkg",
                                workloads=WORKLOADS, machine="cpu-test", measure=fake, charts=False)
    with pytest.raises(VlmpathError, match="relative path"):
        run_engine(repo, base, head, out_dir=tmp_path / "out3", subdir="../x",
                                workloads=WORKLOADS, machine="cpu-test", measure=fake, charts=False)


def test_a_side_that_writes_no_records_is_an_error_naming_the_commit(repo, tmp_path):
    base = commit_knobs(repo, {}, "a")
    head = commit_knobs(repo, {}, "b")
    with pytest.raises(VlmpathError, match=f"engine commit {head[:8]} wrote no records"):
        run_engine(repo, base, head, out_dir=tmp_path / "out", workloads=WORKLOADS,
                                machine="cpu-test", measure=lambda side: None, charts=False)


def test_cli_runs_the_engine_flow_draws_the_chart_and_exits_1(repo, tmp_path, monkeypatch, capsys):
    base = commit_knobs(repo, {}, "as released")
    head = commit_knobs(repo, {"multi_region": {"accuracy": 0.5}}, "mistake")
    monkeypatch.setattr(engine_pr, "measure_engine", FakeMeasure())
    out = tmp_path / "out"
    code = main(["ci", "pr", "--engine-src", str(repo), "--base", base, "--head", head, "--out", str(out),
                 "--machine", "cpu-test", "--workload", "multi_region", "--repeat", "1"])
    assert code == 1
    assert "accuracy multi_region" in capsys.readouterr().out.replace("\\", "")
    assert (out / "report" / "charts" / "pr.png").stat().st_size > 0
    assert json.loads((out / "comparison.json").read_text())["machines"]
    bad = main(["ci", "pr", "--engine-src", str(repo), "--base", "nope", "--head", head, "--out", str(out)])
    assert bad == 2 and "unknown commit 'nope'" in (out / "error.txt").read_text()


def test_comment_workflow_merges_engine_artifacts_of_several_machines(repo, tmp_path):
    from vlmpath.pr import merge as ci_merge

    base = commit_knobs(repo, {}, "as released")
    head = commit_knobs(repo, {"multi_region": {"accuracy": 0.5}}, "mistake")
    for machine in ("cpu-ci", "cuda-ci"):
        art = tmp_path / "artifacts" / f"bench-{machine}"
        run_engine(repo, base, head, out_dir=art, workloads=WORKLOADS, machine=machine,
                                measure=FakeMeasure(), charts=False)
        (art / "pr-number").write_text("7\n")
        (art / "comment.md").write_text("tampered: never posted\n")
    res = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged", head_sha=head,
                                   fail_on_regression=True)
    assert res.exit_code == 1 and set(res.machines) == {"cpu-ci", "cuda-ci"}
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert "tampered" not in comment
    assert comment.splitlines()[1].replace("\\", "").startswith("**2 regressions on cpu-ci, cuda-ci**")
    assert comment.count("never the engine pull request") == 1  # each machine's note, said once
    assert (tmp_path / "merged" / "pr-number").read_text() == "7\n"

    (tmp_path / "artifacts" / "bench-cuda-ci" / "records" / "head.jsonl").write_text("{not json\n")
    with pytest.raises(VlmpathError, match="bench-cuda-ci.*not JSON"):
        ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged2")


def test_same_commit_on_both_sides_leaves_both_record_files(repo, tmp_path):
    sha = commit_knobs(repo, {}, "only")
    res = run_engine(repo, sha, sha, out_dir=tmp_path / "out", workloads=WORKLOADS,
                                  machine="cpu-test", measure=FakeMeasure(), charts=False)
    assert res.exit_code == 0 and "compared with itself" in res.notes[0]
    assert (tmp_path / "out" / "records" / "base.jsonl").read_text() == (tmp_path / "out" / "records" / "head.jsonl").read_text()
