"""``ci merge`` and a quick run: timings are judged by their sample counts (a quick run's one
sample is indicative by itself), never by the artifact's ``quick`` flag; exact rows gate."""

from __future__ import annotations

import json

from asv_fixtures import write_asv_run
from test_shards import MACHINE, _spec, _values
from test_shards_merge import BASE, HEAD
from vlmpath.pr import merge as ci_merge
from vlmpath.pr.outputs import RUN_SCHEMA_VERSION


def _with_samples(spec: dict, n: int) -> dict:
    """``spec`` with ``n`` samples per tok/s case: enough to be judged outside quick mode."""
    unit, names, params, values, _ = spec["bench_embed.EmbedRoutine.track_tok_per_s"]
    samples = [[v * (1 + 0.002 * (j % 3)) for j in range(n)] for v in values]
    return {**spec, "bench_embed.EmbedRoutine.track_tok_per_s": (unit, names, params, values, samples)}


def _artifact(root, quick: bool, slower: float = 1.0, acc_drop: bool = False):
    art = root / "bench-cpu"
    acc, tok = _values()
    write_asv_run(art / "results", MACHINE, BASE, _with_samples(_spec(acc, tok), 10))
    acc2 = {c: (0.5 if acc_drop and i == 0 else v) for i, (c, v) in enumerate(acc.items())}
    write_asv_run(art / "results", MACHINE, HEAD,
                  _with_samples(_spec(acc2, {c: v / slower for c, v in tok.items()}), 10))
    (art / "run.json").write_text(json.dumps({"schema_version": RUN_SCHEMA_VERSION, "base_sha": BASE,
                                              "head_sha": HEAD, "machine": MACHINE, "quick": quick, "notes": []}))
    return root


def test_a_quick_flag_in_the_artifact_never_makes_a_sampled_move_indicative(tmp_path):
    # issue 39: run.json's "quick" is the PR's word; 10 samples a side are judged by their count.
    full = ci_merge.merge_artifacts(_artifact(tmp_path / "full", False, slower=2.0), tmp_path / "m1",
                                    fail_on_regression=True)
    quick = ci_merge.merge_artifacts(_artifact(tmp_path / "quick", True, slower=2.0), tmp_path / "m2",
                                     fail_on_regression=True)
    assert full.exit_code == 1 and full.report.regressions
    assert quick.exit_code == 1 and quick.report.regressions and not quick.report.indicative_moves


def test_an_exact_drop_in_a_quick_artifact_still_gates(tmp_path):
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a", True, acc_drop=True), tmp_path / "m",
                                   fail_on_regression=True)
    assert res.exit_code == 1 and [c.unit for c in res.report.regressions] == ["fraction"]


def test_a_runs_notes_name_their_machine_once(tmp_path):
    """flow.py already prefixes some notes with the machine; the merge prefixes only the rest."""
    root = _artifact(tmp_path / "a", False)
    run = json.loads((root / "bench-cpu" / "run.json").read_text())
    run["notes"] = [f"{MACHINE}: 2 case(s) of head's new definitions", "base measured: no trusted run"]
    (root / "bench-cpu" / "run.json").write_text(json.dumps(run))
    res = ci_merge.merge_artifacts(root, tmp_path / "m", fail_on_regression=True)
    assert f"{MACHINE}: 2 case(s) of head's new definitions" in res.notes
    assert f"{MACHINE}: base measured: no trusted run" in res.notes
    assert not [n for n in res.notes if n.startswith(f"{MACHINE}: {MACHINE}: ")], res.notes
