"""What did each case cost on a machine the last time the history measured it?

asv records each benchmark's wall time (``duration``, seconds over every parameter
combination it ran) in its results file; that is the history's cost record, no file of
our own. A unit's cost (``runner.shards.Unit``: one class with one parameter combination)
is the sum over its methods of each method's duration shared out evenly over the
combinations it ran. Only a **trusted** run counts (``vlmpath run --trusted``: the main or
nightly workflow, run-info ``trusted``): a pull request's own results must not steer how
the next pull request is split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.results_store import combos as param_combos, load_results, run_files
from vlmpath.runner.run_files import read_run_info
from vlmpath.runner.shards import Unit, unit_of


@dataclass(frozen=True)
class Costs:
    """Per-unit seconds from one results file, and which run they come from."""

    machine: str
    commit: str | None  # None: no trusted run of this machine in the store
    per_unit: Mapping[Unit, float]

    @property
    def total(self) -> float:
        return sum(self.per_unit.values())


def unit_costs(res) -> dict[Unit, float]:
    """Per-unit seconds of one asv ``Results`` (see the module docstring)."""
    out: dict[Unit, float] = {}
    for name in sorted(res.get_all_result_keys()):
        seconds = res.duration.get(name) if isinstance(res.duration, dict) else None
        if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
            continue
        params = res.get_result_params(name) or []
        combos = param_combos(params)
        values = res.get_result_value(name, params) or []
        # Only the combinations this run selected (asv keeps None for the others) share the time.
        ran = [c for c, v in zip(combos, values) if v is not None] or combos
        for combo in ran:
            u = unit_of(name, combo)
            out[u] = out.get(u, 0.0) + float(seconds) / len(ran)
    return out


def latest_trusted(results_dir: str | Path, machine: str) -> Costs:
    """The costs of ``machine``'s newest trusted run in ``results_dir`` (none: empty)."""
    mdir = Path(results_dir) / machine
    best = None
    for path in run_files(mdir) if mdir.is_dir() else []:
        sha8 = path.name.split("-", 1)[0]
        info = read_run_info(Path(results_dir), machine, sha8)
        if not info or info.get("trusted") is not True:
            continue
        try:
            res = load_results(path)
        except Exception:  # noqa: BLE001 - an unreadable history file only costs balance
            continue
        started = max((float(v) for v in (res.started_at or {}).values() if isinstance(v, (int, float))),
                      default=0.0)
        if best is None or started > best[0]:
            best = (started, res)
    if best is None:
        return Costs(machine, None, {})
    return Costs(machine, best[1].commit_hash, unit_costs(best[1]))


@dataclass(frozen=True)
class ShardPick:
    """What one shard runs: its (benchmark, combo) pairs, the asv ``-b`` regex for them, the
    run-info entry that records them, and a line saying how it was chosen."""

    chosen: list
    regex: str
    info: dict
    line: str
    #: The shard that also runs what a split check runs once (the instruction counts): the
    #: first of the least expected load, the same in every shard (``counts_shard``).
    counts: int = 1


def counts_shard(loads) -> int:
    """1-based: the first shard of the least expected load. The counts are one more pass
    of every case, so they go where the fewest cases are; equal loads: shard 1."""
    return min(range(len(loads)), key=lambda i: (loads[i], i)) + 1


def pick_shard(chosen, shard, results_dir: str | Path, machine: str) -> ShardPick:
    """Shard ``shard``'s part of ``chosen`` (``runner.discovery.select``'s pairs), balanced
    by ``machine``'s last trusted costs in ``results_dir`` (by count without them)."""
    from vlmpath.runner.shards import label_set, partition, selection_regex, shard_loads, units

    costs = latest_trusted(results_dir, machine)
    parts = partition(units(chosen), shard.n, costs.per_unit or None)
    mine = set(parts[shard.k - 1])
    picked = [(b, combo) for b, combo in chosen if unit_of(b.name, combo) in mine]
    loads = shard_loads(parts, costs.per_unit or None)
    basis = (f"balanced by the costs of trusted run {str(costs.commit)[:8]} on {machine}" if costs.per_unit
             else "balanced by count (no trusted run of this machine in the results)")
    line = (f"shard {shard}: {len(picked)} of {len(chosen)} benchmark cases ({len(mine)} units), {basis}; "
            f"expected {loads[shard.k - 1]:.0f} of {sum(loads):.0f}"
            f"{' s' if costs.per_unit else ' units'}, slowest shard {max(loads):.0f}")
    info = {**shard.to_dict(), "units": label_set(sorted(mine)), "costs_from": costs.commit}
    return ShardPick(picked, selection_regex([b.label(combo) for b, combo in picked]), info, line,
                     counts_shard(loads))
