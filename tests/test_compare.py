"""compare(): direction, significance, verdicts, partial runs, fingerprints, cross-vendor, CLI."""

from __future__ import annotations

import json
import random
import statistics

import pytest
from asv_fixtures import fingerprint, sha, write_asv_run

from vlmpath.cli import main
from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.comparison import ComparisonReport, Verdict, dumps_report, loads_report
from vlmpath.compare.records import NO_RESULT_ERROR, MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds, load_thresholds
from vlmpath.compare.verdict import compare, judge
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import failures_path
from vlmpath.core.metrics import Direction, Method

BASE, HEAD = sha("base"), sha("head")
CFG = Thresholds.default()


def _m(value, unit="seconds", samples=(), bench="b.B.time_x", machine="cpu-a", params=(), **kw) -> Metric:
    return Metric(machine=machine, benchmark=bench, params=params, unit=unit, value=value,
                  samples=tuple(samples), **kw)


def _run(commit, *machines: tuple[str, list[Metric]], fps=None) -> RunResults:
    fps = fps or {}
    return RunResults(commit=commit, machines=tuple(
        MachineRun(machine=name, commit=commit, metrics=tuple(ms), fingerprint=fps.get(name))
        for name, ms in machines))


def _verdict(b, h, kind="cpu", cfg=CFG):
    return judge(b, h, cfg, kind)


# --- direction --------------------------------------------------------------------------------


@pytest.mark.parametrize("unit,base,head,expected", [
    ("tok/s", 1000.0, 2500.0, Verdict.IMPROVEMENT),
    ("tok/s", 1000.0, 500.0, Verdict.REGRESSION),
    ("seconds", 1.0, 2.5, Verdict.REGRESSION),
    ("seconds", 1.0, 0.5, Verdict.IMPROVEMENT),
    ("ms", 10.0, 10.5, Verdict.UNCHANGED),      # 5% is inside the CPU noise band
    ("GB/s", 100.0, 50.0, Verdict.REGRESSION),
    ("bytes", 1e9, 2e9, Verdict.REGRESSION),
    ("fraction", 1.0, 0.99, Verdict.REGRESSION),  # any accuracy drop, whatever its size
    ("fraction", 0.5, 0.51, Verdict.IMPROVEMENT),
    ("syncs", 0.0, 1.0, Verdict.REGRESSION),     # any new sync
    ("calls", 3.0, 2.0, Verdict.IMPROVEMENT),
    ("calls", 3.0, 3.0, Verdict.UNCHANGED),
])
def test_direction_comes_from_the_unit(unit, base, head, expected):
    c = _verdict(_m(base, unit), _m(head, unit))
    assert c.verdict is expected
    assert c.method == ("exact" if unit in ("fraction", "syncs", "calls") else "threshold")


def test_a_unit_with_no_trusted_rule_is_not_judged_never_lower_by_default():
    # It used to be compared as lower-is-better: a drop read as an improvement.
    for b, h in ((1.0, 2.0), (2.0, 1.0)):
        c = _verdict(_m(b, "widgets"), _m(h, "widgets"))
        assert c.verdict is Verdict.NOT_COMPARABLE and c.untrusted and "'widgets'" in c.reason
    rep = compare(_run(BASE, ("cpu-a", [_m(2.0, "widgets"), _m(1.0, bench="b.B.time_y")])),
                  _run(HEAD, ("cpu-a", [_m(1.0, "widgets"), _m(1.0, bench="b.B.time_y")])))
    assert not rep.improvements and rep.exit_code() == 3  # never green


def test_each_backend_is_judged_by_its_own_band():
    # GPU 10%; CPU 10% since its PR job judges timings on pairs (paired drift 0.93-1.07x).
    b = _m(100.0, "tok/s")
    for kind in ("gpu", "cpu"):
        assert _verdict(b, _m(85.0, "tok/s"), kind).verdict is Verdict.REGRESSION  # -15%
        assert _verdict(b, _m(95.0, "tok/s"), kind).verdict is Verdict.UNCHANGED  # -5%
    from dataclasses import replace

    wide = replace(CFG, cpu_factor=0.20)
    assert _verdict(b, _m(85.0, "tok/s"), "cpu", wide).verdict is Verdict.UNCHANGED  # the kind picks the band
    assert _verdict(b, _m(85.0, "tok/s"), "gpu", wide).verdict is Verdict.REGRESSION


def test_zero_base_does_not_crash():
    assert _verdict(_m(0.0, "ms"), _m(1.0, "ms")).verdict is Verdict.REGRESSION
    assert _verdict(_m(0.0, "ms"), _m(0.0, "ms")).verdict is Verdict.UNCHANGED


# --- significance -----------------------------------------------------------------------------


def _noisy(rng: random.Random, center: float, n: int, cv: float) -> list[float]:
    return [center * (1 + rng.gauss(0, cv)) for _ in range(n)]


def _timing(samples, machine="cpu-a"):
    return _m(statistics.median(samples), "seconds", samples, machine=machine)


@pytest.mark.parametrize("n_samples", [3, 8])
@pytest.mark.parametrize("machine,cv", [("cpu-a", 0.06), ("cuda-h200", 0.02)])
def test_a_a_runs_with_noise_give_no_regression(n_samples, machine, cv):
    rng = random.Random(1234)
    kind = "gpu" if machine.startswith("cuda") else "cpu"
    verdicts = []
    for _ in range(50):
        b = _timing(_noisy(rng, 0.020, n_samples, cv), machine)
        h = _timing(_noisy(rng, 0.020, n_samples, cv), machine)
        c = _verdict(b, h, kind)
        assert c.method == ("mann-whitney" if n_samples >= 7 else "threshold")
        verdicts.append(c.verdict if not c.indicative else Verdict.UNCHANGED)
        # Fewer samples than the test needs: the band alone speaks, indicatively (never fails
        # CI by itself); a 10% CPU band can flag 6% noise on 3 samples, so that must not gate.
        assert c.indicative == (n_samples < 7)
    assert verdicts.count(Verdict.UNCHANGED) == 50


def test_significance_path_needs_seven_samples_per_side():
    # Medians differ by +60% (beyond the 50% CPU band) but the samples overlap heavily.
    base = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.5]
    head = [1.6, 1.6, 1.6, 3.2, 3.2, 3.2, 2.4]
    c7 = _verdict(_timing(base), _timing(head))
    assert c7.method == "mann-whitney" and c7.significant is False and c7.verdict is Verdict.UNCHANGED
    c6 = _verdict(_timing(base[1:]), _timing(head[1:]))
    assert c6.method == "threshold" and c6.significant is None and c6.verdict is Verdict.REGRESSION
    assert c6.indicative  # too few samples for the test: shown, never failing alone


def test_six_fully_separated_samples_can_never_be_significant_in_asvs_test():
    """Why min_samples is 7: asv's two-sided p for 6 vs 6 fully separated is 0.00216."""
    from asv._stats import mann_whitney_u

    assert mann_whitney_u([1.0 + i / 100 for i in range(6)], [2.0 + i / 100 for i in range(6)])[1] > CFG.p_threshold
    assert mann_whitney_u([1.0 + i / 100 for i in range(7)], [2.0 + i / 100 for i in range(7)])[1] < CFG.p_threshold


def test_significant_and_beyond_factor_is_a_regression_but_significant_alone_is_not():
    rng = random.Random(7)
    base = _noisy(rng, 1.0, 8, 0.005)
    slow = _verdict(_timing(base), _timing(_noisy(rng, 1.5, 8, 0.005)))
    assert (slow.verdict, slow.method, slow.significant) == (Verdict.REGRESSION, "mann-whitney", True)
    small = _verdict(_timing(base), _timing(_noisy(rng, 1.05, 8, 0.005)), "gpu")
    assert small.significant is True and small.verdict is Verdict.UNCHANGED  # 5% < 10% band


# --- verdicts over runs ------------------------------------------------------------------------


def test_new_removed_newly_failing_fixed_skipped_and_unit_change():
    # One class per benchmark: each is its own case (core.metrics.case_of).
    base = _run(BASE, ("cpu-a", [
        _m(1.0, bench="b.removed.time_removed"),
        _m(1.0, bench="b.breaks.time_breaks"),
        _m(None, bench="b.fixed.time_fixed", error="failed"),
        _m(None, bench="b.skip.time_skip", skipped=True),
        _m(1.0, "ms", bench="b.unit.track_unit"),
        _m(None, bench="b.broken_both.time_broken_both", error="failed"),
    ]))
    head = _run(HEAD, ("cpu-a", [
        _m(1.0, bench="b.new.time_new"),
        _m(None, bench="b.breaks.time_breaks", error="failed"),
        _m(1.0, bench="b.fixed.time_fixed"),
        _m(1.0, bench="b.skip.time_skip"),
        _m(1.0, "seconds", bench="b.unit.track_unit"),
        _m(None, bench="b.broken_both.time_broken_both", error="failed"),
        _m(None, bench="b.new_broken.time_new_broken", error="failed"),
    ]))
    rep = compare(base, head, CFG)
    got = {c.benchmark.rsplit(".", 1)[-1]: c for c in rep.all()}
    assert got["time_new"].verdict is Verdict.NEW
    # base judged it, head has no row: vanished on head, a failure (compare.vanished)
    assert got["time_removed"].verdict is Verdict.NEWLY_FAILING and got["time_removed"].base == 1.0
    assert got["time_removed"].reason.startswith("vanished on head: not in head")
    assert got["time_breaks"].verdict is Verdict.NEWLY_FAILING
    assert got["time_new_broken"].verdict is Verdict.NEW  # new is never a failure
    assert got["time_fixed"].verdict is Verdict.FIXED
    assert got["time_skip"].verdict is Verdict.NOT_COMPARABLE and "skipped" in got["time_skip"].reason
    assert got["track_unit"].verdict is Verdict.NOT_COMPARABLE and "unit changed" in got["track_unit"].reason
    assert got["time_broken_both"].verdict is Verdict.NOT_COMPARABLE
    # Newly failing fails CI like a regression does.
    assert {c.benchmark for c in rep.regressions} == {"b.breaks.time_breaks", "b.removed.time_removed"}
    assert rep.exit_code() == 1 and rep.exit_code(fail_on_regression=False) == 0


def test_failure_messages_travel_with_the_failing_side():
    split = "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 256"
    base = _run(BASE, ("cpu-a", [
        _m(1.0, bench="b.breaks.time_breaks"), _m(None, bench="b.fixed.time_fixed", error="ValueError: old bug"),
        _m(1.0, bench="b.generic.time_generic"), _m(None, bench="b.both.time_both", error="E: base"),
    ]))
    head = _run(HEAD, ("cpu-a", [
        _m(None, bench="b.breaks.time_breaks", error=split), _m(1.0, bench="b.fixed.time_fixed"),
        _m(None, bench="b.generic.time_generic", error=NO_RESULT_ERROR), _m(None, bench="b.both.time_both", error="E: head"),
        _m(None, bench="b.new_broken.time_new_broken", error="KeyError: 'x'"),
    ]))
    rep = compare(base, head, CFG)
    got = {c.benchmark.rsplit(".", 1)[-1]: c for c in rep.all()}
    assert (got["time_breaks"].verdict, got["time_breaks"].error) == (Verdict.NEWLY_FAILING, split)
    assert (got["time_fixed"].verdict, got["time_fixed"].error) == (Verdict.FIXED, "ValueError: old bug")
    assert got["time_generic"].verdict is Verdict.NEWLY_FAILING and got["time_generic"].error is None
    assert got["time_both"].error == "E: head" and got["time_new_broken"].error == "KeyError: 'x'"
    data = json.loads(json.dumps(rep.to_dict()))
    rows = {c["benchmark"]: c for m in data["machines"] for c in m["comparisons"]}
    assert rows["b.breaks.time_breaks"]["error"] == split
    assert ComparisonReport.from_dict(data) == rep


def test_corrupt_failures_file_leaves_the_comparison_standing_with_a_note(tmp_path):
    tok = "bench_embed.Embed.track_tok_per_s"
    write_asv_run(tmp_path, "cpu-a", BASE, {tok: ("tok/s", [], [], [1000.0], None)})
    write_asv_run(tmp_path, "cpu-a", HEAD, {tok: ("tok/s", [], [], [None], None)})
    failures_path(tmp_path / "cpu-a", HEAD).write_text("[{truncated")
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    (c,) = rep.all()
    assert c.verdict is Verdict.NEWLY_FAILING and c.error is None and c.reason == NO_RESULT_ERROR
    (note,) = [n for n in rep.machines[0].notes if "failures file" in n]
    assert note.startswith("cpu-a (head): failure messages not shown: corrupted failures file")


def test_exit_code_zero_without_regressions():
    rep = compare(_run(BASE, ("cpu-a", [_m(1.0)])), _run(HEAD, ("cpu-a", [_m(0.5)])), CFG)
    assert rep.improvements and not rep.regressions and rep.exit_code() == 0


def test_missing_machine_is_a_marked_partial_comparison_not_no_change():
    base = _run(BASE, ("cpu-a", [_m(1.0)]), ("cuda-h200", [_m(1.0, machine="cuda-h200")]))
    head = _run(HEAD, ("cpu-a", [_m(1.0)]), ("rocm-mi300x", [_m(1.0, machine="rocm-mi300x")]))
    rep = compare(base, head, CFG)
    status = {m.machine: m.status for m in rep.machines}
    assert status == {"cpu-a": "both", "cuda-h200": "base-only", "rocm-mi300x": "head-only"}
    assert rep.partial
    cuda = next(m for m in rep.machines if m.machine == "cuda-h200")
    assert [c.verdict for c in cuda.comparisons] == [Verdict.NOT_COMPARABLE]
    assert any("no head results" in n for n in cuda.notes)


def test_partial_head_run_marks_missing_benchmarks(tmp_path):
    suite = {"b.B.track_accuracy": ("fraction", [], [], [1.0], None), "b.B.time_x": ("seconds", [], [], [1.0], None)}
    write_asv_run(tmp_path, "cpu-a", BASE, suite)
    write_asv_run(tmp_path, "cpu-a", HEAD, {"b.B.track_accuracy": suite["b.B.track_accuracy"]}, update_benchmarks_json=False)
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    gone = [c for c in rep.all() if c.verdict is Verdict.NEWLY_FAILING]
    assert [c.reason for c in gone] == ["vanished on head: missing from head run"] and rep.exit_code() == 1
    assert rep.partial and any("partial head run" in n for m in rep.machines for n in m.notes)


def test_toolchain_change_is_flagged_but_still_compared(tmp_path):
    write_asv_run(tmp_path, "cuda-h200", BASE, {"b.B.track_tok_per_s": ("tok/s", [], [], [100.0], None)},
                  fingerprint("cuda", torch="2.6.0"))
    write_asv_run(tmp_path, "cuda-h200", HEAD, {"b.B.track_tok_per_s": ("tok/s", [], [], [50.0], None)},
                  fingerprint("cuda", torch="2.7.1", driver="575.1"))
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    (m,) = rep.machines
    assert ("torch", "2.6.0", "2.7.1") in m.toolchain_changes
    assert ("driver", "570.124", "575.1") in m.toolchain_changes
    assert [c.verdict for c in m.comparisons] == [Verdict.REGRESSION]


def test_same_fingerprint_no_flag_and_one_sided_fingerprint_noted(tmp_path):
    write_asv_run(tmp_path, "cuda-h200", BASE, {"b.B.track_tok_per_s": ("tok/s", [], [], [100.0], None)}, fingerprint("cuda"))
    write_asv_run(tmp_path, "cuda-h200", HEAD, {"b.B.track_tok_per_s": ("tok/s", [], [], [100.0], None)}, fingerprint("cuda"))
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    assert rep.machines[0].toolchain_changes == () and not rep.partial
    (tmp_path / "cuda-h200" / f"vlmpath-fingerprint-{BASE[:8]}.json").unlink()
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    assert any("no platform fingerprint for base" in n for n in rep.machines[0].notes)


# --- cross-vendor --------------------------------------------------------------------------------


def test_cross_vendor_ratio_exposes_a_rocm_only_regression(tmp_path):
    tok = "bench_embed.Embed.track_tok_per_s"
    spec = lambda vals: {tok: ("tok/s", ["workload"], [["single", "multi_region"]], vals, None)}  # noqa: E731
    write_asv_run(tmp_path, "cuda-h200", BASE, spec([1000.0, 1000.0]), fingerprint("cuda"))
    write_asv_run(tmp_path, "cuda-h200", HEAD, spec([1000.0, 1100.0]), fingerprint("cuda"))
    # Machine name without a vendor prefix: the backend comes from the fingerprint.
    write_asv_run(tmp_path, "gpu-box", BASE, spec([900.0, 900.0]), fingerprint("rocm"))
    write_asv_run(tmp_path, "gpu-box", HEAD, spec([900.0 * 1.1, 100.0]), fingerprint("rocm"))
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    rows = {r.params: r for r in rep.cross_vendor}
    assert len(rows) == 2
    bad = rows[(("workload", "multi_region"),)]
    assert (bad.reference, bad.reference_machine, bad.other, bad.other_machine) == ("cuda", "cuda-h200", "rocm", "gpu-box")
    assert bad.base_ratio == pytest.approx(0.9) and bad.head_ratio == pytest.approx(100 / 1100)
    assert bad.flagged and bad.other_change == pytest.approx(-8 / 9) and bad.reference_change == pytest.approx(0.1)
    same = rows[(("workload", "single"),)]
    assert same.base_ratio == pytest.approx(0.9) and same.head_ratio == pytest.approx(0.99)
    assert not same.flagged  # both vendors' relation moved only 10% -> inside the GPU band


def test_no_cross_vendor_rows_with_one_vendor():
    rep = compare(_run(BASE, ("cuda-h200", [_m(1.0, machine="cuda-h200")])),
                  _run(HEAD, ("cuda-h200", [_m(1.0, machine="cuda-h200")])), CFG)
    assert rep.cross_vendor == ()


# --- thresholds config -----------------------------------------------------------------------------


def test_packaged_defaults_document_the_noise_band():
    assert (CFG.gpu_factor, CFG.cpu_factor, CFG.min_samples) == (0.10, 0.10, 7)
    assert CFG.unit_rule("tok/s").direction == "higher" and CFG.unit_rule("syncs").exact
    assert CFG.factor_for("bench_hash.Hash.peakmem_receive", "bytes", "gpu") == 0.05
    assert CFG.factor_for("bench_hash.Hash.time_receive", "seconds", "cpu") == 0.10
    assert CFG.factor_for("bench_embed.EmbedRoutine.track_routine_instructions", "instructions", "cpu") == 0.01
    assert CFG.factor_for("bench_embed.VisionTower.track_instructions", "instructions", "cpu") == 0.02


def test_user_config_sets_bands_and_its_rules_come_first(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("factor: {gpu: 0.02, cpu: 0.5}\n"
                 "rules:\n  - pattern: 'Embed\\.'\n    factor: 0.3\n  - pattern: 'peakmem'\n    factor: 0.2\n")
    cfg = load_thresholds(p)
    assert cfg.factor_for("b.Embed.track_tok_per_s", "tok/s", "gpu") == 0.3
    assert cfg.factor_for("b.Hash.peakmem_x", "bytes", "gpu") == 0.2
    assert cfg.factor_for("b.Other.time_x", "seconds", "gpu") == 0.02
    assert cfg.units == CFG.units  # bands only: every unit rule is still the table's
    assert str(p) in cfg.source


@pytest.mark.parametrize("text,key", [
    # The planted flips: each would turn "accuracy 1.00 -> 0.60" or "tok/s halved" green.
    ("units:\n  fraction: {direction: lower}\n", "units.fraction"),
    ("units:\n  tok/s: {direction: lower, exact: false}\n", "units.tok/s"),
    ("units:\n  widgets: {direction: lower}\n", "units.widgets"),  # a unit the table lacks: no default either
    ("units: {}\n", "units"),
    ("rules:\n  - pattern: 'accuracy'\n    factor: 0.5\n    direction: lower\n", "rules[0].direction"),
    ("rules:\n  - pattern: 'x'\n    factor: 0.1\n  - pattern: 'syncs'\n    factor: 0.1\n    exact: false\n",
     "rules[1].exact"),
    ("rules:\n  - pattern: 'x'\n    factor: 0.1\n    colour: blue\n", "rules[0].colour"),
])
def test_user_config_cannot_set_what_a_metric_means(tmp_path, text, key):
    p = tmp_path / "t.yaml"
    p.write_text("factor: 0.2\n" + text)
    with pytest.raises(VlmpathError) as err:
        load_thresholds(p)
    msg = str(err.value)
    assert f"'{key}'" in msg and str(p) in msg and "\n" not in msg
    # The verdict stays the table's: a drop in accuracy is a regression under the band-only file.
    ok = tmp_path / "ok.yaml"
    ok.write_text("factor: 0.2\n")
    c = judge(_m(1.0, "fraction", bench="b.E.track_accuracy"), _m(0.6, "fraction", bench="b.E.track_accuracy"),
              load_thresholds(ok), "cpu")
    assert c.verdict is Verdict.REGRESSION


def test_packaged_yaml_cannot_outvote_the_table():
    th = load_thresholds(None, packaged=("units:\n  tok/s: {direction: lower}\n  ms: {direction: lower}\n", "x"))
    assert th.unit_rule("tok/s").direction == "higher" and th.unit_rule("ms").direction == "lower"


def test_a_unit_direction_is_parsed_once_where_the_yaml_enters():
    th = load_thresholds(None, packaged=("units:\n  ms: {direction: lower}\n", "x"))
    assert th.unit_rule("ms").direction is Direction.LOWER  # a member, not the yaml's string
    with pytest.raises(VlmpathError, match=r"^pkg.yaml: units.ms needs direction: lower\|higher"):
        load_thresholds(None, packaged=("units:\n  ms: {direction: down}\n", "pkg.yaml"))


def test_a_comparison_json_carries_members_and_refuses_an_unknown_direction_or_method():
    side = lambda calls, rate: _run(BASE, ("cpu-a", [  # noqa: E731
        _m(calls, "calls", bench="b.B.track_encoder_calls"), _m(rate, "tok/s", bench="b.B.track_tok_per_s")]))
    rep = compare(side(1.0, 10.0), side(2.0, 10.0), CFG)
    again = loads_report(dumps_report(rep), "c.json")
    assert again == rep
    assert {(c.direction, c.method) for c in again.all()} == {(Direction.LOWER, Method.EXACT),
                                                             (Direction.HIGHER, Method.THRESHOLD)}
    assert all(type(c.direction) is Direction and type(c.method) is Method for c in again.all())
    for key, bad in (("direction", "unknown"), ("method", "guess")):
        d = json.loads(dumps_report(rep))
        d["machines"][0]["comparisons"][0][key] = bad
        with pytest.raises(VlmpathError) as err:
            loads_report(json.dumps(d), "c.json")
        assert str(err.value).startswith("c.json is not a vlmpath comparison JSON") and repr(bad) in str(err.value)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("text,match", [
    ("factor: fast\n", "factor"),
    ("rules:\n  - pattern: '('\n    factor: 0.1\n", "not a regex"),
    ("units:\n  tok/s: {direction: up}\n", "direction"),
    ("colour: blue\n", "unknown keys"),
    ("min_samples: 1\n", "min_samples"),
    ("factor: [1\n", "not valid YAML"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, match):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    with pytest.raises(VlmpathError, match=match):
        load_thresholds(p)
    with pytest.raises(VlmpathError, match="cannot read"):
        load_thresholds(tmp_path / "missing.yaml")


def test_report_json_round_trip():
    base = _run(BASE, ("cuda-h200", [_m(1.0, "tok/s", machine="cuda-h200", params=(("w", "a"),))]),
                ("rocm-x", [_m(1.0, "tok/s", machine="rocm-x", params=(("w", "a"),))]))
    head = _run(HEAD, ("cuda-h200", [_m(2.0, "tok/s", machine="cuda-h200", params=(("w", "a"),))]),
                ("rocm-x", [_m(0.5, "tok/s", machine="rocm-x", params=(("w", "a"),))]))
    rep = compare(base, head, CFG)
    assert rep.cross_vendor
    again = ComparisonReport.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert again == rep


# --- CLI -------------------------------------------------------------------------------------------


def _cli_dirs(tmp_path, head_tok=500.0):
    suite = lambda v: {"bench_embed.Embed.track_tok_per_s": ("tok/s", [], [], [v], None)}  # noqa: E731
    write_asv_run(tmp_path, "cpu-a", BASE, suite(1000.0))
    write_asv_run(tmp_path, "cpu-a", HEAD, suite(head_tok))
    return tmp_path


def test_cli_compare_exit_codes_and_files(tmp_path, capsys):
    res = _cli_dirs(tmp_path / "r")
    md, js = tmp_path / "out" / "c.md", tmp_path / "out" / "c.json"
    rc = main(["compare", BASE[:7], HEAD[:7], "--results", str(res), "--markdown", str(md), "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 1 and "regression" in out and "track_tok_per_s" in out
    assert md.read_text().startswith("<!-- vlmpath-bench -->\n**1 regression on cpu")
    assert ComparisonReport.from_dict(json.loads(js.read_text())).regressions
    assert main(["compare", BASE[:7], HEAD[:7], "--results", str(res), "--no-fail"]) == 0
    assert main(["compare", BASE[:7], "feedface", "--results", str(res)]) == 2
    assert "feedface" in capsys.readouterr().err
    bad_cfg = tmp_path / "bad.yaml"
    bad_cfg.write_text("factor: nope\n")
    assert main(["compare", BASE[:7], HEAD[:7], "--results", str(res), "--config", str(bad_cfg)]) == 2


def test_cli_compare_no_regression_exits_zero(tmp_path, capsys):
    res = _cli_dirs(tmp_path, head_tok=1010.0)
    assert main(["compare", BASE, HEAD, "--results", str(res)]) == 0
    assert "No regressions" in capsys.readouterr().out


def test_cli_compare_pytest_json_only(tmp_path, capsys):
    def pb(commit, mean):
        return {"machine_info": {"node": "box", "vlmpath_machine": "cpu-pb"}, "commit_info": {"id": commit},
                "benchmarks": [{"group": None, "name": "test_x", "fullname": "t.py::test_x", "params": None,
                                "extra_info": {"syncs": 0 if commit == BASE else 2},
                                "stats": {"median": mean, "data": [mean] * 3}}]}
    (tmp_path / "b.json").write_text(json.dumps(pb(BASE, 1.0)))
    (tmp_path / "h.json").write_text(json.dumps(pb(HEAD, 1.0)))
    rc = main(["compare", BASE, HEAD, "--pytest-json", str(tmp_path / "b.json"), str(tmp_path / "h.json")])
    out = capsys.readouterr().out
    assert rc == 1 and "t.py::test_x.syncs" in out


# --- trusted definitions, one failure per case, quick runs (issue 27) --------------------------
ACC = "bench_embed.EmbedRoutine.track_accuracy"
CASE_P = (["pipeline", "preset"], [["default"], ["multi_region"]])


def _acc_pair(tmp_path, unit):
    """accuracy 1.00 -> 0.60 on a pair whose benchmarks.json says ``unit`` for track_accuracy."""
    names, params = CASE_P
    for commit, v in ((BASE, 1.0), (HEAD, 0.6)):
        write_asv_run(tmp_path, "cpu-a", commit, {ACC: (unit, names, params, [v], None)}, fingerprint("cpu"))
    return compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)


def test_the_true_unit_reads_the_accuracy_drop_as_a_regression(tmp_path):
    rep = _acc_pair(tmp_path, "fraction")  # the gate works on an honest file
    assert [c.verdict for c in rep.all()] == [Verdict.REGRESSION] and rep.exit_code() == 1


@pytest.mark.parametrize("lie", ["seconds", "widgets"])
def test_a_unit_the_results_change_never_turns_an_accuracy_drop_green(tmp_path, lie):
    # It read as an improvement ("No regressions", exit 0) when the unit came from the file.
    rep = _acc_pair(tmp_path, lie)
    (c,) = rep.all()
    assert c.verdict is Verdict.NOT_COMPARABLE and c.untrusted and not rep.improvements
    assert f"'{lie}'" in c.reason and "'track_accuracy'" in c.reason and "'fraction'" in c.reason
    assert rep.exit_code() == 3


def test_without_benchmarks_json_the_table_gives_the_unit(tmp_path):
    _acc_pair(tmp_path, "fraction")
    (tmp_path / "benchmarks.json").unlink()
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    (c,) = rep.all()
    assert (c.unit, c.verdict, c.method) == ("fraction", Verdict.REGRESSION, "exact") and rep.exit_code() == 1


def test_a_method_the_table_does_not_know_is_not_judged_and_named(tmp_path):
    known = "bench_embed.EmbedRoutine.track_syncs"
    odd = "bench_embed.EmbedRoutine.track_widgets_per_s"
    for commit, v in ((BASE, 10.0), (HEAD, 1.0)):
        write_asv_run(tmp_path, "cpu-a", commit, {odd: ("tok/s", [], [], [v], None),
                                                  known: ("syncs", [], [], [0.0], None)})
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    got = {c.benchmark: c for c in rep.all()}
    assert got[known].verdict is Verdict.UNCHANGED
    assert got[odd].verdict is Verdict.NOT_COMPARABLE and got[odd].untrusted
    assert "'track_widgets_per_s'" in got[odd].reason and "metric table" in got[odd].reason
    assert rep.exit_code() == 3 and not rep.regressions  # never green, never lower-by-default
    from vlmpath.render.headline import headline

    assert "untrusted definition" in headline(rep) and "No regressions" not in headline(rep)


def test_a_crashed_head_case_is_one_failure_with_its_error_and_no_improvements(tmp_path):
    from vlmpath.core.failures import Failure
    from vlmpath.render.headline import headline

    names, params = CASE_P
    cls = "bench_engine.Engine"
    base = {f"{cls}.track_accuracy": ("fraction", names, params, [1.0], None),
            f"{cls}.track_reserved_bytes": ("bytes", names, params, [2e6], None),
            f"{cls}.track_syncs": ("syncs", names, params, [5.0], None),
            f"{cls}.track_tok_per_s": ("tok/s", names, params, [100.0], None)}
    # The head case crashed part-way: its leftover counters are lower (they counted less).
    head = {**base, f"{cls}.track_accuracy": ("fraction", names, params, [0.6], None),
            f"{cls}.track_reserved_bytes": ("bytes", names, params, [1e6], None),
            f"{cls}.track_syncs": ("syncs", names, params, [1.0], None),
            f"{cls}.track_tok_per_s": ("tok/s", names, params, [None], None)}
    write_asv_run(tmp_path, "cpu-a", BASE, base)
    write_asv_run(tmp_path, "cpu-a", HEAD, head)
    boom = "RuntimeError: CUDA error: an illegal memory access was encountered"
    failure = Failure(f"{cls}.track_tok_per_s", (("pipeline", "default"), ("preset", "multi_region")), boom)
    failures_path(tmp_path / "cpu-a", HEAD).write_text(json.dumps([failure.to_dict()]))
    rep = compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), CFG)
    (c,) = rep.all()
    assert (c.verdict, c.error, c.case, c.left_out) == (Verdict.NEWLY_FAILING, boom, cls, 3)
    assert not rep.improvements and rep.exit_code() == 1
    line = headline(rep)
    assert line.count("illegal memory access") == 1 and "Engine default multi\\_region (accuracy 1\\.00 \\-&gt; 0\\.60) failing" in line
    assert "reserved" not in line and "syncs" not in line and "improvement" not in line


def test_a_crashed_engine_record_is_one_failure_too():
    from vlmpath.compare.from_records import run_from_records
    from vlmpath.suite.record import CaseRecord

    ok = CaseRecord(workload="multi_region", tok_per_s=100.0, accuracy=1.0, syncs=5, reserved_bytes=2_000_000,
                    encoder_calls=4, samples=(0.01,) * 7, prefill_tokens=1)
    crashed = CaseRecord(workload="multi_region", accuracy=0.6, syncs=1, reserved_bytes=1_000_000, encoder_calls=1,
                         error="RuntimeError: boom")
    rep = compare(run_from_records([ok], machine="cpu-a", commit=BASE),
                  run_from_records([crashed], machine="cpu-a", commit=HEAD), CFG)
    (c,) = rep.all()
    assert c.verdict is Verdict.NEWLY_FAILING and c.error == "RuntimeError: boom" and c.case == "engine_embed.Engine"
    assert not rep.improvements and rep.exit_code() == 1


def _quick_pair(tmp_path, quick: bool, head_tok=(80.0, 120.0), head_acc=1.0):
    """An unchanged pair of engine + routine runs whose tok/s jitters (no samples on the
    engine's plain tracks, one on the routine's); the run-info files say ``quick``."""
    from vlmpath.runner.run_files import RunInfo, write_run_info

    names, params = (["cache", "preset"], [["off"], ["multi_region", "video"]])
    rnames, rparams = CASE_P
    for commit, toks, racc in ((BASE, (100.0, 100.0), 1.0), (HEAD, head_tok, head_acc)):
        write_asv_run(tmp_path, "cpu-a", commit, {
            "bench_engine.Engine.track_tok_per_s": ("tok/s", names, params, list(toks), None),
            "bench_engine.Engine.track_syncs": ("syncs", names, params, [3.0, 3.0], None),
            "bench_embed.EmbedRoutine.track_tok_per_s": ("tok/s", rnames, rparams, [1.0], [[toks[0]]]),
            ACC: ("fraction", rnames, rparams, [racc], None)})
        write_run_info(tmp_path, "cpu-a", commit, RunInfo(quick=quick, scale="tiny", bench=None, trusted=True))
    return tmp_path


def test_a_quick_unchanged_pair_exits_zero_with_indicative_moves_counted_apart(tmp_path, capsys):
    res = _quick_pair(tmp_path, quick=True)
    assert load_asv(res, HEAD).machines[0].quick is True  # compare reads it from the run-info file
    rc = main(["compare", BASE, HEAD, "--results", str(res)])
    head_line = capsys.readouterr().out.splitlines()[1]
    assert rc == 0 and head_line.startswith("No regressions")
    assert "3 indicative moves (too few samples, not gating)" in head_line and "0 improvements" in head_line
    rep = compare(load_asv(res, BASE), load_asv(res, HEAD), CFG, quick=True)  # the caller's own knowledge
    engine = [c for c in rep.all() if c.benchmark.startswith("bench_engine") and c.unit == "tok/s"]
    routine = [c for c in rep.all() if c.benchmark.startswith("bench_embed") and c.unit == "tok/s"]
    assert engine and routine and all(c.indicative for c in engine + routine)  # one rule wherever it comes from


def test_a_full_run_gates_the_same_move_and_quick_still_gates_exact_rows(tmp_path):
    # Planted: the same jitter without quick is judged by the band (gating) ...
    full = _quick_pair(tmp_path / "full", quick=False)
    rep = compare(load_asv(full, BASE), load_asv(full, HEAD), CFG)
    assert rep.exit_code() == 1 and any(c.benchmark == "bench_engine.Engine.track_tok_per_s" for c in rep.regressions)
    # ... and in quick mode an exact row (accuracy) still fails the check.
    quick = _quick_pair(tmp_path / "quick", quick=True, head_acc=0.9)
    rep = compare(load_asv(quick, BASE), load_asv(quick, HEAD), CFG, quick=True)
    assert [c.benchmark for c in rep.regressions] == [ACC] and rep.exit_code() == 1
    from vlmpath.render.headline import headline

    assert headline(rep).startswith("**1 regression on cpu\\-a**") and "(3 indicative moves, not gating)" in headline(rep)
    from vlmpath.render.comment import render_markdown

    summary = next(x for x in render_markdown(rep).splitlines() if x.startswith("<summary>"))
    assert "1 regression," in summary and "3 indicative" in summary and "improvement" not in summary
