"""Is docs/reading-a-pr-comment.md's annotated comment what the renderer writes today?

``ci/comment-guide.py --check`` re-renders the comment from the frozen, really measured
records (docs/comment-guide/records.json) and compares it with the page; a stale page
(a hand-edited row) is seen, and a renderer that no longer writes what the annotations
point at is refused rather than silently re-captioned.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def guide(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("comment_guide", ROOT / "ci" / "comment-guide.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    page = tmp_path / "docs" / "reading-a-pr-comment.md"
    page.parent.mkdir()
    shutil.copyfile(mod.PAGE, page)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(mod, "PAGE", page)
    monkeypatch.setattr(mod, "CHART", tmp_path / "docs" / "img" / "pr-chart.png")
    return mod


def test_the_checked_in_page_is_what_the_renderer_writes(guide):
    assert guide.main(["--check"]) == 0


def test_a_hand_edited_comment_row_is_seen_and_write_restores_it(guide):
    text = guide.PAGE.read_text(encoding="utf-8")
    stale = text.replace("| syncs | 0 | 18 | +18 | 🔴 regression |", "| syncs | 0 | 17 | +17 | 🔴 regression |", 1)
    assert stale != text
    guide.PAGE.write_text(stale, encoding="utf-8")
    assert guide.main(["--check"]) == 1
    assert guide.main(["--write"]) == 0
    assert guide.PAGE.read_text(encoding="utf-8") == text
    assert guide.CHART.stat().st_size > 10_000  # the README's picture, drawn from the same comparison


def test_the_frozen_records_show_the_planted_regressions(guide):
    # The three mistakes the page annotates really are in the measured head records.
    frozen = json.loads(guide.RECORDS.read_text(encoding="utf-8"))
    head = {r["workload"]: r for r in frozen["head"]}
    base = {r["workload"]: r for r in frozen["base"]}
    assert head["multi_region"]["accuracy"] < base["multi_region"]["accuracy"] == 1.0
    assert head["multi_region"]["error"] and not base["multi_region"]["error"]
    assert all(base[w]["syncs"] == 0 < head[w]["syncs"] for w in base)
    assert {"aten.nonzero", "Tensor.item"} <= set(head["chunked_long"]["sync_events"])


def test_a_comment_without_what_the_annotations_point_at_is_refused(guide, monkeypatch):
    real = guide.comment_from
    monkeypatch.setattr(guide, "comment_from", lambda frozen: real(frozen).replace("### What changed", "### Changes"))
    with pytest.raises(SystemExit, match="no longer has the 'What changed' table"):
        guide.main(["--write"])
