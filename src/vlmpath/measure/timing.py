"""How long did this take on the device?

On a GPU, host clocks only measure how long it took to *queue* the work. ``DeviceTimer``
records a pair of CUDA events (HIP events on ROCm: same ``torch.cuda`` API) around the
region and synchronises once when the time is read; on CPU it uses ``perf_counter``.
``time_fn`` repeats a call and returns every sample so that later comparisons can run a
significance test. Nothing here prints or plots.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch


@dataclass(frozen=True)
class Timing:
    """Samples (seconds) of one measured call; ``method`` says which clock made them."""

    samples: tuple[float, ...]
    method: str  # "cuda-events" | "perf_counter"

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def total(self) -> float:
        return sum(self.samples)


class DeviceTimer:
    """Times one region: ``with DeviceTimer(dev) as t: ...; t.seconds``.

    On a GPU the elapsed time comes from events recorded on the current stream; reading
    ``seconds`` synchronises on the end event. ROCm events can read tiny negative values
    for very short regions, so the result is clamped at zero.
    """

    def __init__(self, device: torch.device | str, cuda: ModuleType | None = None):
        self.device = torch.device(device)
        self._cuda = torch.cuda if cuda is None else cuda
        self._gpu = self.device.type == "cuda"
        self._start = self._end = None
        self._t0 = self._t1 = 0.0

    @property
    def method(self) -> str:
        return "cuda-events" if self._gpu else "perf_counter"

    def __enter__(self) -> DeviceTimer:
        if self._gpu:
            self._start = self._cuda.Event(enable_timing=True)
            self._end = self._cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self._gpu:
            self._end.record()
        else:
            self._t1 = time.perf_counter()

    @property
    def seconds(self) -> float:
        if self._gpu:
            self._end.synchronize()
            return max(0.0, self._start.elapsed_time(self._end) / 1000.0)
        return self._t1 - self._t0


def time_fn(
    fn: Callable[[], object],
    device: torch.device | str,
    *,
    repeat: int = 5,
    warmup: int = 1,
    cuda: ModuleType | None = None,
) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``repeat`` times, each timed on the device."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    for _ in range(warmup):
        fn()
    samples = []
    method = "perf_counter"
    for _ in range(repeat):
        with DeviceTimer(device, cuda=cuda) as t:
            fn()
        samples.append(t.seconds)
        method = t.method
    return Timing(tuple(samples), method)


from vlmpath.measure.instrument_check import pristine as _pristine  # noqa: E402 (last: nothing later touched us)

_pristine(__name__)
