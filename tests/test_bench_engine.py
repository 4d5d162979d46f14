"""Does the asv suite measure with the engine the run names (``VLMPATH_ENGINE``)?

``benchmarks/bench_engine.py`` under the reference must reuse ``bench_embed``'s default
case (one memo, measured once); under an engine it must call the engine layer with that
spec, memoise per engine (two engines never share a number), and turn a case the engine
failed into a failed benchmark carrying the engine's message. The engine layer is faked
here (``measure_cases`` replaced); the real engine is ``tests/test_engine_pr_sglang.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlmpath.suite.record import loads_record

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("VLMPATH_FAILURES_FILE", raising=False)
    monkeypatch.delenv("VLMPATH_ENGINE", raising=False)
    monkeypatch.chdir(tmp_path)  # asv's setup_cache directory: where the memos go
    from benchmarks import bench_engine

    return bench_engine


CACHE = {"scale": "tiny", "quick": True}


class FakeEngineLayer:
    def __init__(self, **record):
        self.calls: list[tuple[str, str, int]] = []
        self.record = record

    def __call__(self, cases, engine, *, repeat, device):
        self.calls.append((engine, cases[0].workload, repeat))
        base = {"workload": cases[0].workload, "tok_per_s": 500.0, "accuracy": 1.0, "encoder_calls": 2,
                "syncs": 0, "encoder_syncs": 3, "wall_s": 0.1, "samples": [0.1], "error": None,
                "engine": engine, "engine_version": "0.5.23"}
        return [loads_record({**base, **self.record})]


def test_unset_engine_is_the_reference_and_shares_bench_embeds_case(bench, monkeypatch):
    seen = []
    monkeypatch.setattr(bench._common, "case_summary",
                        lambda case, cache: seen.append(case) or {"accuracy": 1.0, "syncs": 1, "error": None})
    assert bench.engine_label() == "reference" and bench.engine_label({"VLMPATH_ENGINE": " "}) == "reference"
    b = bench.Engine()
    assert b.track_accuracy(CACHE, "multi_region") == 1.0 and b.track_syncs(CACHE, "multi_region") == 1.0
    assert {(c.path, c.variant, c.preset) for c in seen} == {("embed", "default", "multi_region")}


def test_an_engine_run_measures_with_that_engine_once_per_preset_and_engine(bench, monkeypatch, tmp_path):
    import vlmpath.suite.engine_run as engine_run

    fake = FakeEngineLayer()
    monkeypatch.setattr(engine_run, "measure_cases", fake)
    monkeypatch.setenv("VLMPATH_ENGINE", "sglang==0.5.23")
    b = bench.Engine()
    assert b.track_encoder_syncs(CACHE, "multi_region") == 3.0
    assert b.track_tok_per_s(CACHE, "multi_region") == {"samples": [500.0], "number": 1}  # every pass a sample (issue 39)
    assert fake.calls == [("sglang==0.5.23", "multi_region", 1)]  # memoised: one measurement
    monkeypatch.setenv("VLMPATH_ENGINE", "sglang==0.5.12")
    b.track_accuracy(CACHE, "multi_region")
    assert [c[0] for c in fake.calls] == ["sglang==0.5.23", "sglang==0.5.12"]  # never shared
    assert sorted(p.name for p in tmp_path.glob("vlmpath-engine-*.json")) == [
        "vlmpath-engine-sglang__0.5.12-multi_region-tiny.json", "vlmpath-engine-sglang__0.5.23-multi_region-tiny.json"]


def test_an_engine_failure_is_a_failed_benchmark_with_the_engines_message(bench, monkeypatch, tmp_path):
    import vlmpath.suite.engine_run as engine_run

    err = "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 48"
    monkeypatch.setattr(engine_run, "measure_cases", FakeEngineLayer(tok_per_s=None, accuracy=0.5, error=err))
    monkeypatch.setenv("VLMPATH_ENGINE", "sglang@src:/x/python")
    log = tmp_path / "failures.jsonl"
    monkeypatch.setenv("VLMPATH_FAILURES_FILE", str(log))
    b = bench.Engine()
    assert b.track_accuracy(CACHE, "multi_region") == 0.5  # measured: a number, not a failure
    with pytest.raises(RuntimeError, match="split_with_sizes"):
        b.track_tok_per_s(CACHE, "multi_region")
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line == {"benchmark": "bench_engine.Engine.track_tok_per_s", "params": {"preset": "multi_region"},
                    "param_names": ["preset"], "error": err}
