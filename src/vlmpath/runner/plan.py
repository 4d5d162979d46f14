"""How long will the suite take on a machine, whole and split into N shards?

``make_plan`` costs every selected unit from the machine's last trusted run in the history
(``runner.shard_costs``), partitions them as ``--shard`` will (``runner.shards``), and says
per shard how many cases and how many seconds to expect. A machine with no history can be
estimated from another machine's history times a stated factor (``--from cpu-ci --factor
0.05``: e.g. the measured tiny/full ratio of one case); the output says it is an estimate
and from what, never a measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.runner.shard_costs import latest_trusted
from vlmpath.runner.shards import partition, shard_loads, unit_of, units


@dataclass(frozen=True)
class ShardPlan:
    k: int
    cases: int
    units: int
    seconds: float | None  # None: balanced by count (no costs known)


@dataclass(frozen=True)
class Plan:
    machine: str
    n: int
    basis: str  # where the costs come from, in words
    estimate: bool
    shards: tuple[ShardPlan, ...]
    unknown_units: int  # units the history has not seen (costed at the median)

    @property
    def total(self) -> float | None:
        return None if any(s.seconds is None for s in self.shards) else sum(s.seconds or 0 for s in self.shards)

    @property
    def slowest(self) -> float | None:
        return None if self.total is None else max(s.seconds or 0 for s in self.shards)

    def render(self) -> str:
        lines = [f"plan for {self.machine}, {self.n} shard(s): {self.basis}"]
        for s in self.shards:
            t = "by count" if s.seconds is None else f"{s.seconds:.0f} s"
            lines.append(f"  shard {s.k}/{self.n}: {s.cases} cases ({s.units} units), {t}")
        if self.total is not None:
            word = "estimated" if self.estimate else "expected"
            lines.append(f"  whole suite: {self.total:.0f} s on one runner; {word} wall time with {self.n} "
                         f"shard(s): {self.slowest:.0f} s (the slowest shard, plus set-up)")
        if self.unknown_units:
            lines.append(f"  {self.unknown_units} unit(s) not in the history: costed at the median unit")
        return "\n".join(lines) + "\n"


def make_plan(results_dir: str | Path, machine: str, n: int, chosen: Sequence, *,
              estimate_from: str | None = None, factor: float | None = None) -> Plan:
    """The plan for ``chosen`` (``runner.discovery.select`` pairs) on ``machine``."""
    if (estimate_from is None) != (factor is None):
        raise VlmpathError("--from MACHINE and --factor F go together: the estimate is that machine's costs times F")
    if factor is not None and not 0 < factor < 1e6:
        raise VlmpathError(f"--factor {factor}: must be a positive number below 1e6")
    costs = latest_trusted(results_dir, estimate_from or machine)
    per_unit = {u: c * (factor or 1.0) for u, c in costs.per_unit.items()} or None
    all_units = units(chosen)
    parts = partition(all_units, n, per_unit)
    loads = shard_loads(parts, per_unit)
    by_unit: dict = {}
    for b, combo in chosen:
        u = unit_of(b.name, combo)
        by_unit[u] = by_unit.get(u, 0) + 1
    if per_unit is None:
        basis = f"no trusted run of {estimate_from or machine} in {results_dir}: balanced by count"
    elif estimate_from:
        basis = (f"ESTIMATE: {estimate_from}'s trusted run {str(costs.commit)[:8]} x {factor:g} "
                 f"(no history of {machine} used)")
    else:
        basis = f"costs of {machine}'s trusted run {str(costs.commit)[:8]}"
    shards = tuple(ShardPlan(k + 1, sum(by_unit[u] for u in part), len(part),
                             None if per_unit is None else loads[k]) for k, part in enumerate(parts))
    unknown = 0 if per_unit is None else sum(1 for u in all_units if u not in per_unit)
    return Plan(machine, n, basis, estimate_from is not None, shards, unknown)
