"""Do the PR flow's charts say what its comment says, under the thresholds the flow was given?

The flow hands the ``ComparisonReport`` and the ``Thresholds`` it judged with to the chart
writer (``pr.outputs.draw_charts``): nothing is re-read from comparison.json and no
default band is used behind the caller's back. Checked on the chart data (the manifest's
marks: regression markers, verdict bars, direction labels), not on pixels, with a
``--config`` that disagrees with the packaged band both ways and one that flips a unit's
direction. The planted mistake (charts judged with the defaults) must be seen.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, sha, write_asv_run

from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.thresholds import Thresholds, UnitRule, load_thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.metrics import Direction
from vlmpath.pr.artifact import RESULTS_SUBDIR
from vlmpath.pr.outputs import COMMENT_FILE, draw_charts, write_outputs
from vlmpath.render.report_data import consecutive_regressions, load_history

MACHINE = "cpu-ci"
SPEED = "bench_embed.EmbedRoutine.track_tok_per_s"
BASE, HEAD = sha("base"), sha("head")


def manifest(out: Path) -> dict:
    return json.loads((out / "report" / "charts" / "charts.json").read_text())


def chart_regressions(man: dict, head: str) -> dict[str, int]:
    """Regressed cases at ``head`` per kind of chart, from the manifest's marks."""
    history = sum(int(m.split()[-1]) for c in man["charts"] if c["kind"] == "history"
                  for m in c["marks"] if m.startswith(f"regression {head[:8]} "))
    pr = sum(1 for c in man["charts"] if c["kind"] == "pr" for m in c["marks"] if m.startswith("regression "))
    return {"history": history, "pr": pr}


def comment_regressions(out: Path) -> int:
    """The regressions the comment's headline counts (0 for "No regressions")."""
    first = (out / COMMENT_FILE).read_text().splitlines()[1]
    m = re.match(r"\*\*(\d+) regressions? on", first)
    return int(m.group(1)) if m else 0


def directions(man: dict) -> set[str]:
    return {m for c in man["charts"] for m in c["marks"] if m.startswith("direction ")} | {
        m.rsplit("[", 1)[1].rstrip("]") for c in man["charts"] if c["kind"] == "pr" for m in c["marks"]}


def _config(tmp_path: Path, text: str) -> Thresholds:
    p = tmp_path / "my-thresholds.yaml"
    p.write_text(text)
    return load_thresholds(p)


def _flow(tmp_path: Path, head_speed: float, cfg: Thresholds, *, charts_with: Thresholds | None = None) -> Path:
    """What ``run_pr`` does after measuring: compare, write the comment, draw the charts."""
    out = tmp_path / "out"
    res = out / RESULTS_SUBDIR
    for commit, speed, day in ((BASE, 1000.0, 0), (HEAD, head_speed, 1)):
        write_asv_run(res, MACHINE, commit, {
            SPEED: ("tok/s", ["preset"], [["video", "multi_region"]], [speed, speed * 0.8], None),
        }, fingerprint("cpu"), date=1_700_000_000_000 + day * 86_400_000)
    head_run = load_asv(res, HEAD)
    report = compare(load_asv(res, BASE), head_run, cfg)
    write_outputs(out, report, header=[], fail=True)
    notes = draw_charts(out, report, charts_with or cfg, head_run)
    assert not [n for n in notes if "not drawn" in n], notes
    return out


# A 5% drop: the packaged CPU band (10%) calls it unchanged, a 5% band a regression; a 30%
# drop: the packaged band calls it a regression, a 50% band unchanged.
@pytest.mark.parametrize("head_speed, band, expected", [(950.0, 0.05, 2), (700.0, 0.5, 0)])
def test_chart_marks_agree_with_the_comment_under_a_config(tmp_path, head_speed, band, expected):
    cfg = _config(tmp_path, f"factor: {{gpu: {band}, cpu: {band}}}\n")
    out = _flow(tmp_path, head_speed, cfg)
    man = manifest(out)
    assert comment_regressions(out) == expected
    assert chart_regressions(man, HEAD) == {"history": expected, "pr": expected}
    assert man["thresholds"] == cfg.source
    assert not any("judged with thresholds" in w for w in man["warnings"])


@pytest.mark.parametrize("head_speed, band", [(950.0, 0.05), (700.0, 0.5)])
def test_charts_judged_with_the_defaults_are_caught(tmp_path, head_speed, band):
    # Planted: the old flow's hidden default. The comment follows the config, the history
    # marks the packaged band: the same check sees them disagree, and the writer warns.
    cfg = _config(tmp_path, f"factor: {{gpu: {band}, cpu: {band}}}\n")
    out = _flow(tmp_path, head_speed, cfg, charts_with=Thresholds.default())
    man = manifest(out)
    marks = chart_regressions(man, HEAD)
    assert marks["pr"] == comment_regressions(out)  # the PR chart draws the report's own verdicts
    assert any("judged with thresholds" in w and "my-thresholds.yaml" in w for w in man["warnings"])
    # The history pair is the report's (taken as judged), so the default band shows only
    # once another pair is judged: a third commit with the same drop, judged both ways
    # (``consecutive_regressions`` is what the history chart marks).
    nxt = sha("next")
    write_asv_run(out / RESULTS_SUBDIR, MACHINE, nxt, {
        SPEED: ("tok/s", ["preset"], [["video", "multi_region"]],
                [head_speed ** 2 / 1000.0, head_speed ** 2 / 1000.0 * 0.8], None),
    }, fingerprint("cpu"), date=1_700_000_000_000 + 2 * 86_400_000)
    history = load_history(out / RESULTS_SUBDIR)
    report = compare(load_asv(out / RESULTS_SUBDIR, BASE), load_asv(out / RESULTS_SUBDIR, HEAD), cfg)
    at_next = {th.source: sum(len(v) for k, v in consecutive_regressions(history, th, judged=report).items()
                              if k[0] == nxt) for th in (cfg, Thresholds.default())}
    assert at_next[cfg.source] == comment_regressions(out) != at_next["defaults"]


def test_direction_labels_follow_the_config(tmp_path):
    # A config that says lower tok/s is better (a planted flip): every label the charts
    # draw says so, and the comment's verdict is an improvement, not a regression.
    # A --config can no longer flip it (compare.thresholds refuses `units`), so the flip is
    # planted in the Thresholds object itself.
    default = Thresholds.default()
    cfg = replace(default, units=tuple(sorted({**dict(default.units), "tok/s": UnitRule(Direction.LOWER)}.items())),
                  source="planted flip")
    out = _flow(tmp_path, 700.0, cfg)
    man = manifest(out)
    assert comment_regressions(out) == 0 and chart_regressions(man, HEAD) == {"history": 0, "pr": 0}
    labels = directions(man)
    assert "direction tok/s: lower is better" in labels and "tok/s, lower is better" in labels
    assert not any("tok/s" in d and "higher" in d for d in labels)
    out_default = _flow(tmp_path / "d", 700.0, Thresholds.default())
    assert "direction tok/s: higher is better" in directions(manifest(out_default))
