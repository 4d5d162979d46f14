"""Peak memory per case (``vlmpath.measure.memory``): measured on CPU or explicitly not
measured (never 0 by accident); the GPU branch with a fake ``torch.cuda``; a planted extra
allocation moves the metric on both branches; the metric is gated (lower, banded)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vlmpath.measure.memory import LiveTensorBytes, PeakMemory, peak_memory


class FakeCuda:
    """The allocator counters ``peak_memory`` reads, driven by ``alloc``/``free``."""

    def __init__(self, resident: int = 1000, reserved_extra: int = 4096):
        self.allocated = resident
        self.peak = resident
        self.reserved_extra = reserved_extra
        self.calls: list[str] = []

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def free(self, n: int) -> None:
        self.allocated -= n

    def synchronize(self, dev=None):
        self.calls.append("synchronize")

    def reset_peak_memory_stats(self, dev=None):
        self.calls.append("reset")
        self.peak = self.allocated

    def memory_allocated(self, dev=None):
        return self.allocated

    def max_memory_allocated(self, dev=None):
        return self.peak

    def max_memory_reserved(self, dev=None):
        return self.peak + self.reserved_extra


def _fake_torch(cuda: FakeCuda, hip=None):
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(hip=hip))


def _gpu_pass(cuda: FakeCuda, extra: int = 0) -> PeakMemory:
    with peak_memory("cuda:0", _fake_torch(cuda)) as probe:
        cuda.alloc(500)
        cuda.alloc(extra)  # the planted allocation
        cuda.free(500 + extra)
    return probe.result


def test_gpu_branch_reads_allocator_counters_above_resident():
    cuda = FakeCuda(resident=10_000)
    cuda.alloc(50_000)  # a peak before the pass must not count: the probe resets it
    cuda.free(50_000)
    res = _gpu_pass(cuda)
    assert res.allocated == 500  # the pass's own peak, not the resident 10 000
    assert res.reserved == 10_500 + 4096
    assert cuda.calls[:2] == ["synchronize", "reset"] and cuda.calls[-1] == "synchronize"
    assert res.reason is None and "max_memory_allocated" in res.method


def test_planted_allocation_moves_the_gpu_metric():
    base, head = _gpu_pass(FakeCuda()), _gpu_pass(FakeCuda(), extra=1 << 20)
    assert head.allocated - base.allocated == 1 << 20
    assert head.reserved > base.reserved


def test_rocm_uses_the_same_api():
    cuda = FakeCuda()
    with peak_memory("cuda:0", _fake_torch(cuda, hip="6.2")) as probe:
        cuda.alloc(7)
    assert probe.result.allocated == 7 and "HIP" in probe.result.method


def test_cpu_live_tensor_bytes_count_the_peak_and_release_freed_tensors():
    with LiveTensorBytes() as live:
        a = torch.empty(1024, dtype=torch.float32)  # 4 KiB
        b = a.view(32, 32)  # same storage: not counted again
        del a, b
        c = torch.empty(512, dtype=torch.float64)  # 4 KiB, after the first was freed
        assert live.live == 4096
    assert live.peak == 4096
    del c
    with LiveTensorBytes() as live2:
        a = torch.empty(1024, dtype=torch.float32)
        c = torch.empty(512, dtype=torch.float64)  # both alive: 8 KiB
    assert live2.peak == 8192
    del a, c


def test_unknown_device_is_not_measured_with_a_reason():
    with peak_memory("meta") as probe:
        pass
    assert probe.result.allocated is None and "meta" in probe.result.reason


@pytest.fixture(scope="module")
def session():
    from vlmpath.suite.measure import Session

    return Session("cpu")


def _measure(session, count=True):
    from vlmpath.engines.pipelines import DEFAULT_PIPELINE
    from vlmpath.suite.measure import Case, measure_case

    return measure_case(Case("many_small_images", DEFAULT_PIPELINE), session, repeat=1, count=count)


@pytest.fixture(scope="module")
def base_record(session):
    return _measure(session)


def test_cpu_case_measures_peak_bytes_or_says_not_measured(session, base_record):
    rec = base_record
    assert rec.peak_bytes is not None and rec.peak_bytes > 0
    assert rec.reserved_bytes is None and rec.memory["reason"]
    skipped = _measure(session, count=False)
    assert skipped.peak_bytes is None and "not measured" in skipped.memory["reason"]


def plant_injector(monkeypatch, extra) -> None:
    """Wrap the default pipeline's injector so that ``extra(dest)`` runs in every injection
    (the routine reads ``reference.INJECTORS`` when it is built)."""
    from vlmpath.core.registry import Registry
    from vlmpath.engines import reference
    from vlmpath.engines.pipelines import DEFAULT_PIPELINE

    name = DEFAULT_PIPELINE.inject
    original = reference.INJECTORS[name]

    def planted(dest, mask, rows):
        keep = extra(dest)  # alive while the injection runs
        original(dest, mask, rows)
        del keep

    entries = {n: reference.INJECTORS[n] for n in reference.INJECTORS}
    monkeypatch.setattr(reference, "INJECTORS", Registry("inject strategy", {**entries, name: planted}))


def test_planted_extra_allocation_moves_the_cpu_metric(session, base_record, monkeypatch):
    base = base_record
    extra = 64 * 2**20
    plant_injector(monkeypatch, lambda dest: torch.ones(extra // 4))  # 64 MiB
    head = _measure(session)
    assert head.peak_bytes >= extra and head.peak_bytes > base.peak_bytes + extra // 2


def test_memory_metrics_are_gated_lower_and_banded():
    from vlmpath.compare.comparison import Verdict
    from vlmpath.compare.records import Metric
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.compare.verdict import judge

    cfg = Thresholds.default()
    name = "bench_embed.EmbedRoutine.track_peak_bytes"

    def m(v):
        return Metric("cpu-x", name, (("pipeline", "default"),), "bytes", v)

    assert judge(m(1000), m(1050), cfg, "cpu").verdict is Verdict.UNCHANGED  # within 10%
    worse = judge(m(1000), m(1200), cfg, "cpu")
    assert worse.verdict is Verdict.REGRESSION and worse.factor == pytest.approx(0.10)
    assert judge(m(1000), m(1060), cfg, "gpu").verdict is Verdict.REGRESSION  # GPU band 5%


def test_benchmark_skips_a_not_measured_metric_and_never_reports_zero():
    from vlmpath.suite import cases

    with pytest.raises(NotImplementedError, match="does not record"):
        cases.require_measured({"tok_per_s": 1.0, "error": None}, "peak_bytes")
    with pytest.raises(NotImplementedError, match="allocator keeps no pool"):
        cases.require_measured({"reserved_bytes": None, "memory_reason": "reserved: the CPU allocator keeps no pool",
                                "error": None}, "reserved_bytes")
    assert cases.require_measured({"peak_bytes": 123, "error": None}, "peak_bytes") == 123.0
