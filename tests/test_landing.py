"""The main job's own page: what one commit found on this box, strategy against strategy
(render.landing, render.landing_data), and the run summary's better / n / reason columns.

Built from asv results files written like asv writes them (``asv_fixtures``); nothing
is measured. The browser check of the same page is in test_dashboard_browser.py (e2e).
"""

from __future__ import annotations

import re

from asv_fixtures import sha, write_asv_run

from vlmpath.compare.asv_results import load_asv
from vlmpath.render import summary as summod
from vlmpath.render.dashboard import write_dashboard
from vlmpath.render.landing import BANNER_MARK, link_from_asv
from vlmpath.render.landing_data import TILES, tiles

PRESETS = ["video", "cache_reuse"]


def _store(root, commit, *, encode=(2900.0, 21104.0, 1267.0, 12685.0), failed_inject=False, date=1_700_000_000_000):
    nan = float("nan")
    write_asv_run(root, "cpu-box", commit, {
        "bench_encode.EncodeMetrics.track_tok_per_s": ("tok/s", ["strategy", "preset"],
                                                       [["batched", "per_request"], PRESETS], list(encode), None),
        "bench_encode.EncodeMetrics.track_encoder_calls": ("calls", ["strategy", "preset"],
                                                           [["batched", "per_request"], PRESETS], [1, 1, 2, 2], None),
        "bench_encode.EncodeMetrics.track_accuracy": ("fraction", ["strategy", "preset"],
                                                      [["batched", "per_request"], PRESETS], [1.0] * 4, None),
        "bench_encode.EncodeMetrics.track_reserved_bytes": ("bytes", ["strategy", "preset"],
                                                            [["batched", "per_request"], PRESETS], [nan] * 4, None),
        "bench_inject.Inject.track_syncs": ("syncs", ["strategy", "preset"],
                                            [["masked_scatter", "where_index"], ["video"]],
                                            [None if failed_inject else 0, 1], None),
        "bench_hash.Receive.time_receive": ("seconds", ["path", "size_mib"], [["forwarded", "rehash"], [1, 64]],
                                            [4e-5, 4e-5, 0.009, 0.045],
                                            [[4e-5, 3e-5, 5e-5], [4e-5], [0.009], [0.045]]),
    }, date=date)


def test_tiles_answer_each_question_with_numbers_n_and_the_better_side(tmp_path):
    commit = sha("one")
    _store(tmp_path, commit)
    mrun = load_asv(tmp_path, commit).machine("cpu-box")
    found = {t.spec.key: t for t in tiles(mrun)}
    enc = found["encode"]
    assert enc.sides == ("batched", "per_request") and [r.group for r in enc.rows] == ["cache_reuse", "video"]
    video = next(r for r in enc.rows if r.group == "video")
    tok = video.cells[:2]
    assert [c.text for c in tok] == ["2900 tok/s", "1267 tok/s"] and tok[0].best and not tok[1].best
    assert all(c.n == 1 for c in video.cells)  # a track's one value is n=1, never 0
    assert not any(c.best for c in video.cells[4:])  # equal accuracy: no better side
    hash_rows = {r.group: r for r in found["hash"].rows}
    assert list(hash_rows) == ["1", "64"]  # sizes in numeric order
    fwd = hash_rows["1"].cells[0]
    assert fwd.n == 3 and fwd.best and fwd.spread.startswith("range 30 µs")
    # A path this run did not measure says so: never a blank tile.
    assert found["count"].rows == () and "not selected" in found["count"].note


def test_a_failed_case_is_a_failed_cell_not_a_better_side(tmp_path):
    commit = sha("failed")
    _store(tmp_path, commit, failed_inject=True)
    mrun = load_asv(tmp_path, commit).machine("cpu-box")
    inject = next(t for t in tiles(mrun) if t.spec.key == "inject")
    cells = inject.rows[0].cells
    assert cells[0].state == "failed" and cells[0].text == "FAILED" and not cells[1].best


def test_one_commit_page_has_every_tile_filled_and_no_history_graph(tmp_path):
    commit = sha("one")
    results, html, reports = tmp_path / "results", tmp_path / "html", tmp_path / "reports"
    _store(results, commit)
    html.mkdir()
    reports.mkdir()
    (html / "index.html").write_text("<html><body class=asv><p>asv</p></body></html>")
    page = write_dashboard(html, reports, results_dir=results, commit=commit, machine="cpu-box").read_text()
    for spec in TILES:
        section = re.search(rf'<section class=tile id="tile-{spec.key}">(.*?)</section>', page, re.S)
        assert section, spec.key
        body = section.group(1)
        assert "<td" in body or "class=empty-reason" in body  # numbers, or why there are none
    assert "2900 tok/s ★" in page and "higher is better" in page and "batched (default)" in page
    assert "history charts start with the second commit" in page
    # Linked from asv's page, once (a second publish step does not add a second banner).
    assert link_from_asv(html) and not link_from_asv(html)
    asv_page = (html / "index.html").read_text()
    assert asv_page.count(BANNER_MARK) == 1 and 'href="vlmpath/index.html"' in asv_page
    assert '<a href="../index.html">' in page


def test_two_commits_the_page_says_how_many_and_shows_the_newest(tmp_path):
    a, b = sha("a"), sha("b")
    _store(tmp_path / "r", a, date=1_700_000_000_000)
    _store(tmp_path / "r", b, encode=(3100.0, 20000.0, 1200.0, 12000.0), date=1_700_000_100_000)
    (tmp_path / "html").mkdir()
    (tmp_path / "rep").mkdir()
    page = write_dashboard(tmp_path / "html", tmp_path / "rep", results_dir=tmp_path / "r").read_text()
    assert f"@ {b[:8]}" in page and "2 commits with results" in page and "3100 tok/s" in page
    assert "start with the second commit" not in page


def test_summary_says_which_way_is_better_n_of_a_track_and_why_a_row_was_skipped(tmp_path):
    commit = sha("one")
    _store(tmp_path, commit)
    s = summod.summarize(tmp_path, commit, "cpu-box")
    rows = {(r.benchmark.rsplit(".", 1)[1], r.params_text): r for r in s.rows}
    tok = rows[("track_tok_per_s", "batched, video")]
    assert tok.samples == 1 and tok.better == "higher"  # a track value: n=1, not "samples 0"
    assert rows[("time_receive", "forwarded, 1")].samples == 3 and rows[("time_receive", "forwarded, 1")].better == "lower"
    skipped = rows[("track_reserved_bytes", "batched, video")]
    assert skipped.state == "skipped" and "not measured here" in skipped.reason
    md = summod.render_markdown(s)
    assert "| n | better | state |" in md and "higher is better" in md
    line = next(ln for ln in md.splitlines() if "track_reserved_bytes` | batched, video" in ln)
    assert "**skipped**: not measured here" in line
    term = summod.render_terminal(s)
    # once per metric, short, with what would enable it; the numbers that answer the page
    assert term.count("skipped: reserved_bytes (4 cases): needs a GPU allocator's counter: run on a GPU") == 1
    assert all(len(line) <= 120 for line in term.splitlines() if line.startswith("skipped:"))
    assert "batched 2 vs per-request 4 over 2 workloads; accuracy 1.00 vs 1.00" in term
    assert "40 µs forwarded vs 45 ms re-hashed" in term
    assert "track_tok_per_s" not in term  # the table is in the files (and behind --table)
    assert not any(r.samples == 0 for r in s.rows if r.state == "ok")


def test_asv_grid_draws_a_one_commit_series_as_a_point(tmp_path):
    """asv's grid draws lines only: a one-commit store showed every tile empty."""
    import shutil
    from pathlib import Path

    import asv

    from vlmpath.render.landing import GRID_JS, show_single_points

    shutil.copy(Path(asv.__file__).parent / "www" / GRID_JS, tmp_path / GRID_JS)
    before = (tmp_path / GRID_JS).read_text()
    assert "points:" not in before
    assert show_single_points(tmp_path) and not show_single_points(tmp_path)  # idempotent
    after = (tmp_path / GRID_JS).read_text()
    assert "points: {show: data.length < 2" in after and "autoscaleMargin: 0.25" in after
    # Another asv's file (the options moved) is left as it is, not half edited.
    (tmp_path / GRID_JS).write_text(before.replace("shadowSize: 0", "shadowSize: 1"))
    assert not show_single_points(tmp_path) and "points:" not in (tmp_path / GRID_JS).read_text()
    assert not show_single_points(tmp_path / "nowhere")


def test_a_site_of_several_machines_shows_each_and_this_box_only_when_named(tmp_path):
    commit = sha("two-boxes")
    _store(tmp_path / "r", commit)
    write_asv_run(tmp_path / "r", "cuda-box", commit, {
        "bench_encode.EncodeMetrics.track_tok_per_s": ("tok/s", ["strategy", "preset"],
                                                       [["batched", "per_request"], PRESETS], [9e4, 9e5, 4e4, 5e5], None)})
    for d in ("html", "rep"):
        (tmp_path / d).mkdir()
    every = write_dashboard(tmp_path / "html", tmp_path / "rep", results_dir=tmp_path / "r").read_text()
    assert "found: cpu-box @" in every and "found: cuda-box @" in every
    ids = re.findall(r'<section class=tile id="([^"]+)"', every)
    assert len(ids) == len(set(ids)) == 2 * len(TILES)
    mine = write_dashboard(tmp_path / "html", tmp_path / "rep", results_dir=tmp_path / "r", machine="cuda-box").read_text()
    assert "found: cuda-box @" in mine and "found: cpu-box @" not in mine
