"""The landing page of a one-commit store in a real headless Chromium: no empty tile, no
empty graph, every chart image decoded (the drivers are test_dashboard_browser.py's).

The store is what one ``vlmpath run`` leaves, written like asv writes it (``asv_fixtures``):
one commit, every path the page asks about; the page and its charts are made by
``runner.run.publish_pages``, the step ``vlmpath run`` takes after ``asv publish``.
Screenshot: ``test-artifacts/landing-one-commit.png``.
"""

from __future__ import annotations

import json
import re

import pytest
from asv_fixtures import sha, write_asv_run
from test_dashboard_browser import _Handler, _serve, _text, dom, screenshot

from vlmpath.render.landing import BANNER_MARK
from vlmpath.render.landing_data import TILES
from vlmpath.runner.run import publish_pages

pytestmark = pytest.mark.e2e
PRESETS = ["few_large_images", "many_small_images", "cache_reuse"]


def _one_commit_store(root, commit) -> None:
    def grid(sides, unit, values, samples=None, group=PRESETS, names=("strategy", "preset")):
        return (unit, list(names), [list(sides), list(group)], values, samples)

    n = len(PRESETS)
    write_asv_run(root, "cpu-box", commit, {
        "bench_encode.EncodeMetrics.track_tok_per_s": grid(("batched", "per_request"), "tok/s",
                                                           [1632.0, 2025.0, 21104.0, 1024.0, 1506.0, 12685.0]),
        "bench_encode.EncodeMetrics.track_encoder_calls": grid(("batched", "per_request"), "calls", [1, 3, 1, 2, 10, 1]),
        "bench_encode.EncodeMetrics.track_accuracy": grid(("batched", "per_request"), "fraction", [1.0] * 2 * n),
        "bench_inject.Inject.track_syncs": grid(("masked_scatter", "where_index"), "syncs", [0] * n + [1] * n),
        "bench_inject.Inject.track_bandwidth_fraction": grid(("masked_scatter", "where_index"), "ratio",
                                                            [0.06, 0.05, 0.07, 0.18, 0.2, 0.17]),
        "bench_inject.Inject.time_inject": grid(("masked_scatter", "where_index"), "seconds",
                                                [2.6e-4, 1.6e-4, 2e-4, 1.9e-4, 1.2e-4, 1.5e-4]),
        "bench_inject.Count.track_syncs": grid(("mask_sum", "offsets"), "syncs", [1] * n + [0] * n),
        "bench_inject.Count.time_count": grid(("mask_sum", "offsets"), "seconds", [6e-5, 4.6e-5, 3e-5, 2.7e-5, 3.8e-5, 4.2e-5]),
        "bench_hash.Receive.time_receive": grid(("forwarded", "rehash"), "seconds", [2.5e-5, 2.5e-5, 3.6e-5, 0.009, 0.011, 0.045],
                                                group=[1, 16, 64], names=("path", "size_mib")),
        "bench_embed.EmbedRoutine.track_tok_per_s": grid(("default", "legacy"), "tok/s",
                                                         [1500.0, 1900.0, 20000.0, 1400.0, 1700.0, 19000.0],
                                                         names=("pipeline", "preset")),
        "bench_embed.EmbedRoutine.track_syncs": grid(("default", "legacy"), "syncs", [0] * n + [2] * n,
                                                     names=("pipeline", "preset")),
        "bench_embed.EmbedRoutine.track_encoder_calls": grid(("default", "legacy"), "calls", [1] * 2 * n,
                                                             names=("pipeline", "preset")),
        "bench_embed.EmbedRoutine.track_accuracy": grid(("default", "legacy"), "fraction", [1.0] * 2 * n,
                                                        names=("pipeline", "preset")),
    })


@pytest.fixture(scope="module")
def one_commit_site(tmp_path_factory):
    t = tmp_path_factory.mktemp("landing")
    commit = sha("only")
    _one_commit_store(t / "results", commit)
    (t / "html").mkdir()
    (t / "reports").mkdir()
    (t / "html" / "index.html").write_text("<!doctype html><html><body><p>asv dashboard</p></body></html>")
    page = publish_pages(t / "results", t / "html", t / "reports", commit, "cpu-box")
    return t / "html", page


def test_one_commit_landing_page_has_no_empty_tile_or_graph(one_commit_site):
    html_dir, page = one_commit_site
    with _serve(_Handler, html_dir) as url:
        body = dom(f"{url}/vlmpath/index.html")
        check = dom(f"{url}/_check.html?target=/vlmpath/index.html")
        asv_page = dom(f"{url}/index.html")
        screenshot(f"{url}/vlmpath/index.html", "landing-one-commit.png")
    for spec in TILES:  # every question answered with numbers on this store
        tile = re.search(rf'<section class="tile" id="tile-{spec.key}">(.*?)</section>', body, re.S)
        assert tile, f"tile {spec.key} missing"
        cells = re.findall(r"<td class=\"(?:best)?\"[^>]*>([^<]+)", tile.group(1))
        assert cells and all(re.match(r"[0-9]", c) for c in cells), (spec.key, cells[:5])
        assert "empty-reason" not in tile.group(1)
    images = json.loads(re.search(r'<pre id="result">(.*?)</pre>', check, re.S).group(1))
    assert images and all(i["complete"] and i["w"] > 0 for i in images), images
    # No graph without data on the page: the vendor chart (no GPU here) and the one-dot
    # history charts are named in a line, not shown.
    srcs = [i["src"] for i in images]
    assert not any("vendors" in s or "history" in s for s in srcs), srcs
    assert "history charts start with the second commit" in _text(body)
    assert BANNER_MARK in (html_dir / "index.html").read_text() and "what this box found" in _text(asv_page)
