"""Sharding the suite over runners: the partition, the shard merge and the comparison after it.

The asv results here are written in asv's own format (tests/asv_fixtures.py) and read back
through asv's ``Results`` and ``load_asv``; the real ``vlmpath run --shard`` and ``ci merge``
of shard artifacts run in tests/test_shards_e2e.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from asv_fixtures import sha, write_asv_run
from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError
from vlmpath.runner.discovery import Discovered, select
from vlmpath.runner.run_files import RunInfo, write_run_info
from vlmpath.runner.shard_costs import latest_trusted, pick_shard
from vlmpath.runner.shard_store import add_to_store
from vlmpath.runner.shards import Shard, Unit, partition, selection_regex, shard_loads, unit_of, units

PRESETS = ["video", "mixed", "cache_reuse", "few_large_images"]
PIPES = ["default", "legacy"]
MACHINE = "cpu-ci"


def _combos():
    return [(p, w) for p in PIPES for w in PRESETS]


def _spec(acc: dict, tok: dict, present=None):
    """A routine class's tracks (accuracy exact, tok/s with samples) over (pipeline, preset);
    ``present``: the combos this run measured (the others None, as asv leaves them)."""
    keep = present or set(_combos())
    acc_v = [acc[c] if c in keep else None for c in _combos()]
    tok_v = [tok[c] if c in keep else None for c in _combos()]
    samples = [[tok[c] * f for f in (0.99, 1.0, 1.01, 1.0, 0.995)] if c in keep else None for c in _combos()]
    syncs = [2.0 if c in keep else None for c in _combos()]
    return {
        "bench_embed.EmbedRoutine.track_accuracy": ("fraction", ["pipeline", "preset"], [PIPES, PRESETS], acc_v, None),
        "bench_embed.EmbedRoutine.track_tok_per_s": ("tok/s", ["pipeline", "preset"], [PIPES, PRESETS], tok_v,
                                                     samples),
        "bench_embed.EmbedRoutine.track_syncs": ("syncs", ["pipeline", "preset"], [PIPES, PRESETS], syncs, None),
    }


def _values(regressed=None):
    acc = {c: 1.0 for c in _combos()}
    tok = {c: 1000.0 + 10 * i for i, c in enumerate(_combos())}
    if regressed:
        acc[regressed] = 0.5
    return acc, tok


def _owned(n: int):
    """The (pipeline, preset) combos each of ``n`` shards owns, by the real partition."""
    us = sorted({unit_of("bench_embed.EmbedRoutine.track_accuracy", (repr(p), repr(w))) for p, w in _combos()})
    return [{(eval(u.combo[0]), eval(u.combo[1])) for u in part} for part in partition(us, n)]  # noqa: S307


def _write_sharded(root: Path, commit: str, n: int, regressed=None, drop: int | None = None) -> list[Path]:
    """``n`` shard results dirs of one commit (shard ``drop`` left out), run-info beside."""
    dirs = []
    for k, owned in enumerate(_owned(n), start=1):
        if k == drop:
            continue
        d = root / f"shard{k}"
        write_asv_run(d, MACHINE, commit, _spec(*_values(regressed), present=owned))
        labels = sorted(unit_of("bench_embed.EmbedRoutine.x", (repr(p), repr(w))).label for p, w in owned)
        write_run_info(d, MACHINE, commit, RunInfo(quick=False, scale="tiny", bench=None, trusted=True,
                       shard={"k": k, "n": n, "units": labels}))
        dirs.append(d)
    return dirs


def test_parse_shard_one_line_errors():
    assert Shard.parse("2/3").k == 2 and Shard.parse(" 3 / 3 ").n == 3
    for bad, why in (("0/3", "K must be"), ("4/3", "K must be"), ("1/0", "N must be"), ("2", "is not K/N"),
                     ("a/b", "is not K/N"), ("1/65", "N must be")):
        with pytest.raises(VlmpathError, match=why):
            Shard.parse(bad)


def test_partition_is_a_deterministic_cover_balanced_by_count_or_cost():
    us = [Unit(f"m.C{i % 3}", (str(i),)) for i in range(17)]
    parts = partition(list(reversed(us)), 3)
    assert parts == partition(us, 3)  # the input order does not matter
    flat = [u for p in parts for u in p]
    assert sorted(flat) == sorted(us) and len(flat) == len(set(flat))
    assert sorted(len(p) for p in parts) == [5, 6, 6]
    # Skewed costs: by count the slowest shard carries far more than by cost.
    costs = {u: (100.0 if i < 3 else 1.0) for i, u in enumerate(us)}
    by_cost = shard_loads(partition(us, 3, costs), costs)
    by_count = shard_loads(partition(us, 3), costs)
    assert max(by_cost) / min(by_cost) < max(by_count) / min(by_count)
    assert max(by_cost) / min(by_cost) < 1.1


def test_selection_regex_selects_exactly_the_shard_in_asvs_spelling():
    b = Discovered("bench_embed.EmbedRoutine.track_accuracy", (("'default'", "'legacy'"), ("'video'", "'mixed'")),
                   "fraction")
    t = Discovered("bench_embed.EmbedRoutine.track_syncs", b.params, "syncs")
    other = Discovered("bench_hash.Receive.time_receive", (("1", "2"),), "seconds")
    chosen = select([b, t, other], None)
    parts = partition(units(chosen), 2)
    seen = []
    for part in parts:
        labels = [x.label(c) for x, c in chosen if unit_of(x.name, c) in set(part)]
        picked = select([b, t, other], selection_regex(labels))
        assert sorted(x.label(c) for x, c in picked) == sorted(labels)
        seen += labels
        # a unit's methods stay together: both tracks of one combo are in the same shard
        for x, c in picked:
            if x is b:
                assert (t, c) in picked
    assert sorted(seen) == sorted(x.label(c) for x, c in chosen)


def test_three_shards_merge_into_one_file_equal_to_the_whole_run(tmp_path):
    base, head = sha("base"), sha("head")
    whole = tmp_path / "whole"
    for c in (base, head):
        write_asv_run(whole, MACHINE, c, _spec(*_values(("legacy", "video") if c == head else None)))
    store = tmp_path / "store"
    for c in (base, head):
        report = add_to_store(store, _write_sharded(tmp_path / c[:8], c, 3,
                                                    ("legacy", "video") if c == head else None))
        assert len(report.merged) == 1 and not report.missing
    # one results file per machine and commit, every case in it
    assert sorted(p.name for p in (store / MACHINE).glob("*-existing-*.json")) == sorted(
        p.name for p in (whole / MACHINE).glob("*-existing-*.json"))
    sharded = compare(load_asv(store, base), load_asv(store, head))
    unsharded = compare(load_asv(whole, base), load_asv(whole, head))

    def rows(r):
        return sorted((c.benchmark, c.params, c.verdict, c.base, c.head) for c in r.all())

    assert rows(sharded) == rows(unsharded)
    assert [(c.benchmark, dict(c.params)) for c in sharded.regressions] == [
        ("bench_embed.EmbedRoutine.track_accuracy", {"pipeline": "legacy", "preset": "video"})]
    info = json.loads((store / MACHINE / f"vlmpath-run-{head[:8]}.json").read_text())
    assert info["shards"] == {"n": 3, "merged": [1, 2, 3], "missing": []}


def test_an_unchanged_pair_stays_green_after_the_merge(tmp_path):
    store = tmp_path / "store"
    for c in (sha("a"), sha("b")):
        add_to_store(store, _write_sharded(tmp_path / c[:8], c, 3))
    rep = compare(load_asv(store, sha("a")), load_asv(store, sha("b")))
    assert not rep.regressions and rep.exit_code() == 0 and rep.judged == len(rep.all()) == 3 * 8


def test_a_missing_shard_is_named_and_its_cases_are_absent(tmp_path):
    c = sha("x")
    report = add_to_store(tmp_path / "store", _write_sharded(tmp_path / "s", c, 3, drop=2))
    assert report.missing == {f"{MACHINE}@{c[:8]}": [2]}
    assert any("shard(s) 2 missing" in line for line in report.lines())
    run = load_asv(tmp_path / "store", c)
    measured = {m.params for m in run.machines[0].metrics if m.value is not None}
    owned2 = _owned(3)[1]
    assert measured and not any((dict(p)["pipeline"], dict(p)["preset"]) in owned2 for p in measured)


def test_overlapping_shards_are_refused(tmp_path):
    c = sha("o")
    dirs = _write_sharded(tmp_path / "s", c, 2)
    info = dirs[1] / MACHINE / f"vlmpath-run-{c[:8]}.json"
    data = json.loads(info.read_text())
    first = json.loads((dirs[0] / MACHINE / f"vlmpath-run-{c[:8]}.json").read_text())
    data["shard"]["units"] += first["shard"]["units"][:1]  # shard 2 also claims one of shard 1's units
    info.write_text(json.dumps(data))
    with pytest.raises(VlmpathError, match="both own"):
        add_to_store(tmp_path / "store", dirs)


def test_shards_of_different_n_or_twice_the_same_shard_are_refused(tmp_path):
    c = sha("n")
    a = _write_sharded(tmp_path / "a", c, 2)
    b = _write_sharded(tmp_path / "b", c, 3)
    with pytest.raises(VlmpathError, match="disagree on N"):
        add_to_store(tmp_path / "s1", [a[0], b[1]])
    with pytest.raises(VlmpathError, match="appears twice"):
        add_to_store(tmp_path / "s2", [a[0], a[0]])


def test_costs_come_from_the_last_trusted_run_only(tmp_path):
    store = tmp_path / "store"
    c = sha("t")
    write_asv_run(store, MACHINE, c, _spec(*_values()))
    assert latest_trusted(store, MACHINE).per_unit == {}  # no run-info: not trusted
    write_run_info(store, MACHINE, c, RunInfo(quick=False, scale="tiny", bench=None, trusted=True))
    costs = latest_trusted(store, MACHINE)
    assert costs.commit == c and len(costs.per_unit) == 8
    # 3 methods x 0.5 s each (the fixture's duration) over 8 combos each
    assert all(math.isclose(v, 3 * 0.5 / 8) for v in costs.per_unit.values())
    b = Discovered("bench_embed.EmbedRoutine.track_accuracy",
                   tuple(tuple(repr(v) for v in axis) for axis in (PIPES, PRESETS)), "fraction")
    pick = pick_shard(select([b], None), Shard.parse("1/2"), store, MACHINE)
    assert "balanced by the costs of trusted run" in pick.line and len(pick.chosen) == 4
    assert pick.info["k"] == 1 and pick.info["costs_from"] == c


def test_history_append_merges_the_shards_of_each_commit(tmp_path):
    """``ci/history.sh append`` (the main workflow's history step), run by bash: 3 shards of
    two commits arrive as six artifacts and leave one asv file per commit in the store."""
    import os
    import subprocess
    import sys

    new = tmp_path / "new"
    for c in (sha("h1"), sha("h2")):
        for i, d in enumerate(_write_sharded(tmp_path / c[:8], c, 3), start=1):
            new.mkdir(exist_ok=True)
            d.rename(new / f"main-cpu-{c[:4]}-{i}")
    root = Path(__file__).resolve().parents[1]
    launcher = tmp_path / "vlmpath"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} -m vlmpath.cli \"$@\"\n")
    launcher.chmod(0o755)
    env = {**os.environ, "REPO": "o/n", "VLMPATH": str(launcher),
           "PYTHONPATH": str(root / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    store = tmp_path / "history" / "results"
    store.mkdir(parents=True)
    r = subprocess.run(["bash", str(root / "ci" / "history.sh"), "append", str(new), str(store)], cwd=root,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("(shards 1, 2, 3 of 3)") == 2
    for c in (sha("h1"), sha("h2")):
        assert len(list((store / MACHINE).glob(f"{c[:8]}-*.json"))) == 1
        assert len(load_asv(store, c).machines[0].metrics) == 3 * 8


@pytest.mark.parametrize("n, want", [(1, 1), (3, 1), (4, 3), (5, 4)])
def test_the_counts_go_to_the_first_shard_with_the_fewest_cases(tmp_path, n, want):
    """18 units balanced by count: 6/6/6 (shard 1), 5/5/4/4 (shard 3), 4/4/4/3/3 (shard 4);
    every shard computes the same answer."""
    from vlmpath.runner.shard_costs import counts_shard

    bench = Discovered("bench_embed.EmbedRoutine.track_accuracy",
                       (tuple(f"'{p}'" for p in ("a", "b")), tuple(f"'{w}'" for w in "cdefghijk")), "fraction")
    chosen = select([bench], None)
    picks = [pick_shard(chosen, Shard(k, n), tmp_path, MACHINE) for k in range(1, n + 1)]
    assert {p.counts for p in picks} == {want}
    sizes = [len(p.info["units"]) for p in picks]
    assert sizes[want - 1] == min(sizes) and sum(sizes) == 18
    assert counts_shard([2.0, 1.0, 1.0]) == 2 and counts_shard([1.0, 1.0]) == 1


def test_a_shard_whose_statistics_its_samples_do_not_give_is_refused_not_merged(tmp_path):
    """The merge writes through asv's public ``Results.add_result``, which derives a timing's
    statistics from its samples: a shard file whose stored statistics are not what its
    samples give (edited, or another asv) is refused in one line, never merged into other
    numbers; the untouched shards merge (``test_three_shards_merge_into_one_file_equal_to_the_whole_run``)."""
    c = sha("stats")
    dirs = _write_sharded(tmp_path / "s", c, 2)
    f = next((dirs[0] / MACHINE).glob(f"{c[:8]}-*.json"))
    data = json.loads(f.read_text())
    row = data["results"]["bench_embed.EmbedRoutine.track_tok_per_s"]
    col = data["result_columns"].index("stats_ci_99_a")
    row[col] = [None if v is None else v / 2 for v in row[col]]  # a confidence interval its samples never gave
    f.write_text(json.dumps(data))
    with pytest.raises(VlmpathError, match="track_tok_per_s: asv's Results.add_result did not keep"):
        add_to_store(tmp_path / "store", dirs)
