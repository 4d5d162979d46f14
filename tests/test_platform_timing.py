"""Platform probe and device timer: the real CPU branch, and the GPU branches on CPU with
fake torch / cuda modules (only counts and conversions are checked, never timing)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.platform import (
    MACHINE_ENV,
    detect_backend,
    machine_name,
    probe,
    slug,
    sync,
)
from vlmpath.measure.timing import DeviceTimer, Timing, time_fn


def _fake_torch(*, name: str, hip: str | None, cuda: str | None, props, driver: int | None = None):
    cuda_ns = SimpleNamespace(
        is_available=lambda: True,
        get_device_name=lambda i=0: name,
        get_device_properties=lambda i=0: props,
    )
    if driver is not None:
        cuda_ns.driver_version = lambda: driver
    return SimpleNamespace(__version__="2.6.0+fake", cuda=cuda_ns,
                           version=SimpleNamespace(hip=hip, cuda=cuda))


MI300X = dict(name="AMD Instinct MI300X", hip="6.2.41133", cuda=None,
              props=SimpleNamespace(gcnArchName="gfx942:sramecc+:xnack-"))
H200 = dict(name="NVIDIA H200", hip=None, cuda="12.4", props=SimpleNamespace(major=9, minor=0),
            driver=12040)


def test_probe_on_cpu():
    plat = probe(env={})
    if torch.cuda.is_available():  # pragma: no cover - this test is for CPU CI
        pytest.skip("a GPU is present")
    assert plat.backend == "cpu" and plat.device == "cpu" and not plat.is_gpu
    assert plat.machine.startswith("cpu-") and plat.machine == machine_name("cpu", plat.device_name)
    assert plat.torch == torch.__version__ and plat.hip is None and plat.driver is None
    d = plat.to_dict()
    assert d["machine"] == plat.machine and set(d) >= {"backend", "arch", "python", "num_cpu", "vlmpath"}


def test_probe_reads_the_transformers_version_without_importing_it():
    import subprocess
    import sys

    # A fresh interpreter: this test process may have imported transformers already.
    code = ("import sys; from vlmpath.measure.platform import probe; v = probe(env={}).transformers; "
            "print(v, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    import transformers

    assert out == [transformers.__version__, "False"]


def test_probe_rocm_branch_with_a_fake_torch():
    plat = probe(_fake_torch(**MI300X), env={})
    assert plat.backend == "rocm" and plat.device == "cuda:0" and plat.is_gpu
    assert plat.arch == "gfx942"  # features after ':' are not the architecture
    assert plat.device_name == "AMD Instinct MI300X"
    assert plat.machine == "rocm-mi300x"
    assert plat.hip == plat.driver == "6.2.41133" and plat.cuda is None
    assert plat.torch == "2.6.0+fake"


def test_probe_cuda_branch_with_a_fake_torch():
    plat = probe(_fake_torch(**H200), env={})
    assert plat.backend == "cuda" and plat.device == "cuda:0"
    assert plat.arch == "sm_90" and plat.machine == "cuda-h200"
    assert plat.cuda == "12.4" and plat.hip is None
    assert plat.driver == "12.4"  # 12040 -> "12.4"
    no_driver = dict(H200, driver=None)
    assert probe(_fake_torch(**no_driver), env={}).driver is None


def test_detect_backend_without_a_device():
    fake = _fake_torch(**MI300X)
    fake.cuda.is_available = lambda: False
    assert detect_backend(fake) == "cpu"
    assert detect_backend(_fake_torch(**MI300X)) == "rocm"
    assert detect_backend(_fake_torch(**H200)) == "cuda"


def test_machine_override_and_validation(monkeypatch):
    assert probe(_fake_torch(**H200), env={MACHINE_ENV: "h200-ci.1"}).machine == "h200-ci.1"
    monkeypatch.setenv(MACHINE_ENV, "pinned_box")
    assert probe().machine == "pinned_box"  # read from the process environment by default
    for bad in ("has space", "../escape", "a/b", "-leading", "x" * 65):
        with pytest.raises(VlmpathError) as e:
            probe(_fake_torch(**MI300X), env={MACHINE_ENV: bad})
        assert MACHINE_ENV in str(e.value) and "letters, digits" in str(e.value)
    monkeypatch.setenv(MACHINE_ENV, "")  # empty: no override
    assert probe(_fake_torch(**MI300X)).machine == "rocm-mi300x"


def test_slug():
    assert slug("AMD Instinct MI300X") == "mi300x"
    assert slug("NVIDIA H200") == "h200"
    assert slug("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz") == "xeon-platinum-8375c"
    assert slug("NVIDIA") == "unknown"


def test_sync_is_a_no_op_on_cpu(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda dev=None: calls.append(dev))
    sync("cpu")  # must not touch torch.cuda
    assert calls == []
    # The same spy sees a CUDA device synchronised (so the spy would see a CPU mistake too).
    sync("cuda:0")
    assert calls == [torch.device("cuda:0")]


# --- DeviceTimer ------------------------------------------------------------------------
class FakeEvent:
    def __init__(self, log: list, ms: float, enable_timing: bool = False):
        self.log, self.ms, self.enable_timing = log, ms, enable_timing
        self.recorded = self.synced = 0
        log.append(("new", self))

    def record(self):
        self.recorded += 1
        self.log.append(("record", self))

    def synchronize(self):
        self.synced += 1
        self.log.append(("synchronize", self))

    def elapsed_time(self, end: FakeEvent) -> float:
        assert end.recorded, "elapsed_time before the end event was recorded"
        self.log.append(("elapsed", self))
        return self.ms


def _fake_cuda(ms: float):
    log: list = []
    return SimpleNamespace(Event=lambda enable_timing=False: FakeEvent(log, ms, enable_timing)), log


def test_device_timer_gpu_branch_uses_events():
    cuda, log = _fake_cuda(2.5)
    timer = DeviceTimer("cuda:0", cuda=cuda)
    assert timer.method == "cuda-events"
    with timer as t:
        log.append(("body", None))  # the timed region: it must sit between the two records
    start, end = [e for kind, e in log if kind == "new"]
    assert start.enable_timing and end.enable_timing
    assert start.recorded == end.recorded == 1 and end.synced == 0  # no sync until read
    assert t.seconds == pytest.approx(0.0025)  # ms -> s
    assert end.synced == 1 and start.synced == 0  # waits on the end event only
    kinds = [(k, e is end) for k, e in log if k != "new"]
    assert kinds == [("record", False), ("body", False), ("record", True), ("synchronize", True), ("elapsed", False)]


def test_device_timer_clamps_negative_event_times():
    cuda, _ = _fake_cuda(-0.004)  # ROCm can read tiny negative values
    with DeviceTimer("cuda", cuda=cuda) as t:
        pass
    assert t.seconds == 0.0


def test_device_timer_cpu_branch_reads_the_clock_around_the_body(monkeypatch):
    # A scripted perf_counter (no real timing in a unit test): the timer must read it once
    # on entry and once on exit, after the body, and report the difference in seconds.
    import vlmpath.measure.timing as timing

    clock = iter([10.0, 10.25])
    reads: list[str] = []

    def perf_counter() -> float:
        reads.append("clock")
        return next(clock)

    monkeypatch.setattr(timing.time, "perf_counter", perf_counter)
    with DeviceTimer("cpu") as t:
        reads.append("body")
    assert t.method == "perf_counter"
    assert reads == ["clock", "body", "clock"]
    assert t.seconds == pytest.approx(0.25)


def test_time_fn_counts_calls_and_samples():
    calls = []
    cuda, log = _fake_cuda(1.0)
    timing = time_fn(lambda: calls.append(1), "cuda:0", repeat=4, warmup=2, cuda=cuda)
    assert isinstance(timing, Timing) and timing.method == "cuda-events"
    assert len(calls) == 6 and timing.samples == (0.001,) * 4
    assert timing.median == timing.min == 0.001 and timing.total == pytest.approx(0.004)
    assert sum(1 for k, _ in log if k == "synchronize") == 4
    cpu = time_fn(lambda: None, "cpu", repeat=3, warmup=0)
    assert cpu.method == "perf_counter" and len(cpu.samples) == 3 and min(cpu.samples) >= 0
    with pytest.raises(ValueError, match="repeat"):
        time_fn(lambda: None, "cpu", repeat=0)
