"""How much memory does one pass of the routine take at its peak, on the device it runs on?

``PeakMemory`` is the answer for one pass: ``allocated`` (peak bytes of live tensors above
what was already allocated when the pass began: the routine's own peak, not the weights)
and ``reserved`` (peak bytes the caching allocator held, GPU only), or None with a
``reason`` when a number cannot be measured. A value is never 0 by accident: "not
measured" is None and says why.

How, per device:

- CUDA and ROCm (ROCm builds reuse ``torch.cuda``): the caching allocator's own counters,
  ``reset_peak_memory_stats`` before the pass, ``max_memory_allocated`` /
  ``max_memory_reserved`` after it (device synchronised on both ends so that queued work
  belongs to the pass it was issued in).
- CPU: torch keeps no peak counter for the CPU allocator, so ``LiveTensorBytes`` (a
  ``TorchDispatchMode``) counts the storages the pass's aten ops create and frees them
  when their last Python tensor dies (``weakref.finalize``); the peak of that sum is the
  pass's peak tensor bytes. A storage is counted once however many views share it.
  It runs under Python dispatch, so ``measure_case`` gives it its own untimed pass, done
  only with the sync-counting pass (the diagnostic passes; ``--no-syncs`` skips both).

``torch_mod`` is injectable so that the GPU branch is tested on CPU with a fake module.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from functools import partial
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from types import ModuleType

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

NOT_MEASURED_NO_COUNT = "not measured: CPU peak tensor bytes are read with the sync-counting pass, which was skipped"


@dataclass(frozen=True)
class PeakMemory:
    """Peak memory of one pass (see the module docstring); None fields are 'not measured'."""

    allocated: int | None
    reserved: int | None
    method: str
    reason: str | None = None  # why a None field was not measured

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def not_measured(cls, reason: str) -> PeakMemory:
        return cls(None, None, "none", reason)


class LiveTensorBytes(TorchDispatchMode):
    """Counts bytes of the storages created by aten ops inside the block, live and peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._storages: dict[tuple[str, int], list[int]] = {}  # key -> [nbytes, live tensors]
        # Weak references to the tracked tensors (a plain weakref with a callback is far
        # cheaper per op than weakref.finalize); kept here so that the callbacks fire. Keyed
        # by the ref's id, not a set of refs: equal-hash weakrefs to live tensors compare
        # their referents, and Tensor.__eq__ is elementwise ("Boolean value ... ambiguous").
        self._refs: dict[int, weakref.ref] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse / meta tensors own no storage
            return
        nbytes, ptr = storage.nbytes(), storage.data_ptr()
        if nbytes == 0 or ptr == 0:
            return
        key = (str(t.device), ptr)
        entry = self._storages.get(key)
        if entry is None:
            entry = self._storages[key] = [nbytes, 0]
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        entry[1] += 1
        ref = weakref.ref(t, partial(self._release, key))
        self._refs[id(ref)] = ref

    def _release(self, key: tuple[str, int], ref: weakref.ref) -> None:
        self._refs.pop(id(ref), None)
        entry = self._storages.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            self.live -= entry[0]
            del self._storages[key]


class PeakProbe:
    """What ``peak_memory`` yields: ``result`` is set when the block exits."""

    result: PeakMemory = PeakMemory.not_measured("the block did not finish")


@contextmanager
def peak_memory(device: torch.device | str, torch_mod: ModuleType = torch) -> Iterator[PeakProbe]:
    """Measure the peak memory of the block on ``device`` (see the module docstring)."""
    dev = torch.device(device)
    probe = PeakProbe()
    if dev.type == "cuda":
        cuda = torch_mod.cuda
        cuda.synchronize(dev)
        cuda.reset_peak_memory_stats(dev)
        start = int(cuda.memory_allocated(dev))
        yield probe
        cuda.synchronize(dev)
        hip = getattr(getattr(torch_mod, "version", None), "hip", None)
        probe.result = PeakMemory(
            allocated=int(cuda.max_memory_allocated(dev)) - start,
            reserved=int(cuda.max_memory_reserved(dev)),
            method="torch.cuda.max_memory_allocated" + (" (HIP)" if hip else ""),
        )
    elif dev.type == "cpu":
        with LiveTensorBytes() as live:
            yield probe
        probe.result = PeakMemory(
            allocated=live.peak, reserved=None, method="live tensor bytes (dispatch mode)",
            reason="reserved: the CPU allocator keeps no pool of its own to report",
        )
    else:
        yield probe
        probe.result = PeakMemory.not_measured(f"not measured: no peak-memory counter for device type {dev.type!r}")


from vlmpath.measure.instrument_check import pristine as _pristine  # noqa: E402 (last: nothing later touched us)

_pristine(__name__)
