"""The backend table (vlmpath.core.backends) is where a vendor is spelled out: machine-name
prefixes, the GPU set, the device string and the cross-vendor pair are read from it."""

from __future__ import annotations

import dataclasses

import pytest

from vlmpath.compare import verdict
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core import backends
from vlmpath.core.backends import BACKENDS, GPU_BACKENDS, backend, backend_from_machine
from vlmpath.core.errors import UnknownNameError
from vlmpath.measure.platform import probe


def _run(commit: str, values: dict[str, float]) -> RunResults:
    return RunResults(commit=commit, machines=tuple(
        MachineRun(machine=name, commit=commit, metrics=(Metric(
            machine=name, benchmark="b.B.track_tok_per_s", params=(), unit="tok/s", value=v),))
        for name, v in values.items()))


def test_the_table_holds_todays_backends():
    assert [b.name for b in BACKENDS] == ["cpu", "cuda", "rocm"]
    assert GPU_BACKENDS == {"cuda", "rocm"}
    assert backend("rocm").device == "cuda:0"  # ROCm torch reuses torch.cuda
    assert (backend("cuda").smi, backend("rocm").smi) == (("nvidia-smi",), ("amd-smi", "rocm-smi"))
    assert backends.gpu_labels() == "CUDA or ROCm"
    with pytest.raises(UnknownNameError, match="xpu"):
        backend("xpu")


@pytest.mark.parametrize("machine,expected", [
    ("cuda-h200", "cuda"), ("ROCM-mi300x", "rocm"), ("cpu-epyc", "cpu"), ("gpu-box", "cpu"), ("cudabox", "cpu"),
])
def test_machine_prefix(machine, expected):
    assert backend_from_machine(machine) == expected


def test_a_new_row_is_all_a_prefix_needs(monkeypatch):
    xpu = dataclasses.replace(backend("cuda"), name="xpu", label="XPU", smi=("xpu-smi",), toolkit_key=None)
    assert backend_from_machine("xpu-max1550") == "cpu"
    monkeypatch.setattr(backends, "BACKENDS", BACKENDS + (xpu,))
    assert backend_from_machine("xpu-max1550") == "xpu"


def test_the_vendor_comparison_reads_the_table():
    base = _run("b" * 40, {"cuda-h200": 1000.0, "rocm-mi300x": 900.0, "cpu-epyc": 10.0})
    head = _run("h" * 40, {"cuda-h200": 1000.0, "rocm-mi300x": 450.0, "cpu-epyc": 10.0})
    rows = verdict.compare(base, head, Thresholds.default()).cross_vendor
    assert [(r.reference_machine, r.other_machine) for r in rows] == [("cuda-h200", "rocm-mi300x")]
    assert rows[0].head_ratio == pytest.approx(0.45) and rows[0].flagged
    # Planted: rows that make the CPU a GPU backend; the comparison follows the rows given.
    cpu_as_gpu = dataclasses.replace(backend("cpu"), band="gpu")
    rows = verdict.compare(base, head, Thresholds.default(), backends=(backend("cuda"), cpu_as_gpu)).cross_vendor
    assert [(r.reference_machine, r.other, r.other_machine) for r in rows] == [("cuda-h200", "cpu", "cpu-epyc")]
    # Without the reference among the rows there is nothing to set beside it.
    assert verdict.compare(base, head, Thresholds.default(), backends=(backend("rocm"),)).cross_vendor == ()


def test_probe_takes_the_device_string_from_the_table():
    plat = probe()  # this machine: CPU in CI
    assert plat.device == backend(plat.backend).device
    assert plat.is_gpu == backend(plat.backend).is_gpu


def test_noise_band_and_gpu_come_from_the_table(monkeypatch):
    assert [backends.noise_band(n) for n in ("cuda", "rocm", "cpu", None, "gpu-box")] == ["gpu", "gpu", "cpu", "cpu", "cpu"]
    assert backends.is_gpu("rocm") and not backends.is_gpu("cpu") and not backends.is_gpu("xpu")
    xpu = dataclasses.replace(backend("cuda"), name="xpu", label="XPU")
    monkeypatch.setattr(backends, "BACKEND_BY_NAME", {**backends.BACKEND_BY_NAME, "xpu": xpu})
    assert backends.noise_band("xpu") == "gpu" and backends.is_gpu("xpu")
