"""Are two serve runs judged by the metric table's rules, red for what they should be and only that?

Synthetic run files (no server): an unchanged pair is green and judged; a head whose greedy
outputs differ from base's is red on the across-side agreement naming the workload; a head
whose outputs disagree with its own solo outputs is red on the within-run agreement; a level
with failed requests is one newly failing case (never "fast"); six
interleaved rounds with head 30% slower are a paired regression, six A/A rounds with noise
are not; one round alone is indicative only.
"""

from __future__ import annotations

import copy

from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_serve import compare_serve_runs
from vlmpath.serving.run_file import SCHEMA, write_run


def _doc(tok_s: float = 8.0, outputs=("ab", "cd"), solo=("ab", "cd"), errors: int = 0, agreement=1.0) -> dict:
    case = {"workload": "video", "concurrency": 2, "prompts": 2, "repeats": 1, "completed": 2 - errors,
            "errors": errors, "early_stops": 0, "request_per_s": tok_s / 8, "input_tok_per_s": tok_s * 10,
            "output_tok_per_s": tok_s, "ttft_p50_s": 0.1, "ttft_p99_s": 0.2, "itl_p50_s": 0.01, "itl_p99_s": 0.02,
            "agreement_solo": agreement, "first_diff_solo": None,
            "error": "connection failed: ConnectionResetError" if errors else None,
            "samples": {"output_tok_per_s": [tok_s]}, "rids": [0, 1], "outputs": list(outputs)}
    return {"schema": SCHEMA, "server": {"kind": "transformers"}, "solo": {"video": list(solo)}, "cases": [case]}


def _files(tmp_path, side: str, docs) -> list[str]:
    out = []
    for i, d in enumerate(docs):
        p = tmp_path / f"{side}-{i}.json"
        write_run(p, d)
        out.append(str(p))
    return out


def _verdicts(report) -> dict[str, Verdict]:
    return {c.benchmark.rsplit(".", 1)[1]: c.verdict for c in report.all()}


def test_an_unchanged_pair_is_green_and_judged(tmp_path):
    report, diffs = compare_serve_runs(_files(tmp_path, "b", [_doc()]), _files(tmp_path, "h", [_doc()]))
    assert report.exit_code() == 0 and report.judged >= 10 and report.regressions == [] and diffs == []
    assert set(_verdicts(report).values()) == {Verdict.UNCHANGED}


def test_outputs_that_differ_from_base_are_red_naming_the_workload(tmp_path):
    report, diffs = compare_serve_runs(_files(tmp_path, "b", [_doc()]),
                                       _files(tmp_path, "h", [_doc(outputs=("ab", "cX"), solo=("ab", "cX"))]))
    red = [c for c in report.regressions]
    assert [c.benchmark.rsplit(".", 1)[1] for c in red] == ["track_serve_agreement_base"]
    assert dict(red[0].params) == {"workload": "video", "concurrency": "2"} and red[0].head == 0.5
    assert diffs == [("video", 2, 1)] and report.exit_code() == 1


def test_outputs_that_differ_from_their_solo_run_are_red(tmp_path):
    report, _ = compare_serve_runs(_files(tmp_path, "b", [_doc()]), _files(tmp_path, "h", [_doc(agreement=0.5)]))
    assert _verdicts(report)["track_serve_agreement_solo"] is Verdict.REGRESSION and report.exit_code() == 1


def test_failed_requests_are_one_failure_not_speed(tmp_path):
    report, _ = compare_serve_runs(_files(tmp_path, "b", [_doc()]),
                                   _files(tmp_path, "h", [_doc(tok_s=80.0, errors=1)]))
    # The comparison names a failed case once: its other rows fold into that one failure.
    assert [c.verdict for c in report.all()] == [Verdict.NEWLY_FAILING]
    assert "1 of 2 requests failed" in report.all()[0].reason and report.exit_code() == 1


def _rounds(factor: float, jitter) -> list[dict]:
    return [_doc(tok_s=8.0 * factor * j) for j in jitter]


def test_paired_rounds_catch_a_slowdown_and_pass_an_aa_pair(tmp_path):
    drift = (1.0, 1.3, 0.8, 1.1, 0.9, 1.2)  # the box's load moving both sides of a round alike
    base = _files(tmp_path, "b", _rounds(1.0, drift))
    slow, _ = compare_serve_runs(base, _files(tmp_path, "h", _rounds(0.7, drift)))
    tok = next(c for c in slow.all() if c.benchmark.endswith("track_serve_output_tok_per_s"))
    assert tok.verdict is Verdict.REGRESSION and tok.method == "paired" and not tok.indicative
    noise = (1.03, 0.98, 1.02, 0.97, 1.01, 0.99)
    aa, _ = compare_serve_runs(base, _files(tmp_path, "a", [_doc(tok_s=8.0 * d * n) for d, n in zip(drift, noise)]))
    assert aa.regressions == [] and aa.exit_code() == 0


def test_one_round_is_indicative_and_does_not_gate(tmp_path):
    report, _ = compare_serve_runs(_files(tmp_path, "b", [_doc()]), _files(tmp_path, "h", [_doc(tok_s=4.0)]))
    tok = next(c for c in report.all() if c.benchmark.endswith("track_serve_output_tok_per_s"))
    assert tok.verdict is Verdict.REGRESSION and tok.indicative and report.exit_code() == 0


def test_serve_compare_cli_exits_1_on_a_regression_and_2_on_a_bad_file(tmp_path, capsys):
    base = _files(tmp_path, "b", [_doc()])
    head = _files(tmp_path, "h", [_doc(outputs=("zz", "cd"))])
    assert main(["serve-compare", "--base", *base, "--head", *head]) == 1
    assert "outputs differ: video c=2, first at character 0" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "nope"}')
    assert main(["serve-compare", "--base", str(bad), "--head", *head]) == 2
    assert main(["serve-compare", "--base", *base, *base, "--head", *head]) == 2
    assert "bad.json" in capsys.readouterr().err


def test_a_base_level_head_lacks_is_not_judged_green(tmp_path):
    head = copy.deepcopy(_doc())
    head["cases"][0]["workload"] = "multi_region"
    head["solo"] = {"multi_region": ["ab", "cd"]}
    report, _ = compare_serve_runs(_files(tmp_path, "b", [_doc()]), _files(tmp_path, "h", [head]))
    # base's levels vanished on head (issue 39): red, never green
    assert report.exit_code() == 1 and report.regressions
    assert all(c.reason.startswith("vanished on head") for c in report.regressions)


def test_a_timing_round_without_the_alone_reference_has_no_agreement_row_not_a_failure(tmp_path):
    timing = _doc()
    timing["cases"][0]["agreement_solo"] = None
    timing["solo"] = {}
    report, _ = compare_serve_runs(_files(tmp_path, "b", [timing]), _files(tmp_path, "h", [copy.deepcopy(timing)]))
    leaves = _verdicts(report)
    assert "track_serve_agreement_solo" not in leaves
    assert leaves["track_serve_agreement_base"] is Verdict.UNCHANGED and report.exit_code() == 0
