"""What does every engine's routine start with, whatever the engine?

``EngineRoutineBase`` is the common prologue of an adapter's routine (``sglang_adapter``,
``vllm_adapter``): the api, workload, encoder, encoder region, the table's device and the
``EncodeStats``; EVS workloads refused with the engine's reason (EVS frame re-layout is
model code in both engines, not the shared path); and the planted fault of the tests.

``VLMPATH_ENGINE_FAULT=WORKLOAD:KIND[:MESSAGE]`` (tests only; several joined by ``;``) plants a
fault in routines of that workload (``Fault``): ``raise`` makes the engine's step raise ``RuntimeError(MESSAGE)``,
``flip`` hands the engine each encoder call's rows in reverse order (a misplacement the
accuracy must see), ``split_reversed`` / ``split_rotated`` split each batched encoder output
by the right sizes in the wrong order (``torch.split(out, counts[::-1])``, or the counts
rotated by one) where the engine splits it (sglang: its chunk module's ``torch.split``;
vLLM: the model's ``embed_multimodal``), and an engine may know more kinds (vLLM: ``device_mask``).
``VLMPATH_ENGINE_FAULT=*:bare`` (tests only) runs every routine of the process without the
engine server's TP=1 state (``sglang_server_state``, ``vllm_server_state``): what a test
needs to show that state matters (``server_state_wanted``).

The same text may instead come as an adapter's ``faults`` (``ServerStateHolder.faults``: a
case set's ``faults`` in ``suite.engine_run.CaseSet``, set by the worker on the adapter it
builds for that set alone); it then replaces the variable for that adapter's routines. Both
are test hooks: no CLI option, configuration or artifact reaches either.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from vlmpath.core.errors import EngineError
from vlmpath.measure.path_ledger import PathLedger
from vlmpath.paths.encode import EncodeStats

FAULT_ENV = "VLMPATH_ENGINE_FAULT"


@dataclass(frozen=True)
class Fault:
    """The planted fault of one workload's routines (``kind`` None: none)."""

    kind: str | None = None
    message: str = "planted engine fault"

    @staticmethod
    def _plants(plants: str | None = None) -> list[tuple[str, str, str]]:
        """(workload, kind, message) of each plant of ``plants`` (None: ``FAULT_ENV``'s);
        ``;`` separates several (one engine process carries them all: one worker start for
        the tests' planted cases)."""
        out = []
        for plant in (os.environ.get(FAULT_ENV, "") if plants is None else plants).split(";"):
            target, _, fault = plant.partition(":")
            kind, _, message = fault.partition(":")
            out.append((target, kind, message))
        return out

    @classmethod
    def for_workload(cls, name: str, plants: str | None = None) -> Fault:
        for target, kind, message in cls._plants(plants):
            if target == name and kind:
                return cls(kind, message or cls.message)
        return cls()

    @classmethod
    def server_state_wanted(cls, plants: str | None = None) -> bool:
        """True unless ``*:bare`` asks for routines without the server's state."""
        return not any(target == "*" and kind == "bare" for target, kind, _ in cls._plants(plants))

    @property
    def flip(self) -> bool:
        return self.kind == "flip"

    @property
    def split_order(self) -> str | None:
        """``reversed`` or ``rotated`` when the fault is a split in the wrong order."""
        return self.kind[len("split_"):] if self.kind in ("split_reversed", "split_rotated") else None

    @property
    def raises(self) -> str | None:
        """The message to raise with, when the fault is ``raise``."""
        return self.message if self.kind == "raise" else None


def reorder_sizes(sizes, order: str | None) -> list:
    """Split sizes in the planted wrong order (``Fault.split_order``), else unchanged."""
    sizes = list(sizes)
    if order == "reversed":
        return sizes[::-1]
    if order == "rotated":
        return sizes[1:] + sizes[:1]
    return sizes


class SplitPlant:
    """``torch`` as a module that splits by planted-order sizes sees it (tests only): every
    other attribute is torch's own."""

    def __init__(self, torch_module, order: str):
        self._torch, self._order = torch_module, order

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def split(self, tensor, sizes, dim=0):
        if isinstance(sizes, (list, tuple)):
            sizes = reorder_sizes(sizes, self._order)
        return self._torch.split(tensor, sizes, dim)


class EngineRoutineBase:
    """The common prologue (see the module docstring); ``engine`` and ``evs_where`` name the
    engine and where its EVS lives in the refusal."""

    engine = "the engine"
    evs_where = "not in the shared embedding path"

    def __init__(self, api, workload, encoder, table: torch.Tensor, *,
                 encoder_region: Callable[[], AbstractContextManager] = nullcontext, faults: str | None = None):
        self.api, self.workload, self.encoder = api, workload, encoder
        self.encoder_region = encoder_region
        self.device = table.device
        self.stats = EncodeStats()
        self.ledger = PathLedger(workload)  # re-encodes, off-chunk encodes, what the cache holds
        if any(it.frame_tokens for it in workload.items):
            raise EngineError(f"workload {workload.name!r}: EVS frame re-layout is model code in {self.engine} "
                              f"({self.evs_where}); the adapter cannot drive it")
        self.fault = Fault.for_workload(workload.name, faults)  # faults None: FAULT_ENV's


def swap_tower(encoder, engine: str, build):
    """A copy of ``encoder`` whose tower is ``build(our tower)``, the engine's own
    (``--tower engine``); encoders without our Qwen2.5-VL tower are refused, naming it. The
    session's encoder stays ours."""
    tower = getattr(encoder, "tower", None)
    if tower is None or type(tower).__name__ != "Qwen2_5_VisionTransformerPretrainedModel":
        raise EngineError(f"--tower engine: encoder {getattr(encoder, 'name', '?')!r} has no Qwen2.5-VL tower "
                          f"for {engine}'s to replace (use --tower ours)")
    swapped = copy.copy(encoder)
    swapped.tower = build(tower)
    return swapped


class ServerStateHolder:
    """The engine's server state (TP=1: ``sglang_server_state``, ``vllm_server_state``) set up
    once, on the first routine's device, and taken down by ``close()``; the seam
    ``server_state`` says which pieces. An adapter sets ``seams`` and ``server_state_class``."""

    seams: dict
    _state = None
    faults: str | None = None  # the plants of this adapter's routines (None: FAULT_ENV's; tests only)

    def server_state_class(self):
        raise NotImplementedError

    def ensure_server_state(self, device: torch.device) -> None:
        if self._state is not None or "server_state" in self.seams:
            return
        if not Fault.server_state_wanted(self.faults):
            self.seams["server_state"] = "none (planted: bare)"
            return
        self._state = self.server_state_class()(device)
        self.seams["server_state"] = self._state.seam

    def engine_tower_of(self, encoder, build, seam: str):
        """``encoder`` on the engine's own vision tower (``--tower engine``), built by
        ``build`` once per encoder inside the server state; the records say so (``seam``)."""
        tower = getattr(encoder, "tower", None)  # none: build refuses it, naming it
        if tower is not None:
            self.ensure_server_state(next(tower.parameters()).device)
        towers = self.__dict__.setdefault("_towers", {})  # our encoder's id -> (it, the engine's copy)
        if id(encoder) not in towers:
            towers[id(encoder)] = (encoder, build(encoder))  # the key's object kept alive
        self.seams["tower"] = seam
        return towers[id(encoder)][1]

    def close(self) -> None:
        """Take the server state down (destroy the groups, restore the globals)."""
        if self._state is not None:
            self._state.close()
            self._state = None
        self.seams.pop("server_state", None)
