"""How much can one run see: intervals, the minimum detectable effect, indicative verdicts,
and the paired (interleaved A/B) test?

The statistics behind the throughput gate (issue 12), kept in this one module so that the
metric table (layout phase 2) can take them over unchanged:

- ``interval``: the 99% interval asv stored for a metric (its ``ci_99``), else None.
- ``mde``: the smallest relative change a run can judge, from that run's own spread: the
  smallest shift of head (centred on base) at which the very test the verdict uses
  (asv's Mann-Whitney at p < 0.002) fires, found by bisection. A range estimate (half of
  each side's relative range) was used before; on the shared 2-core runner it said
  70-100% while the test caught 25% in most rounds, because one stalled pass sets the
  range but moves only one rank. Without samples (a plain track) there is no spread to
  judge from: None (the band alone decides).
- ``indicative``: a verdict from fewer samples than the test needs (1-5, e.g. quick mode)
  is a hint, never a gate on its own.
- ``paired_shift``: base and head measured in alternating rounds (ABAB, see
  ``vlmpath ci pr --interleave``); each round gives a head/base ratio, and a Wilcoxon
  signed-rank test on their logs (two-sided, exact) says whether the shift is real. Drift that
  hits both sides of a round alike cancels in the ratio.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def interval(ci_99: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if ci_99 is None else (float(ci_99[0]), float(ci_99[1]))


def _rel_range(samples: Sequence[float]) -> float:
    return (max(samples) - min(samples)) / abs(statistics.median(samples))


def mde(base: Sequence[float], head: Sequence[float],
        different: Callable[[Sequence[float], Sequence[float]], bool] | None = None,
        *, most: float = 16.0, steps: int = 24) -> float | None:
    """The minimum detectable relative effect of one comparison (see the module docstring).

    With ``different`` (the significance test the verdict uses) it is exact for this run:
    head's samples are centred on base's median and shifted up by d until the test fires,
    by bisection (a shift only ever moves the samples' ranks apart, so the test's answer is
    monotone in d). A run whose test cannot fire at any shift (too few samples) gives inf.
    Without it, the range estimate: about half of each side's relative range."""
    if len(base) < 2 or len(head) < 2 or statistics.median(base) == 0 or statistics.median(head) == 0:
        return None
    if different is None:
        return (_rel_range(base) + _rel_range(head)) / 2
    centred = [x * statistics.median(base) / statistics.median(head) for x in head]

    def sees(d: float) -> bool:
        return different(base, [x * (1 + d) for x in centred])

    if not sees(most):
        return math.inf
    lo, hi = 0.0, most
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if sees(mid) else (mid, hi)
    return hi


def indicative(n_base: int, n_head: int, min_samples: int, quick: bool = False) -> bool:
    """True when a verdict rests on fewer samples than the significance test needs, by the
    sample counts: 1 to ``min_samples - 1`` on a side. ``quick`` (the caller's own option
    or the trusted workflow's input, never a flag read from an artifact) only speaks for a
    side that kept no samples at all (a plain track: one number): with enough samples on
    both sides the counts decide, whatever anyone says the run was."""
    if 0 < n_base < min_samples or 0 < n_head < min_samples:
        return True
    return quick and (n_base == 0 or n_head == 0)


@dataclass(frozen=True)
class PairedResult:
    ratios: tuple[float, ...]   # head/base per pair (raw, not direction-adjusted)
    median_ratio: float
    p_value: float              # two-sided Wilcoxon signed-rank test over the pairs
    significant: bool


def _average_ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share the mean of their ranks
        i = j + 1
    return ranks


def signed_rank_p(diffs: Sequence[float]) -> float:
    """Two-sided exact Wilcoxon signed-rank p of ``diffs`` against "centred on 0".

    Zeros are dropped; tied magnitudes get their average rank, and the null distribution is
    counted exactly over the (doubled, so integer) ranks. It uses each pair's size as well as
    its sign, so it needs fewer pairs than the sign test: one pair flipped by a neighbour's
    burst costs a little rank mass instead of a whole success (the sign test needs 13 of 16
    pairs in one direction; this test already fires at a consistent shift with 2-3 flips)."""
    d = [x for x in diffs if x != 0]
    n = len(d)
    if n == 0:
        return 1.0
    ranks2 = [round(2 * r) for r in _average_ranks([abs(x) for x in d])]
    w = sum(r for r, x in zip(ranks2, d) if x > 0)
    total = sum(ranks2)
    counts = [0] * (total + 1)  # counts[s]: sign assignments whose positive ranks sum to s
    counts[0] = 1
    for r in ranks2:
        for s in range(total, r - 1, -1):
            counts[s] += counts[s - r]
    lower = sum(counts[: w + 1]) / 2**n
    upper = sum(counts[w:]) / 2**n
    return min(1.0, 2 * min(lower, upper))


def paired_shift(base_rounds: Sequence[float], head_rounds: Sequence[float], *,
                 p_threshold: float = 0.05, factor: float = 0.0) -> PairedResult:
    """Pair round i of base with round i of head (one value per round, e.g. its median).

    Significant when the signed-rank test on the log ratios rejects "no shift" at
    ``p_threshold`` AND the median ratio is beyond ``factor`` (a real but tiny shift is not
    a regression). Log ratios make a slowdown by x and a speed-up by 1/x the same size, so
    the test reads time and throughput alike."""
    if len(base_rounds) != len(head_rounds) or not base_rounds:
        raise ValueError(f"paired rounds must be non-empty and equal in number: "
                         f"{len(base_rounds)} base vs {len(head_rounds)} head")
    ratios = tuple(h / b for b, h in zip(base_rounds, head_rounds) if b > 0 and h > 0)
    p = signed_rank_p([math.log(r) for r in ratios])
    med = statistics.median(ratios) if ratios else 1.0
    beyond = med > 1 + factor or med < 1 / (1 + factor)
    return PairedResult(ratios, med, p, p < p_threshold and beyond)
