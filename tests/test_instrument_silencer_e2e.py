"""The two-line silencer through the real ``vlmpath ci pr`` (issue 39): appended to the routine
under test, ``SyncCount.count = property(lambda self: 0)`` made a real sync regression read as
"No regressions". The instruments check themselves after each case
(``measure.instrument_check``), so head's case is one failure that names the instrument.

One flow, two measured sides at tiny scale on CPU, narrowed to the syncs and accuracy of the
default pipeline on ``multi_region`` (~1 min on 2 shared cores)."""

from __future__ import annotations

import json
import os

import pytest

from test_pr_replay import MACHINE, Replay, git
from vlmpath.cli import main
from vlmpath.measure.instrument_check import INSTRUMENT_CHANGED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

BENCH = r"bench_embed\.EmbedRoutine\.track_(accuracy|syncs)\('default', 'multi_region'\)"
SILENCER = ("\n\nfrom vlmpath.measure.syncs import SyncCount  # noqa: E402\n"
            "SyncCount.count = property(lambda self: 0)\n")


def test_the_silencer_appended_to_the_routine_is_red_through_ci_pr(tmp_path, monkeypatch):
    r = Replay(tmp_path)
    git(r.repo, "checkout", "-q", "-b", "silenced", r.good)
    path = r.repo / "src/vlmpath/paths/encode.py"
    path.write_text(path.read_text(encoding="utf-8") + SILENCER, encoding="utf-8")
    git(r.repo, "commit", "-q", "-am", "tidy the encoder")
    head = git(r.repo, "rev-parse", "HEAD")
    for k in list(os.environ):
        if k.startswith(("VLMPATH_", "ASV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("VLMPATH_SCALE", "tiny")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "out"
    code = main(["ci", "pr", "--repo", str(r.repo), "--base", r.good, "--head", head, "--machine", MACHINE,
                 "--bench", BENCH, "--results-dir", str(r.results), "--config", str(r.config), "--out", str(out)])
    comment = (out / "comment.md").read_text(encoding="utf-8")
    assert code == 1, comment[:2000]
    assert "No regressions" not in comment.splitlines()[1]
    data = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    rows = [c for m in data["machines"] for c in m["comparisons"]]
    failed = [c for c in rows if c["verdict"] == "newly failing"]
    assert failed and all(INSTRUMENT_CHANGED in (c["error"] or "") for c in failed), rows
    assert "syncs.SyncCount.count" in failed[0]["error"]
