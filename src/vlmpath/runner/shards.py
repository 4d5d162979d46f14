"""Which cases does shard K of N run, so that N runners together run the suite once?

A **unit** is one benchmark class with one parameter combination (``bench_embed.EmbedRoutine``
with ``('default', 'video')``): every method of that class with those parameters goes into
the same shard, because the routine benchmarks measure a case once and memoise it for all
their ``track_`` methods (``benchmarks/_common.case_summary``); splitting a unit's methods
over two shards would measure that case twice.

The partition is deterministic: units sorted by cost (largest first, then by name), each
given to the shard with the least cost so far (longest-processing-time first), so every
runner that computes it (base and head of a PR, every shard of a matrix) gets the same
answer from the same costs. Costs come from the last trusted run in the history
(``runner.shard_costs``); without one every unit costs 1 and the shards are balanced by
count. A shard is handed to asv as one ``-b`` regex of the exact ``name(params)`` spellings it
runs (so a ``--bench`` narrowing inside a unit is kept).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vlmpath.core.errors import VlmpathError

#: Most shards one suite is split into (a matrix beyond this is a typo, not a fleet).
MAX_SHARDS = 64


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``k`` (1-based) of ``n``."""

    k: int
    n: int

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    def to_dict(self) -> dict[str, int]:
        return {"k": self.k, "n": self.n}

    @classmethod
    def parse(cls, text: object, what: str = "--shard") -> Shard:
        """``"2/3"`` as ``Shard(2, 3)`` (parsed once, by the CLI; ``Shard.parse(str(s)) == s``);
        anything else is one line naming the input and the fix."""
        if isinstance(text, cls):
            return text
        m = _SHARD.match(str(text))
        if not m:
            raise VlmpathError(f"{what} {text!r} is not K/N (e.g. 2/3: the second of three shards)")
        k, n = int(m.group(1)), int(m.group(2))
        if not 1 <= n <= MAX_SHARDS:
            raise VlmpathError(f"{what} {text!r}: N must be from 1 to {MAX_SHARDS}")
        if not 1 <= k <= n:
            raise VlmpathError(f"{what} {text!r}: K must be from 1 to N ({n})")
        return cls(k, n)


_SHARD = re.compile(r"^\s*([0-9]{1,3})\s*/\s*([0-9]{1,3})\s*$")


@dataclass(frozen=True, order=True)
class Unit:
    """One benchmark class (``module.Class``, or a module-level function's name) with one
    parameter combination (asv's repr strings)."""

    owner: str
    combo: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.owner}({', '.join(self.combo)})" if self.combo else self.owner


def owner_of(benchmark: str) -> str:
    """``bench_embed.EmbedRoutine.track_accuracy`` -> ``bench_embed.EmbedRoutine``; a
    module-level benchmark (``bench_x.time_y``) is its own owner."""
    parts = benchmark.split(".")
    return ".".join(parts[:-1]) if len(parts) >= 3 else benchmark


def unit_of(benchmark: str, combo: Sequence[str]) -> Unit:
    return Unit(owner_of(benchmark), tuple(combo))


def units(chosen: Sequence[tuple[object, tuple[str, ...]]]) -> list[Unit]:
    """The units of a selection (``runner.discovery.select``'s (benchmark, combo) pairs), sorted."""
    return sorted({unit_of(b.name, combo) for b, combo in chosen})  # type: ignore[attr-defined]


def unit_costs(all_units: Sequence[Unit], costs: Mapping[Unit, float] | None) -> dict[Unit, float]:
    """Each unit's cost: the history's, or for a unit it has not seen (a new case) the
    median of the known ones (1 each when nothing is known: balance by count)."""
    known = sorted(float(costs[u]) for u in all_units if costs and u in costs)
    fill = known[len(known) // 2] if known else 1.0
    return {u: float(costs[u]) if costs and u in costs else fill for u in all_units}


def partition(all_units: Sequence[Unit], n: int, costs: Mapping[Unit, float] | None = None) -> list[list[Unit]]:
    """``n`` lists of units, each sorted, together ``all_units`` once (see the module docstring)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    cost = unit_costs(sorted(set(all_units)), costs)
    load = [0.0] * n
    out: list[list[Unit]] = [[] for _ in range(n)]
    for u in sorted(cost, key=lambda u: (-cost[u], u)):
        i = min(range(n), key=lambda j: (load[j], j))
        out[i].append(u)
        load[i] += cost[u]
    return [sorted(part) for part in out]


def shard_loads(parts: Sequence[Sequence[Unit]], costs: Mapping[Unit, float] | None) -> list[float]:
    """Expected cost per shard, each unit costed as ``partition`` costs it."""
    cost = unit_costs(sorted({u for part in parts for u in part}), costs)
    return [sum(cost[u] for u in part) for part in parts]


def selection_regex(labels: Sequence[str]) -> str:
    """One asv ``-b`` regex that selects exactly these ``name(params)`` labels
    (``runner.discovery.Discovered.label``): asv searches it in the same spelling."""
    if not labels:
        raise VlmpathError("this shard has no cases: use fewer shards than cases")
    return "^(?:" + "|".join(re.escape(x) for x in sorted(labels)) + ")$"


def label_set(part: Sequence[Unit]) -> list[str]:
    return [u.label for u in part]
