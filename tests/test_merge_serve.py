"""``ci merge`` re-judges an artifact's serve rows from its own serve rounds (``pr.merge_serve``),
as its ``ci pr --serve`` did: throughput on the interleaved pairs, agreement exact; never from
the artifact's comparison.json or run.json verdicts (PR-written).

Artifacts are written as ``ci pr --serve`` writes them (run.json with ``serve`` and
``serve_rounds``, results/ in asv's format, serve/{base,head}-<i>.json run files); the merge
is the real ``merge_artifacts``.
"""

from __future__ import annotations

import json
from pathlib import Path

from asv_fixtures import write_asv_run
from test_shards import MACHINE, _spec, _values
from test_shards_merge import BASE, HEAD
from vlmpath.compare.comparison import EXIT_INCOMPLETE, Verdict
from vlmpath.pr import merge as ci_merge
from vlmpath.pr.artifact import RUN_SCHEMA_VERSION
from vlmpath.serving.run_file import SCHEMA, write_run

TOK = "serve.Serve.track_serve_output_tok_per_s"
AGREE = "serve.Serve.track_serve_agreement_base"


def _case(workload: str, tok: float, outputs: list[str]) -> dict:
    return {"workload": workload, "concurrency": 2, "prompts": 2, "repeats": 1, "completed": 2, "errors": 0,
            "early_stops": 0, "request_per_s": tok / 8, "input_tok_per_s": tok * 10, "output_tok_per_s": tok,
            "ttft_p50_s": 0.1, "ttft_p99_s": 0.2, "itl_p50_s": 0.01, "itl_p99_s": 0.02, "agreement_solo": 1.0,
            "first_diff_solo": None, "error": None, "samples": {"output_tok_per_s": [tok * 0.99, tok, tok * 1.01]},
            "rids": [0, 1], "outputs": outputs}


def _claim(verdict: str) -> dict:
    """A comparison.json as the PR's job could write it: every serve row claimed ``verdict``."""
    rows = [{"benchmark": b, "params": [["workload", "video"], ["concurrency", "2"]], "verdict": verdict}
            for b in (TOK, AGREE)]
    return {"machines": [{"machine": MACHINE, "comparisons": rows}], "regressions": 0 if verdict == "unchanged" else 2}


def _artifact(root: Path, *, slower: float = 1.0, head_text: str = "cd", rounds: int = 6,
              claim: str = "unchanged", drop: str | None = None) -> Path:
    """One machine's artifact; head's video level ``slower`` times slower in every round (each
    round drifting alike on both sides: only pairing sees through it)."""
    art = root / "bench-cpu"
    acc, tok = _values()
    for c in (BASE, HEAD):
        write_asv_run(art / "results", MACHINE, c, _spec(acc, tok))
    for i in range(rounds):
        drift = 1 + 0.04 * (i % 3)
        for side, factor, text in (("base", 1.0, "cd"), ("head", slower, head_text)):
            cases = [_case("video", 80.0 * drift / factor, ["ab", text]), _case("multi_region", 50.0 * drift, ["x", "y"])]
            write_run(art / "serve" / f"{side}-{i}.json", {"schema": SCHEMA, "server": {"kind": "transformers"},
                                                           "solo": {"video": ["ab", text]}, "cases": cases})
    if drop:
        (art / "serve" / drop).unlink()
    (art / "run.json").write_text(json.dumps({
        "schema_version": RUN_SCHEMA_VERSION, "base_sha": BASE, "head_sha": HEAD, "machine": MACHINE,
        "quick": False, "interleave": None, "shard": None, "notes": [], "serve": "/models/tiny",
        "serve_rounds": rounds, "regressions": 0 if claim == "unchanged" else 2,
        "exit_code": 0 if claim == "unchanged" else 1}))
    (art / "comparison.json").write_text(json.dumps(_claim(claim)))
    return root


def _row(res, bench=TOK, workload="video"):
    return next(c for c in res.report.all() if c.benchmark == bench and dict(c.params)["workload"] == workload)


def test_a_planted_serve_slowdown_in_the_rounds_is_red_after_merge_naming_the_workload(tmp_path):
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a", slower=1.3), tmp_path / "m", fail_on_regression=True)
    row = _row(res)
    assert res.exit_code == 1 and row.verdict is Verdict.REGRESSION and row.method == "paired"
    # Only the planted level's throughput rows; the other workload and the agreement stay green.
    assert {dict(r.params)["workload"] for r in res.report.regressions} == {"video"}
    assert _row(res, workload="multi_region").verdict is Verdict.UNCHANGED
    assert _row(res, AGREE).verdict is Verdict.UNCHANGED
    assert any("serve timings judged on paired rounds" in n for n in res.report.notes)
    comment = (tmp_path / "m" / "comment.md").read_text()
    assert any("track\\_serve\\_output\\_tok\\_per\\_s" in ln and "workload=video" in ln and "regression" in ln
               for ln in comment.splitlines())


def test_an_unchanged_served_pair_is_green_with_its_serve_rows_judged_on_pairs(tmp_path):
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a"), tmp_path / "m", fail_on_regression=True)
    serve = [c for c in res.report.all() if c.benchmark.startswith("serve.")]
    assert res.exit_code == 0 and not res.report.regressions and not res.report.not_judged
    assert {c.method for c in serve if c.benchmark == TOK} == {"paired"}
    assert _row(res, AGREE).verdict is Verdict.UNCHANGED and _row(res).verdict is Verdict.UNCHANGED


def test_the_rounds_win_over_the_artifacts_claimed_serve_verdict(tmp_path):
    # Claims green, rounds slower: red. Claims red, rounds unchanged: green.
    lied_green = ci_merge.merge_artifacts(_artifact(tmp_path / "a", slower=1.3, claim="unchanged"),
                                          tmp_path / "m1", fail_on_regression=True)
    lied_red = ci_merge.merge_artifacts(_artifact(tmp_path / "b", claim="regression"), tmp_path / "m2",
                                        fail_on_regression=True)
    assert lied_green.exit_code == 1 and _row(lied_green).verdict is Verdict.REGRESSION
    assert lied_red.exit_code == 0 and _row(lied_red).verdict is Verdict.UNCHANGED


def test_head_answering_differently_is_red_on_the_exact_agreement_row(tmp_path):
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a", head_text="cX"), tmp_path / "m", fail_on_regression=True)
    row = _row(res, AGREE)
    assert res.exit_code == 1 and row.verdict is Verdict.REGRESSION and dict(row.params)["workload"] == "video"
    assert f"{MACHINE}: served outputs differ: video c=2, first at character 1" in res.report.notes


def test_a_claimed_serve_run_with_a_missing_round_is_named_incomplete_never_green(tmp_path):
    res = ci_merge.merge_artifacts(_artifact(tmp_path / "a", drop="head-3.json"), tmp_path / "m",
                                   fail_on_regression=True)
    assert res.exit_code == EXIT_INCOMPLETE
    assert not [c for c in res.report.all() if c.benchmark.startswith("serve.")]
    assert any("serve/head-3.json is missing" in n and "not judged" in n for n in res.report.notes)


def test_a_serve_folder_that_is_a_link_is_not_followed(tmp_path):
    root = _artifact(tmp_path / "a")
    (root / "bench-cpu" / "serve").rename(tmp_path / "elsewhere")
    (root / "bench-cpu" / "serve").symlink_to(tmp_path / "elsewhere")
    res = ci_merge.merge_artifacts(root, tmp_path / "m", fail_on_regression=True)
    assert res.exit_code == EXIT_INCOMPLETE and any("serve/ is missing (or a link)" in n for n in res.report.notes)


def test_a_malformed_serve_round_or_round_count_is_named_not_read(tmp_path):
    root = _artifact(tmp_path / "a")
    (root / "bench-cpu" / "serve" / "base-0.json").write_text(json.dumps({"schema": SCHEMA, "cases": "lots"}))
    res = ci_merge.merge_artifacts(root, tmp_path / "m", fail_on_regression=True)
    assert res.exit_code == EXIT_INCOMPLETE and any("base-0.json" in n and "cases" in n for n in res.report.notes)
    root = _artifact(tmp_path / "b")
    run = json.loads((root / "bench-cpu" / "run.json").read_text())
    (root / "bench-cpu" / "run.json").write_text(json.dumps({**run, "serve_rounds": 10 ** 9}))
    res = ci_merge.merge_artifacts(root, tmp_path / "m2", fail_on_regression=True)
    assert res.exit_code == EXIT_INCOMPLETE and any("serve_rounds" in n for n in res.report.notes)
