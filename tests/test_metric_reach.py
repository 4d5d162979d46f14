"""Does a metric added as ONE row of the metric table reach every place a metric shows?

The row planted here (``cache_hits``: embedding-cache hits, higher is better, exact) names
a field the measured record already has, so nothing but the table changes: the case
summary and the record's round trip, the ``vlmpath measure`` table, the asv suite's
generated ``track_`` methods (routine and engine), the engine comparison with the unit's
direction taken from the table, the PR comment and the PR chart must all carry it. Without the row,
none of them but the record does (checked first, so the test cannot pass by accident).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_records import run_from_records
from vlmpath.compare.thresholds import load_thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core import metrics
from vlmpath.core.metrics import Direction, MetricSpec
from vlmpath.render.comment import render_markdown
from vlmpath.render.report_figure import figure_marks
from vlmpath.render.report_history import pr_chart
from vlmpath.render.tables import measure_table
from vlmpath.suite.cases import record_summary
from vlmpath.suite.record import CaseRecord, dumps_record, loads_record

ROOT = Path(__file__).resolve().parents[1]
ROW = MetricSpec(name="cache_hits", unit="hits", direction=Direction.HIGHER, exact=True, fmt="count",
                 headline=False, description="embedding-cache hits over the schedule", routine=("embed", "engine"))


def _record(workload: str, hits: int) -> CaseRecord:
    return CaseRecord(workload=workload, pipeline={"encode": "engine"}, tok_per_s=100.0, accuracy=1.0,
                      encoder_calls=2, cache_hits=hits, syncs=0, encoder_syncs=0, peak_bytes=1024,
                      reserved_bytes=2048, samples=(0.1, 0.1), prefill_tokens=10, engine="sglang")


def _fresh_suite():
    """The benchmark modules imported anew (they generate their methods at import)."""
    saved = {k: v for k, v in sys.modules.items() if k == "benchmarks" or k.startswith("benchmarks.")}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(ROOT))
    try:
        return (importlib.import_module("benchmarks.bench_embed").EmbedRoutine,
                importlib.import_module("benchmarks.bench_engine"))
    finally:
        sys.path.remove(str(ROOT))
        for k in [k for k in sys.modules if k == "benchmarks" or k.startswith("benchmarks.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _reach(monkeypatch, tmp_path) -> dict[str, bool]:
    """Where ``cache_hits`` shows, place by place."""
    base, head = _record("mixed", 5), _record("mixed", 2)
    embed, bench_engine = _fresh_suite()
    report = compare(run_from_records([base], machine="m", commit="a" * 40),
                     run_from_records([head], machine="m", commit="b" * 40), load_thresholds())
    row = next((c for c in report.all() if c.benchmark.endswith(".track_cache_hits")), None)
    comment = render_markdown(report).replace("\\", "")  # markdown escapes: the words, not the escaping
    marks = figure_marks(pr_chart(report, thresholds=load_thresholds()))
    return {
        "summary": record_summary(base).get("cache_hits") == 5,
        "record": loads_record(dumps_record(base)).cache_hits == 5,
        "measure table": "cache_hits" in measure_table([base]).splitlines()[0],
        "asv routine": getattr(getattr(embed, "track_cache_hits", None), "unit", None) == "hits",
        "asv engine": hasattr(bench_engine.Engine, "track_cache_hits") and "cache_hits" in bench_engine.SUMMARY_KEYS,
        # higher is better and exact, from the row: 5 -> 2 hits is a regression
        "comparison": row is not None and row.verdict is Verdict.REGRESSION and row.direction == "higher",
        "comment": "Engine.track_cache_hits" in comment and "Engine.cache_hits" in comment,
        "chart": any(m.startswith("regression m cache_hits") for m in marks),
    }


def test_a_row_added_to_the_table_reaches_record_suite_comparison_and_comment(monkeypatch, tmp_path):
    before = _reach(monkeypatch, tmp_path)
    # Without the row: nowhere but the record itself (the field the row names is the measurement).
    assert [k for k, v in before.items() if v] == ["record"]
    monkeypatch.setattr(metrics, "METRICS", metrics.METRICS + (ROW,))
    reached = _reach(monkeypatch, tmp_path)
    assert reached == dict.fromkeys(reached, True), reached


def test_the_generated_engine_track_reads_the_added_metric(monkeypatch):
    monkeypatch.setattr(metrics, "METRICS", metrics.METRICS + (ROW,))
    _, bench_engine = _fresh_suite()
    monkeypatch.setattr(bench_engine, "engine_summary", lambda preset, cache: {"cache_hits": 7, "error": None})
    assert bench_engine.Engine().track_cache_hits({}, "mixed") == 7.0
    with pytest.raises(RuntimeError, match="case failed"):  # a failed case is a failed benchmark, never a 0
        monkeypatch.setattr(bench_engine, "engine_summary", lambda preset, cache: {"cache_hits": 0, "error": "E: x"})
        bench_engine.Engine().track_cache_hits({}, "mixed")
