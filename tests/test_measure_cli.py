"""``vlmpath measure``: JSON Lines records, stage selection, and clear errors for bad names."""

from __future__ import annotations

import json

import pytest

from vlmpath.cli import main
from vlmpath.engines.pipelines import DEFAULT_PIPELINE, LEGACY_PIPELINE

REQUIRED_KEYS = {"workload", "scale", "pipeline", "tok_per_s", "accuracy", "max_abs_err",
                 "encoder_calls", "cache_hits", "wall_s", "error", "syncs", "encoder_syncs",
                 "sync_events"}


def _records(path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_measure_json_named_pipelines(tmp_path, capsys):
    out = tmp_path / "res" / "measure.jsonl"  # the directory is created
    rc = main(["measure", "--workload", "cache_reuse", "--pipeline", "default", "--pipeline", "legacy",
               "--repeat", "1", "--device", "cpu", "--json", str(out)])
    assert rc == 0
    recs = _records(out)
    assert len(recs) == 2
    for r in recs:
        assert REQUIRED_KEYS <= set(r)
        assert r["workload"] == "cache_reuse" and r["scale"] == "tiny"
        assert r["error"] is None and r["accuracy"] == 1.0 and r["tok_per_s"] > 0
        assert r["encoder_calls"] >= 1 and r["cache_hits"] > 0 and len(r["samples"]) == 1
    default, legacy = recs
    assert default["pipeline"] == DEFAULT_PIPELINE.to_dict()
    assert legacy["pipeline"] == LEGACY_PIPELINE.to_dict()
    assert default["syncs"] == 0 and default["sync_events"] == {}
    assert legacy["syncs"] >= 2 and set(legacy["sync_events"]) == {"Tensor.item", "aten.nonzero"}
    assert default["encoder_syncs"] == legacy["encoder_syncs"] >= 0
    table = capsys.readouterr().out
    assert "cache_reuse" in table and "where_index" in table and "masked_scatter" in table


def test_measure_stage_selection(tmp_path):
    out = tmp_path / "sel.jsonl"
    rc = main(["measure", "--workload", "video", "--encode", "per_request", "--inject", "where_index",
               "--inject", "masked_scatter", "--count", "mask_sum", "--hash", "xxh3", "--repeat", "1",
               "--no-syncs", "--json", str(out)])
    assert rc == 0
    recs = _records(out)
    assert [r["pipeline"] for r in recs] == [
        {"encode": "per_request", "inject": inj, "count": "mask_sum", "hash": "xxh3"}
        for inj in ("where_index", "masked_scatter")
    ]
    for r in recs:
        assert r["workload"] == "video" and r["error"] is None and r["accuracy"] == 1.0
        assert r["syncs"] is None and r["encoder_syncs"] is None and r["sync_events"] == {}


@pytest.mark.parametrize("args, message", [
    (["--encode", "nope"], "unknown encode strategy 'nope': choose one of batched, batched_by_span, per_request"),
    (["--inject", "nope"], "unknown inject strategy 'nope': choose one of cumsum_index_copy, masked_scatter, where_index"),
    (["--count", "nope"], "unknown count strategy 'nope': choose one of mask_sum, offsets"),
    (["--hash", "nope"], "unknown hash"),
    (["--workload", "nope"], "unknown workload preset 'nope': choose one of"),
    (["--workload", "trace:/nonexistent/t.jsonl"], "does not exist"),
    (["--repeat", "0"], "--repeat must be a positive integer at most 1000, got 0"),
])
def test_measure_bad_names_exit_2(tmp_path, capsys, args, message):
    out = tmp_path / "never.jsonl"
    rc = main(["measure", "--workload", "video", *args, "--json", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    # Names are checked before any case runs: the error is all there is (no progress bar).
    assert err.startswith("vlmpath measure: error: ") and message in err
    assert "Traceback" not in err
    assert not out.exists()


def test_measure_malformed_trace_fails_before_running(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"segments": [{"text": 4}]}\n{"segments": [{"audio": 1}]}\n', encoding="utf-8")
    rc = main(["measure", "--workload", "video", "--workload", f"trace:{trace}", "--repeat", "1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("vlmpath measure: error: ")
    assert f"{trace}:2" in err and "unknown segment kind 'audio'" in err


def test_measure_bad_pipeline_is_a_usage_error_and_a_bad_scale_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["measure", "--pipeline", "fastest"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["measure", "--scale", "huge"]) == 2  # Scale.parse, while the arguments are parsed
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vlmpath measure: error: --scale 'huge' is not a scale: choose one of tiny, full"]
