"""The metric table (vlmpath.core.metrics) is the one place a metric is spelled out: the
comparison's thresholds agree with it, the readers, the formatter, the case summary and
the asv suite's twin track_ methods are derived from it."""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from pathlib import Path

import pytest

from vlmpath.compare.thresholds import Thresholds, UnitRule, table_disagreements
from vlmpath.core import metrics
from vlmpath.core.metrics import METRICS, Direction, MetricSpec, by_unit, routine_metrics
from vlmpath.render.fmt import fmt_value, fmt_with_unit

ROOT = Path(__file__).resolve().parents[1]


def test_the_thresholds_take_every_table_unit_from_the_table():
    import yaml
    from importlib import resources

    packaged = yaml.safe_load(resources.files("vlmpath.compare").joinpath("thresholds.yaml").read_text())
    table_units = set(metrics.metric_by_unit())
    assert not set(packaged["units"]) & table_units  # the yaml restates no row
    assert table_units <= set(dict(Thresholds.default().units))
    assert table_disagreements(Thresholds.default()) == []


def test_a_flipped_direction_or_exactness_is_caught():
    base = Thresholds.default()
    units = dict(base.units)
    units["calls"] = UnitRule(Direction.HIGHER, True)  # planted: more encoder calls would look better
    units["tok/s"] = UnitRule(Direction.HIGHER, True)  # planted: tok/s compared exactly
    flipped = dataclasses.replace(base, units=tuple(sorted(units.items())))
    found = table_disagreements(flipped)
    assert len(found) == 2 and any("'calls'" in f for f in found) and any("'tok/s'" in f for f in found)
    units.pop("syncs")
    missing = dataclasses.replace(base, units=tuple(sorted(units.items())))
    assert any("'syncs'" in f and "no rule" in f for f in table_disagreements(missing))


def test_bad_rows_are_refused():
    with pytest.raises(ValueError, match="direction"):
        MetricSpec(name="x", unit="u", direction="up", exact=False, fmt="plain", headline=False,
                   description="d")
    with pytest.raises(ValueError, match="Direction member"):  # the string, not the meaning
        MetricSpec(name="x", unit="u", direction="higher", exact=False, fmt="plain", headline=False,
                   description="d")
    with pytest.raises(ValueError, match="fmt"):
        MetricSpec(name="x", unit="u", direction=Direction.HIGHER, exact=False, fmt="pretty", headline=False,
                   description="d")
    with pytest.raises(ValueError, match="routine"):
        MetricSpec(name="x", unit="u", direction=Direction.HIGHER, exact=False, fmt="plain", headline=False,
                   description="d", routine=("prefill",))
    with pytest.raises(TypeError, match="positional"):  # a row is written by keyword
        MetricSpec("x", "u", Direction.HIGHER, False, "plain", False, "d")  # type: ignore[misc]
    a = MetricSpec(name="a", unit="u", direction=Direction.HIGHER, exact=False, fmt="plain", headline=False,
                   description="d")
    assert by_unit((a, dataclasses.replace(a, name="b")))["u"] is a  # agreeing rows share a unit
    with pytest.raises(ValueError, match="share unit"):
        by_unit((a, dataclasses.replace(a, name="b", exact=True)))


#: The embedding path's exact counts (``measure.path_ledger``), tracked on every routine path.
LEDGER_TRACKS = ("track_reencodes", "track_off_chunk_encodes", "track_cache_evictions", "track_cache_retained_bytes",
                 "track_cache_unaccounted_bytes", "track_foreign_rows", "track_cache_over_budget_bytes")


def test_readers_and_summary_take_their_keys_from_the_table(tmp_path):
    import json

    from vlmpath.compare.pytest_results import load_pytest_benchmark
    from vlmpath.suite.cases import record_summary

    routine = {m.name: m.unit for m in METRICS if m.routine}
    assert routine == {"tok_per_s": "tok/s", "accuracy": "fraction", "syncs": "syncs", "encoder_syncs": "syncs",
                       "encoder_calls": "calls", "peak_bytes": "bytes", "reserved_bytes": "bytes",
                       "routine_bytecodes": "bytecodes", "routine_aten_elements": "elements",
                       "reencodes": "encodes", "off_chunk_encodes": "encodes", "cache_evictions": "evictions",
                       "cache_retained_bytes": "retained bytes", "cache_unaccounted_bytes": "retained bytes",
                       "cache_over_budget_bytes": "retained bytes", "foreign_rows": "items"}
    # The pytest-benchmark reader: every routine key read with the table's unit, nothing else.
    extra = {**{name: 1.0 for name in routine}, "not_a_metric": 5.0}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": [{"name": "test_x", "stats": {"median": 0.5}, "extra_info": extra}]}))
    [run] = load_pytest_benchmark(path).machines
    assert {m.benchmark: m.unit for m in run.metrics} == {
        "test_x": "seconds", **{f"test_x.{name}": unit for name, unit in routine.items()}}

    class Record:  # every routine metric is a field of the measured record
        wall_s, samples, error, memory = 0.5, (0.1,), None, None
        prefill_tokens, hash_s = 64, 1e-5

    for i, name in enumerate(routine):
        setattr(Record, name, float(i))
    summary = record_summary(Record())
    assert {k: summary[k] for k in routine} == {n: float(i) for i, n in enumerate(routine)}


def test_the_formatter_follows_the_table():
    assert fmt_value(3.0, "calls") == "3" and fmt_value(3.0, "syncs") == "3"
    assert fmt_value(0.5, "fraction") == "0.50"
    assert fmt_value(3.0, "tok/s") == "3"  # plain: significant digits, not a count
    assert fmt_value(3.5, "tok/s") == "3.5"
    assert fmt_with_unit(2.0, "seconds") == "2 s" and fmt_with_unit(2.0, "calls") == "2 calls"


def test_headline_units_are_the_throughputs(monkeypatch):
    from vlmpath.render.report_data import THROUGHPUT_UNITS

    assert THROUGHPUT_UNITS == ("tok/s", "GB/s")
    # headline_units reads the table: a planted headline row (a unit seen twice once) shows.
    row = MetricSpec(name="img_per_s", unit="img/s", direction=Direction.HIGHER, exact=False, fmt="plain",
                     headline=True, description="images per second")
    monkeypatch.setattr(metrics, "METRICS", metrics.METRICS + (row, dataclasses.replace(row, name="img2_per_s")))
    assert metrics.headline_units() == ("tok/s", "GB/s", "img/s")


@pytest.fixture(scope="module")
def suite():
    sys.path.insert(0, str(ROOT))
    try:
        yield importlib.import_module("benchmarks.bench_encode"), importlib.import_module("benchmarks.bench_embed")
    finally:
        sys.path.remove(str(ROOT))


def test_every_record_metric_is_a_record_field_and_the_engine_path_has_them_all():
    from dataclasses import fields

    from vlmpath.compare.from_records import record_metrics as engine_rows
    from vlmpath.suite.record import CaseRecord

    names = {f.name for f in fields(CaseRecord)}
    assert {m.name for m in metrics.record_metrics()} <= names
    # The engine path reports what the routine paths report (peak memory was once missing).
    assert [leaf for _, leaf, _ in engine_rows()] == [
        "track_tok_per_s", "track_accuracy", "track_syncs", "track_encoder_syncs", "track_encoder_calls",
        "track_peak_bytes", "track_reserved_bytes", "track_routine_bytecodes", "track_routine_aten_elements",
        *LEDGER_TRACKS]


def test_the_suite_generates_one_track_method_per_routine_metric(suite):
    encode, embed = suite
    for cls, path in ((encode.EncodeMetrics, "encode"), (embed.EmbedRoutine, "embed")):
        # track_hash_s is the one hand-written track (arrival, not a routine metric: issue 12)
        tracks = sorted(n for n in dir(cls) if n.startswith("track_") and n != "track_hash_s")
        assert tracks == sorted(m.track_method for m in routine_metrics(path))
        for m in routine_metrics(path):
            assert getattr(cls, m.track_method).unit == m.unit
    # The asv names history is keyed on stay as they were; the path counts (issue 38) are added.
    assert sorted(n for n in dir(encode.EncodeMetrics) if n.startswith("track_")) == sorted(
        ["track_accuracy", "track_encoder_calls", "track_peak_bytes", "track_reserved_bytes", "track_tok_per_s",
         *LEDGER_TRACKS])
    assert sorted(n for n in dir(embed.EmbedRoutine) if n.startswith("track_")) == sorted(
        ["track_accuracy", "track_encoder_calls", "track_hash_s", "track_peak_bytes", "track_reserved_bytes",
         "track_syncs", "track_tok_per_s", *LEDGER_TRACKS])


def test_a_hand_written_twin_is_refused(suite):
    from benchmarks import _common

    class Planted:
        param_names = ("strategy", "preset")

        def track_tok_per_s(self, cache, *params):
            return 1.0

    with pytest.raises(TypeError, match="generated from the metric table"):
        _common.metric_tracks("encode")(Planted)

    class Clean:
        param_names = ("strategy", "preset")

    assert hasattr(_common.metric_tracks("encode")(Clean), "track_encoder_calls")


def test_generated_methods_fail_a_failed_case_except_accuracy(suite, monkeypatch):
    from benchmarks import _common

    encode, _ = suite
    summary = {"tok_per_s": None, "accuracy": 0.5, "encoder_calls": 2, "syncs": 0, "error": "Boom: x"}
    monkeypatch.setattr(_common, "case_summary", lambda case, cache: summary)
    bench = encode.EncodeMetrics()
    bench.case = None
    assert bench.track_accuracy({}, "s", "p") == 0.5
    with pytest.raises(RuntimeError, match="case failed"):
        bench.track_encoder_calls({}, "s", "p")
    summary["error"] = None  # an ok case: the number itself
    assert bench.track_encoder_calls({}, "s", "p") == 2.0
    # not measured: NaN (asv's "skipped"; a NotImplementedError outside setup is a failure), never 0
    assert math.isnan(bench.track_peak_bytes({}, "s", "p"))
    summary["peak_bytes"] = 4096
    assert bench.track_peak_bytes({}, "s", "p") == 4096.0


#: main before the metric table: the hand-written track_ methods (memory ones included).
PRE_TABLE_COMMIT = "0c048bb"


@pytest.mark.e2e  # reads a git history
def test_generated_methods_keep_the_hand_written_asv_versions(suite, tmp_path):
    """asv drops stored results whose benchmark version (hash of the method's source)
    differs: the generated methods must hash like the ones they replaced."""
    import shutil
    import subprocess

    from asv_runner.benchmarks._base import get_source_code

    old_pkg = tmp_path / "prebench"
    shutil.copytree(ROOT / "benchmarks", old_pkg)
    for f in ("bench_encode.py", "bench_embed.py"):
        (old_pkg / f).write_text(subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{PRE_TABLE_COMMIT}:benchmarks/{f}"],
            check=True, capture_output=True, text=True).stdout, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        old = importlib.import_module("prebench.bench_encode"), importlib.import_module("prebench.bench_embed")
    finally:
        sys.path.remove(str(tmp_path))
    compared = 0
    for new_mod, old_mod, cls in zip(suite, old, ("EncodeMetrics", "EmbedRoutine")):
        new_cls, old_cls = getattr(new_mod, cls), getattr(old_mod, cls)
        names = [n for n in dir(old_cls) if n.startswith("track_")]
        # Every hand-written method is still there (metrics added to the table since, such as
        # issue 38's path counts, are new benchmarks with versions of their own).
        assert set(names) <= {n for n in dir(new_cls) if n.startswith("track_")}
        for n in names:
            if n == "track_tok_per_s":  # per-pass samples since issue 12: a new version on purpose
                assert "tok_per_s_track" in get_source_code([getattr(new_cls(), n)])
                continue
            assert get_source_code([getattr(new_cls(), n)]) == get_source_code([getattr(old_cls(), n)]), n
            compared += 1
    assert compared == 9


def test_the_history_source_carries_the_old_comment(suite, monkeypatch):
    from benchmarks import _common, _compat

    encode, _ = suite
    spec = metrics.METRIC_BY_NAME["encoder_calls"]
    kept = _common._history_source(spec, encode.EncodeMetrics)
    assert kept.splitlines()[0] == "def track_encoder_calls(self, cache, strategy, preset):"
    assert "must not read as an improvement" in kept
    monkeypatch.setattr(_compat, "HISTORY_COMMENTS", {})  # planted: the comment forgotten
    assert _common._history_source(spec, encode.EncodeMetrics) != kept


#: main before bench_engine's tracks were generated from the table (hand-written, five).
PRE_ENGINE_TABLE_COMMIT = "f3b0c59"


@pytest.mark.e2e  # reads a git history
def test_generated_engine_tracks_keep_the_hand_written_asv_versions(tmp_path):
    import shutil
    import subprocess

    from asv_runner.benchmarks._base import get_source_code

    old_pkg = tmp_path / "preengine"
    shutil.copytree(ROOT / "benchmarks", old_pkg)
    (old_pkg / "bench_engine.py").write_text(subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{PRE_ENGINE_TABLE_COMMIT}:benchmarks/bench_engine.py"],
        check=True, capture_output=True, text=True).stdout, encoding="utf-8")
    sys.path[:0] = [str(tmp_path), str(ROOT)]
    try:
        old = importlib.import_module("preengine.bench_engine").Engine()
        new = importlib.import_module("benchmarks.bench_engine").Engine()
    finally:
        sys.path.remove(str(tmp_path))
        sys.path.remove(str(ROOT))
    names = [n for n in dir(old) if n.startswith("track_")]
    assert len(names) == 5 and set(names) < {n for n in dir(new) if n.startswith("track_")}
    for n in names:  # the version asv hashes: the method and the setups it runs with
        assert get_source_code([getattr(new, n), new.setup]) == get_source_code([getattr(old, n), old.setup]), n
