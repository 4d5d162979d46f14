"""How many device-to-host synchronisations would this code force on a GPU?

``count_syncs()`` answers that on CPU tensors, so CI without a GPU can still say that a
change added a ``.item()`` or a ``torch.where(mask)`` to the embedding path::

    with count_syncs() as sc:
        embed(...)
    sc.count, sc.events          # 2, {"aten.nonzero": 1, "Tensor.item": 1}

What counts, and why
--------------------
Every tensor stands for a device tensor unless it is marked as host bookkeeping (below).
An operation counts when the host must wait for device data to continue:

* ATen ops whose output shape or Python value depends on tensor *data*, found by op tags at
  the dispatch level (a ``TorchDispatchMode``), not by a hand list: ``dynamic_output_shape``
  (``nonzero`` - hence one-argument ``torch.where`` -, ``masked_select``, ``_unique2``,
  ``unique_consecutive``, ``unique_dim``, ``bincount``, ``repeat_interleave.Tensor``) and
  ``data_dependent_output`` (``_local_scalar_dense``, ``item``). Checked on torch 2.13.
* Refinements where the tag over- or under-states the CUDA kernel (each checked with
  FakeTensorMode, which raises for data-dependent shapes, or against the CUDA source):
  ``aten.index`` is tagged for every advanced index but only a *bool* index needs a
  ``nonzero``; ``index_put_`` (``dest[mask] = src``) is untagged but runs ``nonzero`` on a
  bool index inside its kernel; ``repeat_interleave`` with ``output_size=`` is sync-free;
  ``equal``/``allclose`` return a Python bool; ``masked_fill`` with a device *tensor* value
  calls ``value.item()`` on CUDA (a Python number is free); ``host.copy_(device)`` is a D2H copy.
* Python-level readbacks, found by a ``TorchFunctionMode``, because on a CPU tensor some of
  them never reach the dispatcher (``.cpu()`` is a no-op, ``.tolist()``/``.numpy()`` read
  memory directly): ``Tensor.item``, ``tolist``, ``cpu``, ``numpy``, ``__array__``,
  ``__bool__`` (``if t:``), ``__int__``, ``__float__``, ``__complex__``, ``__index__``,
  ``__contains__``, ``__format__``, ``__repr__``; and ``F.one_hot`` without ``num_classes``.
  While such a call runs, dispatch-level events are suppressed, so one user-level call is
  one event (``.item()`` is not also counted as ``aten._local_scalar_dense``; the min/max
  checks that ``one_hot`` runs on CPU only are not counted at all).
* Not counted because they are sync-free: three-argument ``where``, ``masked_fill_`` with a
  number, ``masked_scatter_`` (its CUDA size check is asynchronous), ``split`` by a Python
  list, ``isin``, ``clamp_``, ``embedding``, ``index_select``, long-index reads and writes,
  ``cat``, ``nonzero_static``.

Host bookkeeping
----------------
The engine keeps some tensors on the host by design (offsets, lengths, ``grid_thw``).
``host(t)`` marks one by setting the attribute ``t._vlmpath_host = True`` on the tensor
itself: the mark lives and dies with the tensor, and no registry or module state exists.
Marks propagate like device placement: an aten op whose tensor inputs are *all* host tensors
gives host outputs (``host(grid).prod(-1) // 4`` stays host), and the tensor returned by a
readback ``.cpu()`` is host (on CPU ``.cpu()`` returns the tensor itself, so an alias view is
returned instead, to keep the input unmarked). Ops and readbacks whose data comes only from
host tensors never count. Python numbers and lists are host by nature. A factory call
(``torch.tensor([...])``, ``arange``) gives a *device* tensor: on a CPU build "no device
argument" and "device=cpu" look the same, so mark bookkeeping explicitly with ``host()``.
``Tensor.to`` is not interpreted for the same reason (``.to(device)`` and ``.to("cpu")`` are
the same call on CI): its result keeps the host-ness of its input. Write ``.cpu()`` for a
readback you want counted.

Nesting
-------
A ``count_syncs()`` block inside another one pauses the outer block: the inner block's
events are counted by the inner ``SyncCount`` only, and the outer total excludes them (so a
routine can report ``syncs`` outside the vision tower and ``encoder_syncs`` inside it).
``sc.paused()`` excludes a region without counting it anywhere. Counting follows the
thread that entered the block (torch's mode stacks are thread-local).

GPU cross-check
---------------
When ``torch.cuda.is_available()`` (CUDA or ROCm), the block also arms
``torch.cuda.set_sync_debug_mode("warn")``, records the warnings it raises and reports their
number as ``driver_count`` (``None`` on CPU); the previous mode is restored on exit and other
warnings are re-emitted. Expect ``count >= driver_count``: the driver sees only syncs that go
through c10's ``memcpy_and_sync``/stream synchronize.

Known limits
------------
* Pageable ``non_blocking=True`` H2D copies block the host but are not counted (no readback
  happens); neither does the driver flag them.
* Syncs inside custom kernels, C++ extensions, Triton launchers or ``torch.distributed``
  calls (e.g. a gloo ``all_reduce`` of a hit mask) and explicit ``synchronize()`` calls are
  invisible to both modes.
* Composite ops are seen decomposed, so a CPU-only check inside one (like ``one_hot``'s)
  would count unless special-cased; a new such op may overcount until it is.
* ``warnings.catch_warnings`` is process-global: do not run two GPU blocks in parallel threads.
"""

from __future__ import annotations

import contextlib
import os
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# Private, but the only way to find an enclosing block without module state; present since
# torch 2.0 and used by torch's own modes.
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode_stack,
)

from vlmpath.core.errors import VlmpathError

__all__ = ["SyncCount", "SyncSite", "count_syncs", "host", "is_host", "syncs_of"]

_HOST_ATTR = "_vlmpath_host"
_DRIVER_TEXT = "synchronizing CUDA operation"  # torch: "called a synchronizing CUDA operation"
_STACK_DEPTH = 4

_SYNC_TAGS = frozenset(
    getattr(torch.Tag, name)
    for name in ("dynamic_output_shape", "data_dependent_output")
    if hasattr(torch.Tag, name)
)
_aten = torch.ops.aten
# Python-level readbacks: they copy device data to the host, or turn it into a Python value.
_READBACKS = {
    getattr(torch.Tensor, name): f"Tensor.{name}"
    for name in (
        "item", "tolist", "cpu", "numpy", "__array__", "__bool__", "__int__", "__float__",
        "__complex__", "__index__", "__contains__", "__format__", "__repr__",
    )
}
_IDX_BOOL = (torch.bool, torch.uint8)

# Rule kinds for aten ops (see _rule): which inputs decide whether the op syncs.
_NONE, _ANY_DEVICE, _BOOL_INDEX, _REPEATS, _FILL_VALUE, _COPY_D2H = range(6)


def host(t: torch.Tensor) -> torch.Tensor:
    """Mark ``t`` as host-side bookkeeping (offsets, lengths, grid_thw); return ``t`` itself."""
    if not isinstance(t, torch.Tensor):
        raise VlmpathError(
            f"host() expects a torch.Tensor, got {type(t).__name__}: Python numbers and lists "
            "are host data already, pass only tensors"
        )
    setattr(t, _HOST_ATTR, True)
    return t


def is_host(t: torch.Tensor) -> bool:
    """True if ``t`` was marked with ``host()`` or derived only from host tensors."""
    return getattr(t, _HOST_ATTR, False)


@dataclass(frozen=True)
class SyncSite:
    """One counted event and the innermost caller frames outside torch ("file:line in fn")."""

    op: str
    stack: tuple[str, ...]


@dataclass
class SyncCount:
    """Syncs counted by one ``count_syncs()`` block; live while it runs, final on exit."""

    events: dict[str, int] = field(default_factory=dict)
    driver_count: int | None = None
    sites: list[SyncSite] = field(default_factory=list)
    record_stacks: bool = False
    _paused: int = field(default=0, repr=False, compare=False)

    @property
    def count(self) -> int:
        return sum(self.events.values())

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Run a region without counting its syncs (host marks still propagate)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "events": dict(self.events),
                "driver_count": self.driver_count}

    def _add(self, op: str) -> None:
        self.events[op] = self.events.get(op, 0) + 1
        if self.record_stacks:
            self.sites.append(SyncSite(op, _caller_frames()))


def _caller_frames() -> tuple[str, ...]:
    """Innermost frames outside torch and this module: the lines a PR comment should name."""
    skip = (os.path.dirname(torch.__file__), os.path.abspath(__file__), contextlib.__file__)
    frames = [f for f in traceback.extract_stack()
              if not any(f.filename.startswith(s) for s in skip)]
    return tuple(f"{_short(f.filename)}:{f.lineno} in {f.name}" for f in frames[-_STACK_DEPTH:])


def _short(path: str) -> str:
    parts = path.replace(os.sep, "/").split("/")
    return "/".join(parts[-2:])


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    # aten arguments hold tensors directly or in one level of list (cat, index, index_put_).
    out: list[torch.Tensor] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(b for b in a if isinstance(b, torch.Tensor))
    return out


def _mark_outputs(out: Any) -> None:
    for o in out if isinstance(out, (list, tuple)) else (out,):
        if isinstance(o, torch.Tensor):
            setattr(o, _HOST_ATTR, True)


def _rule(func: torch._ops.OpOverload) -> int:
    packet = func.overloadpacket
    if packet in (_aten.index, _aten.index_put_, _aten.index_put, _aten._index_put_impl_):
        return _BOOL_INDEX
    if func is _aten.repeat_interleave.Tensor:
        return _REPEATS
    if func in (_aten.masked_fill_.Tensor, _aten.masked_fill.Tensor):
        return _FILL_VALUE
    if func is _aten.copy_.default:
        return _COPY_D2H
    if packet in (_aten.equal, _aten.allclose, _aten.is_nonzero) or _SYNC_TAGS & set(func.tags):
        return _ANY_DEVICE
    return _NONE


def _arg(args: tuple, kwargs: dict, i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs.get(name)


def _syncs(kind: int, args: tuple, kwargs: dict) -> bool:
    """Does this op, whose inputs are not all host tensors, wait for device data?"""
    if kind == _ANY_DEVICE:
        return True
    if kind == _BOOL_INDEX:  # (self, indices, ...): a device bool index needs a nonzero
        return any(isinstance(i, torch.Tensor) and i.dtype in _IDX_BOOL and not is_host(i)
                   for i in _arg(args, kwargs, 1, "indices") or ())
    if kind == _REPEATS:  # output_size= makes the output shape known without reading data
        return kwargs.get("output_size") is None and not is_host(_arg(args, kwargs, 0, "repeats"))
    if kind == _FILL_VALUE:  # CUDA reads a tensor fill value with .item()
        return not is_host(_arg(args, kwargs, 2, "value"))
    if kind == _COPY_D2H:  # host.copy_(device) reads device memory on the host
        return is_host(_arg(args, kwargs, 0, "self")) and not is_host(_arg(args, kwargs, 1, "src"))
    return False


class _Dispatch(TorchDispatchMode):
    """Counts tagged aten ops and propagates host marks."""

    def __init__(self, sc: SyncCount) -> None:
        super().__init__()
        self.sc = sc
        self.readback_depth = 0  # > 0 while a counted Python-level readback runs
        self._kinds: dict[Any, int] = {}  # per block: OpOverload -> rule kind

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = _tensors(args, kwargs)
        all_host = bool(inputs) and all(is_host(t) for t in inputs)
        if not all_host and not self.readback_depth and not self.sc._paused:
            kind = self._kinds.get(func)
            if kind is None:
                kind = self._kinds[func] = _rule(func)
            if kind != _NONE and _syncs(kind, args, kwargs):
                self.sc._add(f"aten.{func.overloadpacket.__name__}")
        out = func(*args, **kwargs)
        if all_host:
            _mark_outputs(out)
        return out


class _Function(TorchFunctionMode):
    """Counts Python-level readbacks once and hides their inner aten ops from ``_Dispatch``."""

    def __init__(self, sc: SyncCount, dispatch: _Dispatch) -> None:
        super().__init__()
        self.sc, self.dispatch = sc, dispatch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _READBACKS.get(func)
        if name is None and func is F.one_hot:
            # CUDA reads the max only when num_classes is not given; CPU also checks min/max.
            num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
            name = "F.one_hot" if num_classes == -1 else ""
        if name is None:
            return func(*args, **kwargs)
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        # __contains__(self, element): a device element also has to be read.
        device = any(isinstance(a, torch.Tensor) and not is_host(a) for a in args[:2])
        if name and device and not self.sc._paused:
            self.sc._add(name)
        self.dispatch.readback_depth += 1
        try:
            out = func(*args, **kwargs)
            if func is torch.Tensor.cpu and src is not None:
                if out is src and not is_host(src):
                    out = out.view_as(out)  # a real .cpu() gives a new (host) tensor
                _mark_outputs(out)
            return out
        finally:
            self.dispatch.readback_depth -= 1


def _active_count() -> SyncCount | None:
    # The innermost enclosing block, found on torch's (thread-local) dispatch mode stack.
    for mode in reversed(_get_current_dispatch_mode_stack()):
        if isinstance(mode, _Dispatch):
            return mode.sc
    return None


@contextlib.contextmanager
def _driver_check(sc: SyncCount) -> Iterator[None]:
    """Arm torch's sync debug mode in "warn" and count its warnings into ``driver_count``."""
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a repeated sync at one line must count every time
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    driver = [w for w in caught if _DRIVER_TEXT in str(w.message)]
    sc.driver_count = len(driver)
    for w in caught:  # hand every other warning on to whoever listens outside
        if w not in driver:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


@contextlib.contextmanager
def count_syncs(*, record_stacks: bool = False) -> Iterator[SyncCount]:
    """Count the device-to-host syncs of the block; see the module docstring for the rules.

    With ``record_stacks=True`` every event also appends a ``SyncSite`` to ``sc.sites``.
    """
    sc = SyncCount(record_stacks=record_stacks)
    outer = _active_count()
    if outer is not None:
        outer._paused += 1
    try:
        with contextlib.ExitStack() as stack:
            if torch.cuda.is_available():
                stack.enter_context(_driver_check(sc))
            dispatch = _Dispatch(sc)
            stack.enter_context(_Function(sc, dispatch))
            stack.enter_context(dispatch)
            yield sc
    finally:
        if outer is not None:
            outer._paused -= 1


def syncs_of(fn: Callable[..., Any], *args: Any, **kw: Any) -> SyncCount:
    """Call ``fn(*args, **kw)`` once inside ``count_syncs()`` and return the count."""
    with count_syncs() as sc:
        fn(*args, **kw)
    return sc


from vlmpath.measure.instrument_check import pristine as _pristine  # noqa: E402 (last: nothing later touched us)

_pristine(__name__)
