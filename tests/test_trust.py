"""``vlmpath trust`` and the instruction-count gate (issue 12): the tallies count what a PR
would fail on, a deterministic count is judged by its band from one value per side, and
callgrind's totals are read from its dump."""

from __future__ import annotations

import shutil

import pytest

from vlmpath.selfcheck import callgrind
from vlmpath.selfcheck import trust
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.records import Metric
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import judge
from vlmpath.core.errors import VlmpathError

CFG = Thresholds.default()


def _ir(value: float) -> Metric:
    return Metric(machine="cpu-a", benchmark="bench_embed.EmbedRoutine.track_instructions", params=(),
                  unit="instructions", value=value, samples=(value,))


def test_instruction_count_gate_plants_five_percent_and_sees_it_red():
    band = Thresholds(CFG.gpu_factor, 0.02, CFG.min_samples, CFG.p_threshold, CFG.units, CFG.rules)
    same = judge(_ir(1_000_000), _ir(1_000_000), band, "cpu")
    assert same.verdict is Verdict.UNCHANGED and not same.indicative
    planted = judge(_ir(1_000_000), _ir(1_050_000), band, "cpu")
    assert planted.verdict is Verdict.REGRESSION and not planted.indicative  # one count is a full measurement
    assert CFG.unit_rule("instructions").deterministic
    # The packaged thresholds judge instruction counts by their own tight band, not the
    # 20% CPU timing band: 5% more instructions is red, 0.5% (cross-process jitter) green.
    assert judge(_ir(1_000_000), _ir(1_050_000), CFG, "cpu").verdict is Verdict.REGRESSION
    assert judge(_ir(1_000_000), _ir(1_005_000), CFG, "cpu").verdict is Verdict.UNCHANGED


def test_tally_counts_false_regressions_and_detections_per_size():
    tallies: dict = {}
    cfg = trust.thresholds_with_band(CFG, 0.10, "time")
    base = [1.0 + i / 1000 for i in range(8)]
    aa = [1.0005 + i / 1000 for i in range(8)]
    planted = {0.05: [x * 1.05 for x in base], 0.25: [x * 1.25 for x in base]}
    trust.tally(tallies, "time", 0.10, cfg, base, aa, planted)
    t = tallies[("time", 0.10)]
    assert t.rounds == 1 and t.false_regressions == 0
    assert t.detected == {"5%": 0, "25%": 1}  # 5% is inside the 10% band; 25% is beyond and significant
    # A planted A/A "regression" beyond the band with clean samples is counted as false.
    trust.tally(tallies, "time", 0.10, cfg, base, [x * 1.3 for x in base], {})
    assert tallies[("time", 0.10)].false_regressions == 1
    assert "time" in trust.render({"preset": "p", "scale": "tiny", "rounds": 2, "samples": 8, "instruction_rounds": 0,
                                   "threads": 1, "cores": 2, "load_avg": None, "seconds": 1.0, "sizes": [0.05, 0.25],
                                   "gates": [{"gate": "time", "band": 0.1, **t.to_dict([0.05, 0.25])}]})


def test_paired_tally_catches_a_shift_the_pooled_samples_hide_and_keeps_aa_green():
    """Base and head passes measured next to each other on a machine that jumps between a
    fast and a slow state (the trust runs saw 51 ms vs 71 ms): pooled, the states overlap the
    25% shift; paired, every neighbour pair shows it."""
    states = [1.0, 1.4] * 8
    base = [s * (1 + i / 1000) for i, s in enumerate(states)]
    aa = [s * (1.0005 + i / 1000) for i, s in enumerate(states)]
    planted = {0.25: [x * 1.25 for x in base]}
    tallies: dict = {}
    cfg = trust.thresholds_with_band(CFG, 0.2, "time")
    trust.tally(tallies, "time", 0.2, cfg, base, aa, planted)
    trust.tally_paired(tallies, "time", 0.2, "lower", base, aa, planted)
    trust.tally_paired(tallies, "tok/s", 0.2, "higher", [1 / x for x in base], [1 / x for x in aa],
                       {0.25: [1 / x for x in planted[0.25]]})
    assert tallies[("time", 0.2)].detected == {"25%": 0}  # pooled: the states swamp it
    for gate in ("time (paired)", "tok/s (paired)"):
        t = tallies[(gate, 0.2)]
        assert t.detected == {"25%": 1} and t.false_regressions == 0, gate


def test_parse_totals_and_missing_valgrind(monkeypatch):
    assert callgrind.parse_totals("events: Ir\nsummary: 12345\ntotals: 12345\n") == 12345
    with pytest.raises(VlmpathError, match="no totals"):
        callgrind.parse_totals("events: Ir\n")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(VlmpathError, match="apt-get install -y valgrind"):
        callgrind.valgrind()


def test_bad_rounds_are_one_clear_error():
    with pytest.raises(VlmpathError, match="--rounds and --instructions"):
        trust.run_trust(rounds=0, instructions=0)


@pytest.mark.e2e
def test_trust_runs_end_to_end_and_writes_json(tmp_path, capsys):
    import json

    from vlmpath.cli import main

    out = tmp_path / "trust.json"
    assert main(["trust", "--rounds", "1", "--samples", "2", "--band", "0.2", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert {g["gate"] for g in rep["gates"]} == {"time", "tok/s", "time (paired)", "tok/s (paired)"}
    assert rep["threads"] == 1 and set(rep["realized"]) == {"5%", "10%", "25%"}
    assert "false regressions" in capsys.readouterr().out


def test_a_count_stopped_early_keeps_its_finished_rounds_marked_partial(tmp_path):
    """The trust counters' shared ending: a worker that dies after writing two rounds yields
    those rounds, marked partial with the reason; one that wrote nothing is an error."""
    import subprocess
    import sys

    out = tmp_path / "out.json"
    (tmp_path / "stderr").write_text("killed by the test\n")
    out.write_text('{"rounds": [{"plain": 1}, {"plain": 2}]}')
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    logged = []
    got = callgrind.finish_rounds(proc, tmp_path, out, timeout=60, rounds=5, log=logged.append)
    assert got["partial"] is True and len(got["rounds"]) == 2 and "exit 3" in got["error"]
    assert "after 2 of 5 rounds" in logged[0]
    out.unlink()
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(VlmpathError, match="exit 3"):
        callgrind.finish_rounds(proc, tmp_path, out, timeout=60, rounds=5, log=logged.append)
