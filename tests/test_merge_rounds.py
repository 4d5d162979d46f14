"""``ci merge`` judges an interleaved artifact's timings on its paired rounds, as its
``ci pr --interleave N`` did (``pr.merge_rounds``), not on the single run's band (which a
quick run makes indicative); a round for another sha is named and not judged, never green.

Artifacts are written as ``ci pr`` writes them (run.json, results/ and rounds/NN/{base,head}
in asv's format, tests/asv_fixtures.py); the merge is the real ``merge_artifacts``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from asv_fixtures import sha, write_asv_run
from test_shards import MACHINE, _owned, _spec, _values
from test_shards_merge import BASE, HEAD
from vlmpath.compare.comparison import EXIT_INCOMPLETE, Verdict
from vlmpath.pr import merge as ci_merge
from vlmpath.pr.artifact import RUN_SCHEMA_VERSION

TOK = "bench_embed.EmbedRoutine.track_tok_per_s"
SLOW = ("legacy", "mixed")  # the case planted slower on head


def _tok(i: int, head: bool, slower: float, owned=None):
    acc, tok = _values()
    # Each round drifts (both sides alike): only the pairing sees head's shift through it.
    tok = {c: v * (1 + 0.03 * (i % 3)) / (slower if head and c == SLOW else 1.0) for c, v in tok.items()}
    return _spec(acc, tok, present=owned)


def _artifact(root: Path, name: str, *, slower: float = 1.0, rounds: int | None = 6, round_sha: str | None = None,
              shard: tuple[int, int] | None = None, owned=None, round_cases=None, round_slower=None) -> Path:
    art = root / name
    for c, head in ((BASE, False), (HEAD, True)):
        write_asv_run(art / "results", MACHINE, c, _tok(0, head, slower, owned))
    for i in range(rounds or 0):
        for side, c, head in (("base", BASE, False), ("head", round_sha or HEAD, True)):
            write_asv_run(art / "rounds" / f"{i:02d}" / side, MACHINE, c,
                          _tok(i, head, slower if round_slower is None else round_slower, round_cases or owned))
    entry = None
    if shard is not None:
        from vlmpath.runner.shards import unit_of
        entry = {"k": shard[0], "n": shard[1], "costs_from": None,
                 "units": sorted(unit_of("bench_embed.EmbedRoutine.x", (repr(p), repr(w))).label for p, w in owned)}
    (art / "run.json").write_text(json.dumps({
        "schema_version": RUN_SCHEMA_VERSION, "base_sha": BASE, "head_sha": HEAD, "machine": MACHINE,
        "quick": True, "interleave": rounds, "shard": entry, "notes": []}))
    # The artifact's own verdict is PR-written: a lie here must change nothing.
    (art / "comparison.json").write_text(json.dumps({"machines": [], "notes": ["all green"]}))
    return root


def _tok_row(res, case=SLOW):
    want = (("pipeline", case[0]), ("preset", case[1]))
    return next(c for c in res.report.all() if c.benchmark == TOK and c.params == want)


def test_a_paired_slowdown_in_the_rounds_is_red_where_the_single_run_was_indicative(tmp_path):
    old = ci_merge.merge_artifacts(_artifact(tmp_path / "old", "bench-cpu", slower=1.3, rounds=None),
                                   tmp_path / "m0", fail_on_regression=True)
    assert old.exit_code == 0 and not old.report.regressions  # before: the quick run's band, indicative
    assert _tok_row(old).method == "threshold" and _tok_row(old).indicative
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a", "bench-cpu", slower=1.3), tmp_path / "m",
                                   fail_on_regression=True)
    row = _tok_row(res)
    assert res.exit_code == 1 and row.verdict is Verdict.REGRESSION and row.method == "paired"
    assert not row.indicative and "6 interleaved rounds" in row.reason
    assert [r.params for r in res.report.regressions] == [row.params]  # only the planted case
    assert "paired" in json.dumps(json.loads((tmp_path / "m" / "comparison.json").read_text()))


def test_an_unchanged_pair_of_rounds_is_green_and_judged_on_pairs(tmp_path):
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a", "bench-cpu"), tmp_path / "m", fail_on_regression=True)
    toks = [c for c in res.report.all() if c.benchmark == TOK]
    assert res.exit_code == 0 and not res.report.regressions and not res.report.not_judged
    assert toks and {c.method for c in toks} == {"paired"} and {c.verdict for c in toks} == {Verdict.UNCHANGED}


def test_rounds_for_another_sha_are_named_and_the_timings_not_judged(tmp_path):
    arts = _artifact(tmp_path / "a", "bench-cpu", round_sha=sha("someone-else"))
    res = ci_merge.merge_artifacts(arts, tmp_path / "m", fail_on_regression=True)
    toks = [c for c in res.report.all() if c.benchmark == TOK]
    assert res.exit_code == EXIT_INCOMPLETE  # never green
    assert toks and {c.verdict for c in toks} == {Verdict.NOT_COMPARABLE} and "paired" not in {c.method for c in toks}
    assert any("rounds/00/head has no results" in n for n in res.notes), res.notes
    # the exact rows are still judged
    assert {c.verdict for c in res.report.all() if c.unit == "fraction"} == {Verdict.UNCHANGED}
    missing = ci_merge.merge_artifacts(_artifact(tmp_path / "b", "bench-cpu"), tmp_path / "m2")
    assert missing.exit_code == 0  # (control: the same artifact with its rounds)
    shutil.rmtree(tmp_path / "b" / "bench-cpu" / "rounds" / "03")
    gone = ci_merge.merge_artifacts(tmp_path / "b", tmp_path / "m3", fail_on_regression=True)
    assert gone.exit_code == EXIT_INCOMPLETE and any("rounds/03/base is missing" in n for n in gone.notes)
    other = _artifact(tmp_path / "c", "bench-cpu")
    head2 = other / "bench-cpu" / "rounds" / "02" / "head"
    shutil.move(head2 / MACHINE, head2 / "other-box")  # a round of another machine
    moved = ci_merge.merge_artifacts(other, tmp_path / "m4", fail_on_regression=True)
    assert moved.exit_code == EXIT_INCOMPLETE
    assert any("rounds/02/head holds machines ['other-box']" in n for n in moved.notes), moved.notes


def test_each_shard_judges_its_own_cases_on_its_own_rounds(tmp_path):
    parts = _owned(2)
    for k, owned in enumerate(parts, start=1):
        _artifact(tmp_path / "a", f"bench-cpu-shard-{k}", slower=1.3, shard=(k, 2), owned=owned)
    res = ci_merge.merge_artifacts(tmp_path / "a", tmp_path / "m", fail_on_regression=True)
    toks = [c for c in res.report.all() if c.benchmark == TOK]
    assert res.exit_code == 1 and len(toks) == 8 and {c.method for c in toks} == {"paired"}
    assert [(c.benchmark, c.params) for c in res.report.regressions] == [(TOK, _tok_row(res).params)]
    want = "base and head measured in 6 interleaved rounds (bench-cpu-shard-1, bench-cpu-shard-2)"
    assert any(want in n for n in res.notes), res.notes


def test_a_shards_rounds_judge_only_its_own_cases_and_a_broken_shard_is_not_judged(tmp_path):
    parts = _owned(2)
    slow_k = next(k for k, owned in enumerate(parts, start=1) if SLOW in owned)
    for k, owned in enumerate(parts, start=1):  # the other shard's rounds plant SLOW (a case it does not own)
        _artifact(tmp_path / "a", f"bench-cpu-shard-{k}", shard=(k, 2), owned=owned,
                  round_cases=None if k == slow_k else owned | {SLOW}, round_slower=1.0 if k == slow_k else 1.5)
    res = ci_merge.merge_artifacts(tmp_path / "a", tmp_path / "m", fail_on_regression=True)
    assert res.exit_code == 0 and _tok_row(res).method == "paired" and _tok_row(res).verdict is Verdict.UNCHANGED
    other = 3 - slow_k
    shutil.rmtree(tmp_path / "a" / f"bench-cpu-shard-{other}" / "rounds" / "05")
    res = ci_merge.merge_artifacts(tmp_path / "a", tmp_path / "m2", fail_on_regression=True)
    toks = {c.params: c for c in res.report.all() if c.benchmark == TOK}
    own = {(("pipeline", p), ("preset", w)) for p, w in parts[slow_k - 1]}
    assert res.exit_code == EXIT_INCOMPLETE
    assert {c.method for p, c in toks.items() if p in own} == {"paired"}
    assert {c.verdict for p, c in toks.items() if p not in own} == {Verdict.NOT_COMPARABLE}


def test_an_unchanged_pair_sharded_three_ways_reads_as_the_unsharded_one_green_and_judged(tmp_path):
    """The A/A pair of the CPU PR job (base and head one tree, 6 interleaved rounds) as one
    artifact and as 3 shard artifacts, each shard with rounds of its own cases only: the same
    rows with the same verdicts and methods, green, and judged (the timings on pairs, the
    exact rows exactly), nothing left not judged. A planted shard slowdown is the control."""
    def rows(res):
        return sorted((c.benchmark, c.params, c.verdict.value, c.method) for c in res.report.all())

    whole = ci_merge.merge_artifacts(_artifact(tmp_path / "one", "bench-cpu"), tmp_path / "m1", fail_on_regression=True)
    for k, owned in enumerate(_owned(3), start=1):
        _artifact(tmp_path / "three", f"bench-cpu-shard-{k}", shard=(k, 3), owned=owned)
    shards = ci_merge.merge_artifacts(tmp_path / "three", tmp_path / "m3", fail_on_regression=True)
    assert rows(shards) == rows(whole) and len(rows(whole)) == 24  # 12 cases: accuracy and tok/s
    assert shards.exit_code == whole.exit_code == 0 and not shards.report.not_judged
    assert {m for *_, m in rows(shards)} >= {"paired", "exact"}
    assert {v for _, _, v, _ in rows(shards)} == {"unchanged"}
    # The control: the same shards with one case slower on head in its own shard's rounds.
    for k, owned in enumerate(_owned(3), start=1):
        _artifact(tmp_path / "bad", f"bench-cpu-shard-{k}", shard=(k, 3), owned=owned, slower=1.3 if SLOW in owned else 1.0)
    bad = ci_merge.merge_artifacts(tmp_path / "bad", tmp_path / "m4", fail_on_regression=True)
    assert bad.exit_code == 1 and [(c.benchmark, c.params) for c in bad.report.regressions] == [
        (TOK, (("pipeline", SLOW[0]), ("preset", SLOW[1])))]
