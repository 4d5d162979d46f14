"""``ci merge`` of shard artifacts: one machine's shards become one comparison with the
verdict of the unsharded run; a missing shard is named and never green; overlaps refused.

Artifacts are written as ``ci pr`` writes them (run.json + results/ in asv's format,
tests/asv_fixtures.py); the merge is the real ``merge_artifacts``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asv_fixtures import sha, write_asv_run
from test_shards import MACHINE, _owned, _spec, _values
from vlmpath.compare.comparison import EXIT_INCOMPLETE
from vlmpath.core.errors import VlmpathError
from vlmpath.pr import merge as ci_merge
from vlmpath.pr.artifact import RUN_SCHEMA_VERSION
from vlmpath.runner.shards import unit_of

BASE, HEAD = sha("shard-base"), sha("shard-head")
BAD = ("legacy", "mixed")


def _artifact(root: Path, name: str, regressed, shard: tuple[int, int] | None, owned=None, measured=None) -> None:
    """``measured``: the owned cases that have values (default all; the rest failed, None)."""
    art = root / name
    for c in (BASE, HEAD):
        write_asv_run(art / "results", MACHINE, c, _spec(*_values(regressed if c == HEAD else None),
                                                         present=owned if measured is None else measured))
    entry = None
    if shard is not None:
        entry = {"k": shard[0], "n": shard[1], "costs_from": None,
                 "units": sorted(unit_of("bench_embed.EmbedRoutine.x", (repr(p), repr(w))).label for p, w in owned)}
    (art / "run.json").write_text(json.dumps({
        "schema_version": RUN_SCHEMA_VERSION, "base_sha": BASE, "head_sha": HEAD, "machine": MACHINE,
        "bench": None, "shard": entry, "notes": []}))
    (art / "pr-number").write_text("5\n")


def _sharded(root: Path, n: int, regressed=None, drop: int | None = None) -> Path:
    for k, owned in enumerate(_owned(n), start=1):
        if k != drop:
            _artifact(root, f"bench-cpu-shard-{k}", regressed, (k, n), owned)
    return root


def _rows(res):
    return sorted((c.benchmark, c.params, c.verdict.value) for c in res.report.all())


def test_three_shards_give_the_unsharded_verdict_on_a_planted_regression_and_on_an_unchanged_pair(tmp_path):
    for regressed, want in ((BAD, 1), (None, 0)):
        tag = "bad" if regressed else "aa"
        _artifact(tmp_path / f"one-{tag}", "bench-cpu", regressed, None)
        whole = ci_merge.merge_artifacts(tmp_path / f"one-{tag}", tmp_path / f"m1-{tag}", fail_on_regression=True)
        shards = ci_merge.merge_artifacts(_sharded(tmp_path / f"three-{tag}", 3, regressed),
                                          tmp_path / f"m3-{tag}", fail_on_regression=True)
        assert _rows(shards) == _rows(whole) and len(_rows(shards)) == 24
        assert shards.exit_code == whole.exit_code == want
        assert [dict(c.params) for c in shards.report.regressions] == (
            [{"pipeline": "legacy", "preset": "mixed"}] if regressed else [])
        # the merged results are one asv file per commit, not three
        assert len(list((tmp_path / f"m3-{tag}" / "results" / MACHINE).glob("*-existing-*.json"))) == 2


def test_a_missing_shard_is_not_judged_and_never_green(tmp_path):
    res = ci_merge.merge_artifacts(_sharded(tmp_path / "arts", 3, drop=2), tmp_path / "m", fail_on_regression=True)
    assert res.exit_code == EXIT_INCOMPLETE
    missing = [c for c in res.report.not_judged if c.benchmark == "(shard 2/3)"]
    assert missing and "shard 2/3 of cpu-ci is missing" in missing[0].reason
    summary = (tmp_path / "m" / "summary.txt").read_text()
    assert "incomplete (missing cpu-ci: shard 2/3): exit 3" in summary
    assert "shard 2/3" in (tmp_path / "m" / "comment.md").read_text()


def test_a_missing_shards_cases_read_as_not_judged_for_that_reason_not_as_failing(tmp_path):
    arts = _sharded(tmp_path / "arts", 3, drop=2)
    # Shard 1 arrived with one of its own cases failing on both sides: that one stays failing.
    own1 = _owned(3)[0]
    failed = sorted(own1)[0]
    _artifact(arts, "bench-cpu-shard-1", None, (1, 3), own1, measured=own1 - {failed})
    res = ci_merge.merge_artifacts(arts, tmp_path / "m", fail_on_regression=True)
    assert res.exit_code == EXIT_INCOMPLETE
    rows = {tuple(v for _, v in c.params): c for c in res.report.not_judged if c.params}
    gone = {c for c, row in rows.items() if "its shard is missing (shard 2/3 of cpu-ci" in row.reason}
    assert gone == _owned(3)[1]  # every case of the missing shard, and only those
    assert all("failing" not in rows[c].reason for c in gone)
    assert "failing on base and head" in rows[failed].reason  # a real failure is still said
    assert set(rows) == gone | {failed}
    comment = (tmp_path / "m" / "comment.md").read_text()
    assert "its shard is missing" in comment


def test_overlapping_or_mixed_shards_are_refused(tmp_path):
    arts = _sharded(tmp_path / "arts", 2)
    run = arts / "bench-cpu-shard-2" / "run.json"
    data = json.loads(run.read_text())
    first = json.loads((arts / "bench-cpu-shard-1" / "run.json").read_text())
    data["shard"]["units"].append(first["shard"]["units"][0])
    run.write_text(json.dumps(data))
    with pytest.raises(VlmpathError, match="both own"):
        ci_merge.merge_artifacts(arts, tmp_path / "m")
    mixed = _sharded(tmp_path / "mixed", 2)
    _artifact(mixed, "bench-cpu-whole", None, None)
    with pytest.raises(VlmpathError, match="as a shard and as a whole run"):
        ci_merge.merge_artifacts(mixed, tmp_path / "m2")
