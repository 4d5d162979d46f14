"""How much can one run see: intervals, the minimum detectable effect, indicative verdicts,
and the paired (interleaved A/B) test?

The statistics behind the throughput gate (issue 12), kept in this one module so that the
metric table (layout phase 2) can take them over unchanged:

- ``interval``: the 99% interval asv stored for a metric (its ``ci_99``), else None.
- ``mde``: the smallest relative change a run can judge, from that run's own spread. With
  n samples per side asv's Mann-Whitney test reaches p < 0.002 only when the two sides
  barely overlap (at n = 6: not at all), so a shift must clear roughly half of each
  side's range: ``(range_base + range_head) / 2 / median_base``. Without samples (a
  plain track) there is no spread to judge from: None (the band alone decides).
- ``indicative``: a verdict from fewer samples than the test needs (1-5, e.g. quick mode)
  is a hint, never a gate on its own.
- ``paired_shift``: base and head measured in alternating rounds (ABAB, see
  ``vlmpath ci pr --interleave``); each round gives a head/base ratio, and a sign test
  over the rounds (two-sided, exact binomial) says whether the shift is real. Drift that
  hits both sides of a round alike cancels in the ratio.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def interval(ci_99: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if ci_99 is None else (float(ci_99[0]), float(ci_99[1]))


def _rel_range(samples: Sequence[float]) -> float:
    return (max(samples) - min(samples)) / abs(statistics.median(samples))


def mde(base: Sequence[float], head: Sequence[float]) -> float | None:
    """The minimum detectable relative effect of one comparison (see the module docstring)."""
    if len(base) < 2 or len(head) < 2 or statistics.median(base) == 0 or statistics.median(head) == 0:
        return None
    return (_rel_range(base) + _rel_range(head)) / 2


def indicative(n_base: int, n_head: int, min_samples: int, quick: bool = False) -> bool:
    """True when a verdict rests on fewer samples than the significance test needs."""
    return quick or 0 < n_base < min_samples or 0 < n_head < min_samples


@dataclass(frozen=True)
class PairedResult:
    ratios: tuple[float, ...]   # head/base per round (raw, not direction-adjusted)
    median_ratio: float
    p_value: float              # two-sided sign test over the rounds
    significant: bool


def _sign_test_p(k: int, n: int) -> float:
    """Two-sided exact binomial p of k successes out of n at 1/2."""
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_shift(base_rounds: Sequence[float], head_rounds: Sequence[float], *,
                 p_threshold: float = 0.05, factor: float = 0.0) -> PairedResult:
    """Pair round i of base with round i of head (one value per round, e.g. its median).

    Significant when the sign test rejects "no shift" at ``p_threshold`` AND the median
    ratio is beyond ``factor`` (a real but tiny shift is not a regression)."""
    if len(base_rounds) != len(head_rounds) or not base_rounds:
        raise ValueError(f"paired rounds must be non-empty and equal in number: "
                         f"{len(base_rounds)} base vs {len(head_rounds)} head")
    ratios = tuple(h / b for b, h in zip(base_rounds, head_rounds) if b > 0)
    up = sum(r > 1 for r in ratios)
    down = sum(r < 1 for r in ratios)
    p = _sign_test_p(up, up + down)
    med = statistics.median(ratios) if ratios else 1.0
    beyond = med > 1 + factor or med < 1 / (1 + factor)
    return PairedResult(ratios, med, p, p < p_threshold and beyond)
