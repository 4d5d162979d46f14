"""Does every bad input of issue 14 get one clear line (exit 2), before any work, and
nothing half-written?

Each case is what a new user once hit as a traceback, a silent wrong answer, or a
measurement that ran before failing on its output path. Shape of every check: exit code 2,
stderr is one line ``vlmpath <cmd>: error: ...`` naming the input and the fix, no
traceback, and no output file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from asv_fixtures import sha, write_asv_run
from log_scan import assert_inert, content_lines

from vlmpath.cli import main
from vlmpath.core.errors import VlmpathError
from vlmpath.core.validate import LIMITS, check_int, check_output_file

ROOT = Path(__file__).resolve().parents[1]


def _one_line_error(capsys, command: str, *needles: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert_inert(err)
    lines = content_lines(err)  # a privileged command's error is fenced (render.job_log)
    assert len(lines) == 1, err
    assert lines[0].startswith(f"vlmpath {command}: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def no_measuring(monkeypatch):
    """Fails the test if a case is measured: every check must come before that."""
    import vlmpath.suite.measure as sm

    def boom(*a, **k):
        raise AssertionError("a case was measured before the input check")

    monkeypatch.setattr(sm, "measure_case", boom)


# --- traces ----------------------------------------------------------------------------
TRACES = [
    (b'\xff\xfe{"segments": [{"text": 4}]}\n', ["not UTF-8", "byte 0xff", "save the trace as UTF-8"]),
    (b'{"segments": [{"text": true}]}\n', ["text length must be an integer, got True"]),
    (b'{"segments": [{"image": [448, false]}]}\n', ["width must be an integer, got False"]),
    (b'{"segments": [{"video_grid": [100000, 100000, 100000]}]}\n',
     ["vision patches, over the tiny limit of 4096 per item", "--scale full"]),
    (b'{"segments": [{"text": 100000000000}]}\n', ["text length must be a non-negative integer at most 1000000"]),
    (b'{"segments": [{"image": [100000, 100000]}]}\n', ["65536 vision patches, over the tiny limit of 4096"]),
    (b'{"segments": [{"text": 40000}]}\n', ["40000 prefill tokens, over the tiny limit of 32768"]),
    (b'{"arrival": NaN, "segments": []}\n', ["'arrival' must be a number (not a boolean, NaN or Infinity)"]),
]


@pytest.mark.parametrize("data, needles", TRACES)
def test_bad_trace_is_one_line_before_any_case(tmp_path, capsys, no_measuring, data, needles):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(data)
    out = tmp_path / "never.jsonl"
    rc = main(["measure", "--workload", f"trace:{trace}", "--json", str(out)])
    assert rc == 2
    _one_line_error(capsys, "measure", str(trace), *needles)
    assert not out.exists()


def test_trace_path_that_is_a_directory_says_so(tmp_path, capsys, no_measuring):
    assert main(["measure", "--workload", f"trace:{tmp_path}"]) == 2
    _one_line_error(capsys, "measure", "is a directory, not a file", "trace:FILE.jsonl")


def test_limits_are_stated_and_the_presets_fit_them():
    # The limits refuse the sizes yet let every preset through at its scale.
    from vlmpath.measure.workload import PRESETS, preset

    for scale, lim in LIMITS.items():
        for name in PRESETS:
            wl = preset(name, scale)
            assert max(it.feature.shape[0] for it in wl.items) <= lim.item_patches
            assert max(r.length for r in wl.requests) <= lim.request_tokens
    assert LIMITS["tiny"].item_patches < 100_000 * 100_000 // 196


def test_booleans_do_not_pass_integer_checks():
    with pytest.raises(VlmpathError, match="must be an integer, got True"):
        check_int(True, "x")
    assert check_int(3, "x") == 3
    with pytest.raises(VlmpathError, match="at most 10"):
        check_int(11, "x", hi=10)


# --- the mixed trace -------------------------------------------------------------------
def test_mixed_trace_measures_every_correct_strategy_at_accuracy_1(tmp_path):
    # regions + plain image + video in one trace: regions items go through the resampler,
    # the others keep the tower's rows (before: every strategy failed at accuracy 0).
    from vlmpath.engines.pipelines import Pipeline
    from vlmpath.paths.encode import ENCODE_STRATEGIES
    from vlmpath.suite.measure import Case, Session, measure_case

    trace = tmp_path / "mixed.jsonl"
    trace.write_text(
        '{"segments": [{"text": 6}, {"regions": [[224, 224], [112, 112]]}, {"text": 3}]}\n'
        '{"segments": [{"text": 5}, {"image": [224, 224]}, {"video_grid": [2, 8, 8]}, {"text": 2}]}\n'
        '{"segments": [{"regions": [[112, 112]]}, {"image_grid": [1, 4, 4]}]}\n', encoding="utf-8")
    session = Session("cpu")
    pipes = [Pipeline(encode=e) for e in ENCODE_STRATEGIES.default_names()]
    pipes += [Pipeline(inject="where_index", count="mask_sum")]
    for p in pipes:
        r = measure_case(Case(f"trace:{trace}", p), session, repeat=1, count=False)
        assert r.error is None and r.accuracy == 1.0 and r.items == 5, (p, r.error)


def test_mixed_trace_routes_per_item_in_one_tower_call():
    # Planted mistake: were a plain image resampled, it would return 64 rows, not 16.
    from vlmpath.measure.encoders import build_encoder
    from vlmpath.measure.traces import parse_trace_bytes
    from vlmpath.measure.workload import build_requests

    trace = parse_trace_bytes(b'{"segments": [{"regions": [[224, 224]]}, {"image_grid": [1, 8, 8]}]}\n', "t")
    items = build_requests(trace.specs, 100, 0, trace.family)[0].items
    enc = build_encoder("multi_region", "tiny")
    out = enc.encode(items)
    assert out.item_rows == (64, 16) and out.embeddings.shape[0] == 80
    assert [enc.expected_rows(it) for it in items] == [64, 16]


# --- measure's other inputs --------------------------------------------------------------
@pytest.mark.parametrize("make, needles", [
    (lambda p: p, ["--json", "is a directory, not a file"]),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt" / "out.jsonl", ["is a file, not a directory"]),
])
def test_unwritable_json_is_refused_before_measuring(tmp_path, capsys, no_measuring, make, needles):
    target = make(tmp_path)
    assert main(["measure", "--workload", "video", "--json", str(target)]) == 2
    _one_line_error(capsys, "measure", *needles)


def test_output_check_accepts_a_new_file_in_new_directories(tmp_path):
    assert check_output_file(tmp_path / "a" / "b" / "c.jsonl", "--json") == tmp_path / "a" / "b" / "c.jsonl"
    assert not (tmp_path / "a").exists()  # checking creates nothing


def test_bad_devices(capsys, no_measuring, monkeypatch):
    assert main(["measure", "--workload", "video", "--device", "banana"]) == 2
    _one_line_error(capsys, "measure", "--device 'banana' is not a device", "cpu, cuda or cuda:N")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["measure", "--workload", "video", "--device", "cuda"]) == 2
    _one_line_error(capsys, "measure", "sees no CUDA or ROCm GPU", "--device cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert main(["measure", "--workload", "video", "--device", "cuda:2"]) == 2
    _one_line_error(capsys, "measure", "has 2 GPU(s)")


def test_named_pipeline_with_stage_flags_is_refused(capsys, no_measuring):
    assert main(["measure", "--workload", "video", "--pipeline", "legacy", "--encode", "per_request"]) == 2
    _one_line_error(capsys, "measure", "--pipeline legacy sets every stage", "--encode per_request",
                    "drop --pipeline")


def _fake_measure(monkeypatch, errors):
    """measure_case returning records whose errors are ``errors`` in turn (the exit code
    and the table are what is tested, not the measurement)."""
    import dataclasses

    import vlmpath.suite.measure as sm
    from vlmpath.suite.record import CaseRecord

    it = iter(errors)

    def fake(case, session, **k):
        return CaseRecord(workload=case.workload, scale="tiny", pipeline=case.pipeline.to_dict(),
                          tok_per_s=None, accuracy=0.0, max_abs_err=None, encoder_calls=1, cache_hits=0,
                          wall_s=0.1, samples=(0.1,), error=next(it), prefill_tokens=10, steps=1,
                          failed_steps=1, items=1, placed=0, hash_s=0.0, sha256_digests=0, syncs=None,
                          encoder_syncs=None)

    monkeypatch.setattr(sm, "measure_case", fake)
    return dataclasses


LONG = "LengthMismatchError: item 0x2b16 has 162 placeholder tokens but the encoder returned 64 rows (region 3)"


def test_measure_exits_1_when_every_case_failed_and_shows_the_whole_error(tmp_path, capsys, monkeypatch):
    _fake_measure(monkeypatch, [LONG, LONG])
    rc = main(["measure", "--workload", "video", "--encode", "batched", "--encode", "per_request",
               "--device", "cpu"])
    assert rc == 1
    cap = capsys.readouterr()
    assert len(LONG) > 60 and cap.out.count(LONG) == 2  # not cut to 60 characters
    assert "every case failed (2)" in cap.err


def test_measure_exits_0_when_a_case_succeeds(tmp_path, capsys, monkeypatch):
    _fake_measure(monkeypatch, [LONG, None])
    assert main(["measure", "--workload", "video", "--encode", "batched", "--encode", "per_request",
                 "--device", "cpu"]) == 0
    assert "every case failed" not in capsys.readouterr().err


# --- results files -----------------------------------------------------------------------
SPEC = {"bench_x.A.track_tok_per_s": ("tok/s", ["preset"], [["a", "b"]], [1.0, 2.0], None)}


def _results(tmp_path: Path) -> tuple[Path, str, str]:
    res = tmp_path / "res"
    base, head = sha("base"), sha("head")
    write_asv_run(res, "m1", base, SPEC)
    write_asv_run(res, "m1", head, SPEC)
    return res, base, head


def _corrupt_value(res: Path, commit: str) -> Path:
    f = next((res / "m1").glob(f"{commit[:8]}-*.json"))
    d = json.loads(f.read_text(encoding="utf-8"))
    # A number where asv writes the list of values: the layout is broken (an error). A
    # string value in the list is not judged instead (test_hostile_corpus).
    d["results"]["bench_x.A.track_tok_per_s"][0] = 5
    f.write_text(json.dumps(d), encoding="utf-8")
    return f


def test_compare_on_a_wrong_typed_value_is_one_line(tmp_path, capsys):
    res, base, head = _results(tmp_path)
    assert main(["compare", base, head, "--results", str(res), "--no-fail"]) == 0
    capsys.readouterr()
    f = _corrupt_value(res, head)
    md = tmp_path / "c.md"
    assert main(["compare", base, head, "--results", str(res), "--markdown", str(md)]) == 2
    _one_line_error(capsys, "compare", f"corrupted results file {f}", "wrong-typed value", "delete it or re-run")
    assert not md.exists()


def _artifact(root: Path, res: Path, base: str, head: str) -> None:
    import shutil

    art = root / "bench-cpu"
    shutil.copytree(res, art / "results")
    (art / "run.json").write_text(json.dumps({"schema_version": 1, "base_sha": base, "head_sha": head,
                                              "machine": "m1"}), encoding="utf-8")
    (art / "pr-number").write_text("7\n", encoding="utf-8")


def test_ci_merge_on_a_wrong_typed_value_leaves_no_partial_output(tmp_path, capsys):
    res, base, head = _results(tmp_path)
    _artifact(tmp_path / "arts", res, base, head)
    good = tmp_path / "good"
    assert main(["ci", "merge", str(tmp_path / "arts"), "--out", str(good)]) == 0
    assert (good / "results").is_dir() and (good / "pr-number").is_file()  # unchanged pair: green
    capsys.readouterr()
    _corrupt_value(tmp_path / "arts" / "bench-cpu" / "results", head)
    out = tmp_path / "merged"
    assert main(["ci", "merge", str(tmp_path / "arts"), "--out", str(out)]) == 2
    _one_line_error(capsys, "ci", "corrupted results file", "wrong-typed value")
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".merged.")]  # staging removed
    # An earlier good merge in the same --out is left as it was.
    before = sorted(p.relative_to(good) for p in good.rglob("*"))
    assert main(["ci", "merge", str(tmp_path / "arts"), "--out", str(good)]) == 2
    assert sorted(p.relative_to(good) for p in good.rglob("*")) == before


def test_corrupt_machine_file_is_named_in_a_warning(tmp_path):
    from vlmpath.compare.asv_results import load_asv

    res, base, _ = _results(tmp_path)
    assert load_asv(res, base).machine("m1").notes == ()
    (res / "m1" / "machine.json").write_text("{nope", encoding="utf-8")
    notes = load_asv(res, base).machine("m1").notes
    assert any("machine file" in n and str(res / "m1" / "machine.json") in n for n in notes)


# --- why a case failed: asv's parameter order --------------------------------------------
def test_failure_reason_survives_sorted_json_for_non_alphabetical_params(tmp_path):
    # EncodeMetrics / Inject / Count name ("strategy", "preset"): not alphabetical. The
    # filed list is dumped with sort_keys=True, which used to reorder the values.
    from vlmpath.compare.asv_results import _attach_failures
    from vlmpath.compare.records import NO_RESULT_ERROR, Metric
    from vlmpath.core.failures import Failure, failure_line, failures_path, read_failures

    line = failure_line("bench_encode.EncodeMetrics.track_calls", {"strategy": "batched", "preset": "video"},
                        "RuntimeError: boom")
    path = failures_path(tmp_path, "a" * 40)
    path.write_text(json.dumps([json.loads(line)], indent=2, sort_keys=True), encoding="utf-8")
    (f,) = read_failures(path)
    assert f.key == ("bench_encode.EncodeMetrics.track_calls", ("batched", "video"))
    metric = Metric(machine="m", benchmark=f.benchmark, params=(("strategy", "batched"), ("preset", "video")),
                    unit="calls", value=None, error=NO_RESULT_ERROR)
    (got,), _ = _attach_failures((metric,), tmp_path, "a" * 40)
    assert got.error == "RuntimeError: boom"
    # An older file (no param_names, keys sorted) still matches by names.
    old = {"benchmark": f.benchmark, "params": {"preset": "video", "strategy": "batched"}, "error": "old"}
    path.write_text(json.dumps([old], sort_keys=True), encoding="utf-8")
    (got,), _ = _attach_failures((metric,), tmp_path, "a" * 40)
    assert got.error == "old"
    # Planted: the sorted-order key the bug produced does not match asv's order.
    assert Failure.from_dict(old).key != f.key


# --- ci pr, comment, README ---------------------------------------------------------------
def test_ci_pr_side_without_results_names_its_kept_log(tmp_path):
    from vlmpath.pr.side import SuiteRequest, run_log_path, run_side

    req = SuiteRequest(commit="c" * 40, source=ROOT, bench_root=ROOT, results_dir=tmp_path / "store",
                       machine="m1", bench=None, quick=True, env={}, reports_dir=tmp_path / "out" / "runs" / "cccccccc")

    def runner(r):  # a side that writes its log and no results
        run_log_path(r).parent.mkdir(parents=True)
        run_log_path(r).write_text("asv: No benchmarks selected\n", encoding="utf-8")

    import vlmpath.pr.side as ps

    orig, ps.check_import = ps.check_import, lambda *a: None
    try:
        with pytest.raises(VlmpathError) as e:
            run_side(runner, req)
    finally:
        ps.check_import = orig
    assert str(run_log_path(req)) in str(e.value) and "No benchmarks selected" in str(e.value)


def test_comment_missing_body_points_at_the_command_that_writes_it(tmp_path, capsys):
    rc = main(["comment", "--repo", "a/b", "--pr", "1", "--body-file", str(tmp_path / "no.md"), "--dry-run"])
    assert rc == 2
    line = _one_line_error(capsys, "comment", "no.md", "vlmpath compare --markdown FILE")
    assert "vlmpath report" not in line


def test_readme_and_docs_example_outputs_are_git_ignored():
    import re

    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in docs)
    ignored = [ln.strip().lstrip("/") for ln in (ROOT / ".gitignore").read_text().splitlines()
               if ln.strip().endswith("/") and not ln.startswith("#")]
    outs = re.findall(r"--(?:json|markdown|body-file|out) ([\w./-]+)", text)
    assert len(outs) >= 4
    for o in outs:
        if o.startswith("/"):  # outside the checkout (/tmp, a container's results volume)
            continue
        assert any((o.rstrip("/") + "/").startswith(d) for d in ignored), f"an example in the docs writes {o}, not git-ignored"
