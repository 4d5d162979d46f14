"""The results store (``compare.results_store``): one reading of an asv results directory.

Each test plants the mistake its function exists to catch: a run file named for a commit
that records another, a benchmark listed that never ran, a merge that takes a value from a
part that does not own it, a corrupted file that would otherwise vanish from the listing.
The results are asv's own format (tests/asv_fixtures.py), read back with asv's ``Results``
and ``load_asv``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asv_fixtures import sha, write_asv_run
from vlmpath.compare import results_store as rs
from vlmpath.compare.asv_results import load_asv
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import failures_path
from vlmpath.runner.run_files import RunInfo, write_run_info

M = "cpu-store"
ACC = "bench_embed.EmbedRoutine.track_accuracy"
TOK = "bench_embed.EmbedRoutine.track_tok_per_s"
SYNC = "bench_embed.EmbedRoutine.track_syncs"
PRESETS = ["video", "mixed", "cache_reuse"]


def _spec(acc: list, tok: list | None = None):
    out = {ACC: ("fraction", ["preset"], [PRESETS], acc, None)}
    if tok is not None:
        samples = [None if v is None else [v * f for f in (0.99, 1.0, 1.01, 1.0, 0.995)] for v in tok]
        out[TOK] = ("tok/s", ["preset"], [PRESETS], tok, samples)
    return out


def _values(root: Path, commit: str, name: str = ACC) -> dict[str, float | None]:
    run = load_asv(root, commit).machines[0]
    return {dict(m.params)["preset"]: m.value for m in run.metrics if m.benchmark == name}


# --- a commit's run files --------------------------------------------------------------------


def test_a_run_file_named_for_a_commit_that_records_another_is_not_that_commits(tmp_path):
    a, b = sha("store-a"), sha("store-b")
    mine = write_asv_run(tmp_path, M, a, _spec([1.0, 1.0, 1.0]))
    # Planted: a file named for ``a`` (same 8 digits, another environment) that holds ``b``.
    other = write_asv_run(tmp_path, M, b, _spec([0.5, 0.5, 0.5]), env_name="other")
    impostor = mine.with_name(f"{a[:8]}-impostor.json")
    other.rename(impostor)
    assert rs.named_for(tmp_path / M, a) == sorted([mine, impostor])  # the name alone takes both
    assert rs.commit_files(tmp_path, M, a) == [mine]
    assert rs.commit_files(tmp_path, M, a.upper()) == [mine]  # a sha is a sha, whatever its case
    assert rs.commit_files(tmp_path, M, b) == []


def test_a_corrupted_run_file_is_kept_and_then_named_not_skipped(tmp_path):
    a = sha("store-corrupt")
    good = write_asv_run(tmp_path, M, a, _spec([1.0, 1.0, 1.0]))
    bad = good.with_name(f"{a[:8]}-broken.json")
    bad.write_text('{"commit_hash": "' + a + '", "results": {')  # cut short
    assert rs.commit_files(tmp_path, M, a) == sorted([bad, good])
    dest = tmp_path / "copy"
    rs.copy_comparison(tmp_path, dest, M, (a,))
    assert (dest / M / bad.name).is_file()  # carried along, so that the reader can name it
    with pytest.raises(VlmpathError, match=f"corrupted results file .*{bad.name}"):
        load_asv(dest, a)


def test_the_side_files_are_not_run_files_and_machines_need_a_machine_json(tmp_path):
    a = sha("store-side")
    f = write_asv_run(tmp_path, M, a, _spec([1.0, 1.0, 1.0]), fingerprint={"python": "3.11"})
    write_run_info(tmp_path, M, a, RunInfo(quick=True, scale="tiny", bench=None, trusted=False))
    failures_path(tmp_path / M, a).write_text("[]")
    (tmp_path / "stray").mkdir()  # no machine.json: not a machine
    (tmp_path / "stray" / f"{a[:8]}-x.json").write_text("{}")
    assert rs.machine_dirs(tmp_path) == [tmp_path / M]
    assert rs.run_files(tmp_path / M) == [f]
    assert [p.name for p in rs.side_files(tmp_path, M, a)] == [
        f"vlmpath-fingerprint-{a[:8]}.json", f"vlmpath-failures-{a[:8]}.json", f"vlmpath-run-{a[:8]}.json"]
    assert len(rs.side_files(tmp_path, M, a, run_info=False)) == 2
    assert rs.files_named(tmp_path, a, M) == [f]
    assert rs.files_named(tmp_path, a[:7]) == [f, tmp_path / "stray" / f"{a[:8]}-x.json"]


# --- a comparison's copy and benchmarks.json -------------------------------------------------


def test_a_comparison_copy_holds_its_two_runs_and_benchmarks_json_trimmed_to_what_ran(tmp_path):
    base, head, old = sha("store-base"), sha("store-head"), sha("store-old")
    src = tmp_path / "results"
    write_asv_run(src, M, old, {SYNC: ("syncs", ["preset"], [PRESETS], [2.0, 2.0, 2.0], None)})  # history
    write_asv_run(src, M, base, _spec([1.0, 1.0, 1.0]), fingerprint={"python": "3.11"})
    write_asv_run(src, M, head, _spec([1.0, 0.5, 1.0], [100.0, 110.0, 120.0]))
    write_run_info(src, M, head, RunInfo(quick=False, scale="tiny", bench=None, trusted=False))
    dest = tmp_path / "out"
    rs.copy_comparison(src, dest, M, (base, head, base))
    names = sorted(p.name for p in (dest / M).iterdir())
    assert names == sorted([f"{base[:8]}-{p.name.split('-', 1)[1]}" for p in rs.commit_files(src, M, base)]
                           + [p.name for p in rs.commit_files(src, M, head)]
                           + ["machine.json", f"vlmpath-fingerprint-{base[:8]}.json"])  # no run-info, no history
    meta = json.loads((dest / "benchmarks.json").read_text())
    assert sorted(meta) == sorted([ACC, TOK, "version"])  # SYNC ran only in the history: left out
    assert SYNC in json.loads((src / "benchmarks.json").read_text())
    assert _values(dest, head)["mixed"] == 0.5 and _values(dest, base)["mixed"] == 1.0


def test_a_reused_base_is_copied_from_its_own_store(tmp_path):
    base, head = sha("store-rb"), sha("store-rh")
    trusted, rdir = tmp_path / "trusted", tmp_path / "results"
    write_asv_run(trusted, M, base, _spec([0.25, 0.25, 0.25]))
    write_asv_run(rdir, M, head, _spec([1.0, 1.0, 1.0]))
    write_asv_run(rdir, M, base, _spec([0.75, 0.75, 0.75]))  # not the one asked for
    rs.copy_comparison(rdir, tmp_path / "out", M, (base, head), sources={base: trusted})
    assert _values(tmp_path / "out", base)["video"] == 0.25


def test_a_corrupted_benchmarks_json_is_copied_as_it_is_and_named_by_the_reader(tmp_path):
    a = sha("store-bj")
    write_asv_run(tmp_path / "src", M, a, _spec([1.0, 1.0, 1.0]))
    (tmp_path / "src" / "benchmarks.json").write_text("{not json")
    rs.copy_comparison(tmp_path / "src", tmp_path / "out", M, (a,))
    assert (tmp_path / "out" / "benchmarks.json").read_text() == "{not json"
    with pytest.raises(VlmpathError, match="corrupted results file .*benchmarks.json"):
        rs.read_benchmarks(tmp_path / "out")
    with pytest.raises(VlmpathError, match="corrupted results file .*benchmarks.json"):
        load_asv(tmp_path / "out", a)


def test_benchmarks_merged_keep_the_first_entry_and_a_trim_of_nothing_known_keeps_all(tmp_path):
    rs.add_benchmarks(tmp_path, {"version": 2, "a": {"unit": "first"}})
    rs.add_benchmarks(tmp_path, {"version": 3, "a": {"unit": "second"}, "b": {"unit": "b"}})
    assert rs.read_benchmarks(tmp_path) == {"version": 2, "a": {"unit": "first"}, "b": {"unit": "b"}}
    meta = rs.read_benchmarks(tmp_path)
    assert rs.trim_benchmarks(meta, {"b"}) == {"version": 2, "b": {"unit": "b"}}
    assert rs.trim_benchmarks(meta, set()) == meta  # unknown (a run file unreadable): nothing dropped
    assert rs.read_benchmarks(tmp_path / "none") == {}


# --- partial results merged through asv's Results -------------------------------------------


def _parts(tmp_path: Path, commit: str):
    """Two partial runs of one commit; each measured every preset, with different values, so
    that a merge taking a value from the wrong part shows."""
    one = write_asv_run(tmp_path / "p1", M, commit, _spec([1.0, 1.0, 1.0], [100.0, 100.0, 100.0]))
    two = write_asv_run(tmp_path / "p2", M, commit, _spec([0.5, 0.5, 0.5], [200.0, 200.0, 200.0]))
    return rs.Partial("part 1", rs.load_results(one)), rs.Partial("part 2", rs.load_results(two))


def test_a_merge_of_two_partial_files_keeps_each_cases_owners_value(tmp_path):
    c = sha("store-merge")
    p1, p2 = _parts(tmp_path, c)
    owns = {"'video'": p1, "'mixed'": p2}  # cache_reuse: nobody's (not run)

    merged = rs.merge_partials([p1, p2], lambda key, combo, having: owns.get(combo[0]), "test merge")
    rs.save_results(merged, tmp_path / "merged")
    rs.copy_machine(tmp_path / "p1", tmp_path / "merged", M)
    rs.add_benchmarks(tmp_path / "merged", rs.read_benchmarks(tmp_path / "p1"))
    assert _values(tmp_path / "merged", c) == {"video": 1.0, "mixed": 0.5, "cache_reuse": None}
    tok = _values(tmp_path / "merged", c, TOK)
    assert tok["video"] == pytest.approx(100.0) and tok["mixed"] == pytest.approx(200.0)
    assert tok["cache_reuse"] is None
    # The other owner: the other values (the merge reads the owner, not the first part).
    p1, p2 = _parts(tmp_path / "again", c)
    merged = rs.merge_partials([p1, p2], lambda key, combo, having: p2 if combo[0] == "'video'" else p1)
    assert merged.get_result_value(ACC, merged.get_result_params(ACC)) == [0.5, 1.0, 1.0]


def test_a_merge_refuses_parts_that_ran_another_version_of_a_benchmark(tmp_path):
    c = sha("store-version")
    p1, p2 = _parts(tmp_path, c)
    p2.results.benchmark_version[ACC] = "another"
    with pytest.raises(VlmpathError, match=f"part 1 and part 2 ran different versions of {ACC}"):
        rs.merge_partials([p1, p2], lambda key, combo, having: having[0])


def test_a_results_file_out_of_bounds_is_refused_before_asv_reads_it(tmp_path):
    bad = tmp_path / M / "abcdef12-env.json"
    bad.parent.mkdir()
    bad.write_text("[" * 10_000 + "]" * 10_000)
    with pytest.raises(VlmpathError, match=f"shard 1/2 results file .*{bad.name}"):
        rs.load_results(bad, "shard 1/2 results file")
