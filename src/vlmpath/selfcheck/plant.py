"""What is a planted slowdown of known size: extra work inside the routine, proportional to its cost?

Shared by ``vlmpath trust``'s timing rounds (``selfcheck.trust``) and its callgrind worker
(``selfcheck.instructions``): after every step of a pass, ``per_step`` fixed matrix products
(a small matmul, like the tower's own ops), with ``per_step`` calibrated by the caller so
that the extra work is ``size`` x the pass's own time (or instruction count).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

UNIT_N = 96  # the planted work's matrix size (a small matmul, like the tower's own ops)


@dataclass(frozen=True)
class Plant:
    """``units`` extra matrix products spread over a pass's steps (``per_step`` each)."""

    size: float
    per_step: int

    def work(self, a: torch.Tensor) -> None:
        for _ in range(self.per_step):
            torch.mm(a, a)


def python_pass(step, times: int) -> int:
    """The bytecode plant of the native counter's trust rounds: ``times`` extra passes over a
    step's entries (as a careless second loop over the requests of a step would add)."""
    n = 0
    for _ in range(times):
        for e in step.entries:
            n += e.extend
    return n


def timed_pass(run_step: Callable, steps: Sequence, plant: Plant | None, a: torch.Tensor) -> float:
    """Seconds of one pass of the schedule (CPU: wall clock; the routine syncs itself)."""
    t0 = time.perf_counter()
    for step in steps:
        run_step(step)
        if plant is not None:
            plant.work(a)
    return time.perf_counter() - t0
