"""Does one artifact get one verdict, whichever flow judges it?

``ci pr`` (vlmpath's own commits), ``ci pr --engine-src`` and ``ci merge`` all hand their
artifacts to one ``pr.judge.judge``: the same rows, verdicts and exit code for the same
artifact, by construction. Before, the engine flow skipped the accepted regressions and
``ci pr`` cut rows by a regex where ``ci merge`` read literal names, so one engine artifact
with an accepted entry was red on the runner and green in the comment.

Checked here for an engine artifact (records, an accepted entry on base, a selection) through
the real ``ci pr --engine-src`` flow (a fake measurer, a real git repository: e2e), and, for
artifacts written as ``ci pr`` writes them (``tests/test_shards_merge.py``,
``tests/test_merge_rounds.py``: a vlmpath-own artifact, a sharded set, an interleaved set),
through ``ci pr``'s own judging step (``judge_own``) against ``ci merge``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_engine_pr import WORKLOADS, FakeMeasure, commit_knobs, repo, run_engine  # noqa: F401  (fixture)
from test_merge_rounds import SLOW, _artifact as rounds_artifact
from test_shards import _owned
from test_shards_merge import BAD, _artifact as shard_artifact, _sharded
from vlmpath.compare.from_records import ENGINE_BENCH
from vlmpath.compare.thresholds import load_thresholds
from vlmpath.core.budget import RunBudget
from vlmpath.pr import merge as ci_merge
from vlmpath.pr.artifact import load_artifacts
from vlmpath.pr.judge import Acceptance, judge_own

ACCEPTED = f"""schema_version: 1
accepted:
  - case: "{ENGINE_BENCH}.track_syncs (workload=*)"
    pr: 7
    reason: the extra syncs are the price of the fix (#7)
"""


def _rows(report) -> list[tuple]:
    return sorted((c.machine, c.benchmark, c.params, c.verdict.value, c.accepted, c.awaiting_review)
                  for c in report.all())


def _own(art: Path, tmp_path: Path, fail: bool = True):
    """``ci pr``'s judging step on its own artifact (what ``run_pr`` calls once it measured)."""
    (a,) = load_artifacts(art, RunBudget()).artifacts
    return judge_own(art, a.manifest, load_thresholds(), Acceptance(pr=5), header=[], fail=fail)


def test_an_engine_artifact_gets_the_same_rows_verdict_and_exit_code_from_ci_pr_and_ci_merge(repo, tmp_path):
    base = commit_knobs(repo, {}, "as released")
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "accepted.yaml").write_text(ACCEPTED)
    commit_knobs(repo, {}, "the base branch accepts the sync")
    base = commit_knobs(repo, {}, "base tip")
    head = commit_knobs(repo, {"multi_region": {"accuracy": 0.5, "syncs": 1},
                               "many_small_images": {"accuracy": 0.5}}, "mistake")
    art = tmp_path / "artifacts" / "bench-cpu-ci"
    pr = run_engine(repo, base, head, out_dir=art, workloads=WORKLOADS, machine="cpu-ci", measure=FakeMeasure(),
                    charts=False, bench="multi_region", pr=7)
    (art / "pr-number").write_text("7\n")
    accepted = tmp_path / "accepted.yaml"
    accepted.write_text(ACCEPTED)
    merged = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged", head_sha=head,
                                      fail_on_regression=True, accepted=accepted, base_accepted=accepted)
    assert _rows(pr.report) == _rows(merged.report)
    assert pr.exit_code == merged.exit_code == 1  # the accuracy drop: not accepted
    verdicts = {c.benchmark.rsplit(".", 1)[1]: c for c in pr.report.all()}
    assert verdicts["track_syncs"].accepted and not verdicts["track_accuracy"].accepted  # the base's entry
    assert {dict(c.params)["workload"] for c in pr.report.all()} == {"multi_region"}  # the selection
    # The unchanged pair stays green through both.
    same = tmp_path / "same" / "bench-cpu-ci"
    a = run_engine(repo, base, base, out_dir=same, workloads=WORKLOADS, machine="cpu-ci", measure=FakeMeasure(),
                   charts=False)
    b = ci_merge.merge_artifacts(tmp_path / "same", tmp_path / "merged-same", fail_on_regression=True)
    assert a.exit_code == b.exit_code == 0 and _rows(a.report) == _rows(b.report)


@pytest.mark.parametrize("regressed, code", [(BAD, 1), (None, 0)])
def test_a_vlmpath_artifact_gets_the_same_verdict_from_ci_pr_and_ci_merge(tmp_path, regressed, code):
    shard_artifact(tmp_path / "arts", "bench-cpu", regressed, None)
    judged, own_code = _own(tmp_path / "arts" / "bench-cpu", tmp_path)
    merged = ci_merge.merge_artifacts(tmp_path / "arts", tmp_path / "merged", fail_on_regression=True)
    assert _rows(judged.report) == _rows(merged.report) and judged.report.all()
    assert own_code == merged.exit_code == code


@pytest.mark.parametrize("regressed, code", [(BAD, 1), (None, 0)])
def test_each_shard_judged_alone_is_its_part_of_the_merged_set(tmp_path, regressed, code):
    root = _sharded(tmp_path / "arts", 3, regressed)
    merged = ci_merge.merge_artifacts(root, tmp_path / "merged", fail_on_regression=True)
    parts, codes = [], []
    for k in (1, 2, 3):
        judged, own_code = _own(root / f"bench-cpu-shard-{k}", tmp_path / str(k))
        parts += _rows(judged.report)
        codes.append(own_code)
        assert judged.report.all()  # each shard judges its own cases, none of the others'
    assert sorted(parts) == _rows(merged.report)
    assert merged.exit_code == max(codes) == code


def test_a_missing_shard_is_named_by_the_merge_while_each_arrived_one_is_whole(tmp_path):
    root = _sharded(tmp_path / "arts", 3, None, drop=2)
    merged = ci_merge.merge_artifacts(root, tmp_path / "merged", fail_on_regression=True)
    assert merged.exit_code == 3  # never green without shard 2
    judged, own_code = _own(root / "bench-cpu-shard-1", tmp_path)
    assert own_code == 0 and not any("shard 2/3" in c.benchmark for c in judged.report.all())


@pytest.mark.parametrize("slower, code", [(1.3, 1), (1.0, 0)])
def test_an_interleaved_artifact_gets_the_same_paired_verdict_from_ci_pr_and_ci_merge(tmp_path, slower, code):
    rounds_artifact(tmp_path / "arts", "bench-cpu", slower=slower)
    judged, own_code = _own(tmp_path / "arts" / "bench-cpu", tmp_path)
    merged = ci_merge.merge_artifacts(tmp_path / "arts", tmp_path / "merged", fail_on_regression=True)
    assert _rows(judged.report) == _rows(merged.report)
    assert own_code == merged.exit_code == code
    row = next(c for c in judged.report.all() if c.params == (("pipeline", SLOW[0]), ("preset", SLOW[1]))
               and c.benchmark.endswith("track_tok_per_s"))
    assert row.significant is not None  # judged on the pairs, not the quick single run's band


def test_an_interleaved_sharded_set_is_judged_on_each_shards_rounds(tmp_path):
    for k, owned in enumerate(_owned(2), start=1):
        rounds_artifact(tmp_path / "arts", f"bench-cpu-shard-{k}", slower=1.3, shard=(k, 2), owned=owned)
    merged = ci_merge.merge_artifacts(tmp_path / "arts", tmp_path / "merged", fail_on_regression=True)
    parts = []
    for k in (1, 2):
        judged, _ = _own(tmp_path / "arts" / f"bench-cpu-shard-{k}", tmp_path / str(k))
        parts += _rows(judged.report)
    assert sorted(parts) == _rows(merged.report) and merged.exit_code == 1
