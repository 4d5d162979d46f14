"""The GPU's state in the fingerprint (``vlmpath.measure.gpu_state``): real-format outputs
of nvidia-smi / amd-smi / rocm-smi parse into typed records; a changed setting between base
and head is flagged in the comparison and the comment; no tool means no state, no error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from asv_fixtures import fingerprint, sha, write_asv_run

from vlmpath.core.backends import BACKENDS, backend
from vlmpath.measure.gpu_state import (
    READERS,
    GpuState,
    parse_amd_smi_json,
    parse_nvidia_smi_xml,
    parse_rocm_smi_json,
    query_gpu_state,
    table_tools,
)

FIX = Path(__file__).parent / "fixtures" / "gpu_state"


def _read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_nvidia_smi_xml_parses_clocks_power_and_modes():
    s = parse_nvidia_smi_xml(_read("nvidia-smi-q-x.xml"))
    assert s == GpuState(tool="nvidia-smi", sm_clock_mhz=1980.0, mem_clock_mhz=3201.0, performance_state="P0",
                         app_graphics_clock_mhz=1980.0, app_mem_clock_mhz=3201.0, max_sm_clock_mhz=1980.0,
                         max_mem_clock_mhz=3201.0, power_limit_w=700.0, persistence_mode="Enabled",
                         ecc_mode="Enabled", compute_mode="Default")


def test_older_nvidia_smi_power_readings_layout():
    s = parse_nvidia_smi_xml(_read("nvidia-smi-q-x-legacy.xml"))
    assert (s.power_limit_w, s.persistence_mode, s.app_graphics_clock_mhz, s.performance_state) == \
        (300.0, "Disabled", 1312.0, "P8")
    assert parse_nvidia_smi_xml(_read("nvidia-smi-q-x.xml"), index=1) is None
    assert parse_nvidia_smi_xml("<not xml") is None


def test_amd_smi_json_parses_clocks_power_cap_perf_level_and_ecc():
    s = parse_amd_smi_json(_read("amd-smi-static.json"), _read("amd-smi-metric.json"))
    assert s == GpuState(tool="amd-smi", sm_clock_mhz=132.0, mem_clock_mhz=900.0, max_sm_clock_mhz=2100.0,
                         max_mem_clock_mhz=1300.0, power_limit_w=750.0, perf_level="auto", ecc_mode="enabled")
    # newer releases: {"gpu_data": [...]} and limit.ppt0.socket_power_limit
    newer = json.dumps({"gpu_data": [{"gpu": 0, "limit": {"ppt0": {"socket_power_limit": {"value": 1000, "unit": "W"}}}}]})
    assert parse_amd_smi_json(newer, None).power_limit_w == 1000.0


def test_rocm_smi_json_parses_clocks_power_and_perf_level():
    s = parse_rocm_smi_json(_read("rocm-smi.json"))
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.power_limit_w, s.perf_level) == (131.0, 1300.0, 750.0, "auto")
    assert s.settings() == {"power_limit_w": "750", "perf_level": "auto"}


def test_missing_or_failing_tools_give_no_state_and_no_error():
    assert query_gpu_state(which=lambda name: None) is None
    assert query_gpu_state(which=lambda name: "/usr/bin/" + name, run=lambda argv: None) is None
    assert query_gpu_state(which=lambda name: "/usr/bin/" + name, run=lambda argv: "garbage") is None


def test_the_first_answering_tool_wins():
    outputs = {"amd-smi static --json": _read("amd-smi-static.json"),
               "amd-smi metric --json": _read("amd-smi-metric.json")}
    s = query_gpu_state(which=lambda n: None if n == "nvidia-smi" else n, run=lambda argv: outputs.get(" ".join(argv)))
    assert s.tool == "amd-smi"


def test_the_tools_are_the_backend_tables_and_each_has_a_reader():
    assert table_tools() == ("nvidia-smi", "amd-smi", "rocm-smi")
    assert not [t for t in table_tools() if t not in READERS]
    # Planted: a row naming a tool nobody reads is seen (and skipped when asked, not an error).
    xpu = replace(backend("cuda"), name="xpu", label="XPU", smi=("xpu-smi",))
    assert [t for t in table_tools(BACKENDS + (xpu,)) if t not in READERS] == ["xpu-smi"]
    assert query_gpu_state(which=lambda n: n, run=lambda argv: "x", tools=("xpu-smi",)) is None


def test_the_tables_order_decides_which_tool_answers():
    outputs = {"nvidia-smi -q -x": _read("nvidia-smi-q-x.xml"),
               "rocm-smi --showclocks --showmaxpower --showperflevel --json": _read("rocm-smi.json")}
    ask = dict(which=lambda n: n, run=lambda argv: outputs.get(" ".join(argv)))
    assert query_gpu_state(**ask).tool == "nvidia-smi"
    rocm_first = (replace(backend("rocm"), smi=("rocm-smi",)), backend("cuda"))
    assert query_gpu_state(**ask, tools=table_tools(rocm_first)).tool == "rocm-smi"


def test_fingerprint_records_gpu_state_on_gpu_backends_only(monkeypatch):
    from vlmpath.runner import run_files
    from vlmpath.measure import gpu_state

    state = parse_nvidia_smi_xml(_read("nvidia-smi-q-x.xml"))
    monkeypatch.setattr(gpu_state, "query_gpu_state", lambda: state)
    assert run_files.gpu_state("cuda") == state.to_dict()
    assert run_files.gpu_state("cpu") is None
    monkeypatch.setattr(gpu_state, "query_gpu_state", lambda: None)
    assert run_files.gpu_state("rocm") is None


BASE, HEAD = sha("gb"), sha("gh")


def _pair(tmp_path, base_state, head_state):
    from vlmpath.compare.asv_results import load_asv
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.compare.verdict import compare

    suite = {"b.B.track_tok": ("tok/s", [], [], [100.0], None)}
    write_asv_run(tmp_path, "cuda-h200", BASE, suite, fingerprint("cuda", gpu_state=base_state))
    write_asv_run(tmp_path, "cuda-h200", HEAD, suite, fingerprint("cuda", gpu_state=head_state))
    return compare(load_asv(tmp_path, BASE), load_asv(tmp_path, HEAD), Thresholds.default())


def test_a_changed_clock_is_flagged_in_the_comparison_and_the_comment(tmp_path):
    from vlmpath.compare.comparison import ComparisonReport
    from vlmpath.render.comment import render_markdown

    base = parse_nvidia_smi_xml(_read("nvidia-smi-q-x.xml"))
    head = replace(base, app_graphics_clock_mhz=1410.0, sm_clock_mhz=210.0, performance_state="P8")
    rep = _pair(tmp_path, base.to_dict(), head.to_dict())
    (m,) = rep.machines
    # the setting is flagged; the readings (current clock, P-state) are not
    assert m.toolchain_changes == (("gpu.app_graphics_clock_mhz", "1980", "1410"),)
    md = render_markdown(rep)
    line = next(x for x in md.splitlines() if "GPU settings changed between base and head" in x)
    assert "1980 -> 1410" in line.replace("\\", "") and "app_graphics_clock_mhz" in line.replace("\\", "")
    # survives the comparison.json round trip the comment workflow uses
    again = ComparisonReport.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert again.machines[0].toolchain_changes == m.toolchain_changes


def test_same_gpu_state_or_one_side_without_state_is_not_flagged(tmp_path):
    state = parse_nvidia_smi_xml(_read("nvidia-smi-q-x.xml")).to_dict()
    assert _pair(tmp_path / "a", state, dict(state, sm_clock_mhz=345.0)).machines[0].toolchain_changes == ()
    assert _pair(tmp_path / "b", state, None).machines[0].toolchain_changes == ()


def test_fingerprint_gpu_survives_the_run_results_round_trip():
    from vlmpath.compare.records import Fingerprint

    fp = Fingerprint.from_dict(fingerprint("cuda", gpu_state={"power_limit_w": 700.0, "sm_clock_mhz": 1.0}))
    assert fp.gpu == (("power_limit_w", "700"),)
    from dataclasses import asdict

    assert Fingerprint.from_dict(json.loads(json.dumps(asdict(fp)))) == fp
