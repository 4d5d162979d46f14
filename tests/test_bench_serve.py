"""Are the serve asv benchmarks opt-in, one per serve row, and judged by the metric table?

``benchmarks/bench_serve.py`` without a model directory starts nothing and is asv's
"skipped" (``NotImplementedError`` in setup), never a failure; with one (the server faked
here: ``launched``/``run_bench`` replaced; the real server is tests/test_serve_e2e.py) every
``serve_*`` row but the across-side one is a ``track_`` method with the row's unit, timings
return their repeats as samples, a failed level fails its timing tracks and reports its
errors; the rows are judged with the table's direction and exactness: a planted agreement
drop is red, an unchanged pair green. ``vlmpath run --serve`` hands the model to the
benchmarks; a machine's own setting is kept when the run names none.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import METRIC_BY_NAME
from vlmpath.suite.bench_env import SERVE_MODEL_ENV, BenchEnv

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("VLMPATH_FAILURES_FILE", raising=False)
    monkeypatch.delenv(SERVE_MODEL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    from benchmarks import bench_serve

    return bench_serve


def _case(workload="video", c=1, errors=0, agreement=1.0):
    return {"workload": workload, "concurrency": c, "errors": errors, "error": "HTTP 500" if errors else None,
            "request_per_s": 2.0, "output_tok_per_s": 16.0, "input_tok_per_s": 300.0, "ttft_p50_s": 0.1,
            "ttft_p99_s": 0.2, "itl_p50_s": 0.01, "itl_p99_s": 0.02, "agreement_solo": agreement,
            "samples": {"request_per_s": [1.9, 2.0, 2.1], "output_tok_per_s": [15.0, 16.0, 17.0]}}


def test_without_a_model_nothing_starts_and_every_track_is_skipped(bench, monkeypatch):
    import vlmpath.serving.launch as launch

    monkeypatch.setattr(launch, "launched", lambda *a, **k: pytest.fail("a server was started"))
    cache = bench.serve_cache()
    assert cache is not None and cache["doc"] is None  # asv passes a None cache to no method
    b = bench.Serve()
    with pytest.raises(NotImplementedError, match="opt-in"):
        b.setup(cache, "video", 1)
    with pytest.raises(NotImplementedError):
        b.track_serve_request_per_s(cache, "video", 1)


def test_one_track_per_serve_row_with_its_unit_and_the_measured_values(bench, monkeypatch, tmp_path):
    rows = [m for m in METRIC_BY_NAME.values() if m.name.startswith("serve_")]
    tracks = {n for n in dir(bench.Serve) if n.startswith("track_")}
    # Across sides and the labelled set (a file given to serve-bench): no track of their own.
    assert tracks == {m.track_method for m in rows if m.name not in ("serve_agreement_base", "serve_labelled_score")}
    assert all(getattr(bench.Serve, m.track_method).unit == m.unit for m in rows if m.track_method in tracks)

    seen = {}

    @contextlib.contextmanager
    def fake_launched(kind, model, **kw):
        seen.update(kind=kind, model=model, **kw)
        yield "server"

    import vlmpath.serving.bench as sb
    import vlmpath.serving.launch as launch

    monkeypatch.setattr(launch, "launched", fake_launched)
    monkeypatch.setattr(sb, "run_bench", lambda server, settings: {
        "cases": [_case(), _case(c=4, errors=2, agreement=0.5)], "settings": settings})
    monkeypatch.setenv(SERVE_MODEL_ENV, str(tmp_path / "model"))
    cache = bench.serve_cache()
    assert seen["kind"] == "transformers" and seen["model"] == str(tmp_path / "model")
    settings = cache["doc"]["settings"]
    assert settings.workloads == ("many_small_images", "video", "multi_region")
    assert settings.repeats == 3 and settings.solo  # within-run agreement measured
    b = bench.Serve()
    assert b.track_serve_request_per_s(cache, "video", 1) == {"samples": [1.9, 2.0, 2.1], "number": 1}
    assert b.track_serve_agreement_solo(cache, "video", 1) == 1.0
    with pytest.raises(RuntimeError, match="2 requests failed"):  # never "fast"
        b.track_serve_output_tok_per_s(cache, "video", 4)
    assert b.track_serve_errors(cache, "video", 4) == 2.0 and b.track_serve_agreement_solo(cache, "video", 4) == 0.5
    with pytest.raises(NotImplementedError):
        b.setup(cache, "multi_region", 1)  # not measured: skipped


def _run(commit: str, rows: dict[str, tuple[float, tuple[float, ...]]]) -> RunResults:
    metrics = tuple(Metric("m", f"bench_serve.Serve.{name}", (("workload", "video"), ("concurrency", "1")),
                           METRIC_BY_NAME[name.removeprefix("track_")].unit, v, samples=s, commit=commit)
                    for name, (v, s) in rows.items())
    return RunResults(commit, (MachineRun("m", commit, metrics),))


def test_the_rows_are_judged_by_the_table_agreement_exact():
    same = {"track_serve_request_per_s": (2.0, (1.9, 2.0, 2.1)), "track_serve_agreement_solo": (1.0, ())}
    green = compare(_run("a", same), _run("b", same))
    assert green.regressions == [] and green.judged > 0
    dropped = {**same, "track_serve_agreement_solo": (0.9, ())}
    red = compare(_run("a", same), _run("b", dropped))
    assert [c.benchmark for c in red.regressions] == ["bench_serve.Serve.track_serve_agreement_solo"]


def test_run_serve_hands_the_model_to_the_benchmarks_and_a_machine_setting_is_kept(tmp_path):
    env = BenchEnv(serve_model="/m").apply({})
    assert env[SERVE_MODEL_ENV] == "/m" and BenchEnv.read(env).serve_model == "/m"
    assert BenchEnv().apply({SERVE_MODEL_ENV: "/machine"})[SERVE_MODEL_ENV] == "/machine"
    from vlmpath.cli.run import _serve_model

    with pytest.raises(VlmpathError, match="--serve .*no config.json"):
        _serve_model(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert _serve_model(str(tmp_path)) == str(tmp_path.resolve())
