"""Does ``vlmpath ci merge`` judge an interleaved artifact's timings as its ``ci pr`` did?

``ci pr --interleave N`` measures base and head in N alternating rounds and judges the
timing rows on the paired rounds (``compare.paired.paired_report``), not on one run's
band. The merge re-judges every artifact from its own files (never its comparison.json),
so an artifact whose ``run.json`` says ``interleave`` N has its ``rounds/NN/{base,head}``
read here, through the merge's own checked, budgeted copy (``copy_checked``, the one its
``results/`` go through), each round for that artifact's machine and shas only, and the
machine's timing rows judged on those pairs with the same function ``ci pr`` used. Shards
of one machine each carry the rounds of their own cases: each shard's rounds re-judge its
rows (a row already judged on pairs is not judged again).

A round that is missing, holds another machine or no results for its side's sha is named
in a note, and that machine's timing rows are not judged (on pairs or otherwise): never a
green verdict from the single run the rounds were meant to replace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.paired import pairable, paired_report
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.interleave import MAX_ROUNDS, ROUNDS_SUBDIR, side_dir


def _rounds_of(data: dict[str, Any]) -> int | None:
    """The artifact's claimed round count; 0/None: not interleaved. Anything else that is
    not 2..MAX_ROUNDS is refused here as malformed (one line, the merge's exit 2)."""
    n = data.get("interleave")
    if n is None or n is False or n == 0:
        return None
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= MAX_ROUNDS:
        raise VlmpathError(f"run.json of machine {str(data.get('machine'))[:60]!r}: interleave {str(n)[:20]!r} "
                           f"is not a round count of 2 to {MAX_ROUNDS}")
    return n


def _load(art: Path, name: str, data: dict[str, Any], n: int, staging: Path, copy_checked: Callable):
    """The artifact's base and head rounds, or the reason they cannot be used."""
    from vlmpath.compare import asv_results

    machine = data["machine"]
    sides: dict[str, list] = {"base": [], "head": []}
    for i in range(n):
        for side, sha in (("base", data["base_sha"]), ("head", data["head_sha"])):
            src = side_dir(art, i, side)
            where = f"{ROUNDS_SUBDIR}/{i:02d}/{side}"
            if not src.is_dir() or src.is_symlink():
                return None, f"artifact {name}: {where} is missing"
            dest = side_dir(staging / ROUNDS_SUBDIR / name, i, side)
            dest.mkdir(parents=True)
            owner: dict[str, str] = {}
            copy_checked(src, dest, owner, f"{name} ({where})")
            if set(owner) != {machine}:
                return None, f"artifact {name}: {where} holds machines {sorted(owner)[:3]}, not only {machine}"
            # File names first (cheap); a file named for the sha but holding another is
            # refused by load_asv (one line, exit 2), never read as this side.
            if machine not in asv_results.existing_commits(dest).get(sha[:8], ()):
                return None, f"artifact {name}: {where} has no results of {machine} for {side} {sha[:12]}"
            run = asv_results.load_asv(dest, sha)
            if run.machine(machine) is None:
                return None, f"artifact {name}: {where} has no results of {machine} for {side} {sha[:12]}"
            sides[side].append(run)
    return (sides["base"], sides["head"]), None


def _not_judged(report: ComparisonReport, machine: str, why: str) -> ComparisonReport:
    """``machine``'s timing rows not yet judged on pairs: not judged, naming why."""
    return replace(report, machines=tuple(
        replace(m, comparisons=tuple(
            replace(c, verdict=Verdict.NOT_COMPARABLE, indicative=False, significant=None,
                    reason=f"interleaved rounds unusable, not judged on pairs: {why}"[:400])
            if pairable(c) else c for c in m.comparisons))
        if m.machine == machine else m for m in report.machines))


def judge_rounds(report: ComparisonReport, staging: Path, root: Path, runs: Sequence[tuple[str, dict]],
                 cfg: Thresholds, copy_checked: Callable) -> tuple[ComparisonReport, list[str], list[str]]:
    """``report`` with each interleaved artifact's timing rows judged on its paired rounds
    (as ``ci pr`` judged them); returns it, the notes, and the machines whose rounds could
    not be used (``machine: rounds of artifact``: the check is incomplete at best).
    ``copy_checked(src, dest, owner, name)``: the merge's checked, charged copy of results."""
    notes: list[str] = []
    broken: dict[str, str] = {}
    for name, data in runs:
        n = _rounds_of(data)
        if n is None:
            continue
        machine = data["machine"]
        rounds, why = _load(root / name, name, data, n, staging, copy_checked)
        if rounds is None:
            broken.setdefault(machine, why)
            notes.append(f"{machine}: {why}: its timings are not judged")
            continue
        own = replace(report, machines=tuple(m for m in report.machines if m.machine == machine), notes=())
        judged = paired_report(*rounds, own, cfg)
        by_machine = {m.machine: m for m in judged.machines}
        report = replace(report, machines=tuple(by_machine.get(m.machine, m) for m in report.machines))
        notes.append(f"{machine}: artifact {name}: base and head measured in {n} interleaved rounds; "
                     "timings judged on paired rounds")
    for machine, why in broken.items():
        report = _not_judged(report, machine, why)
    return report, notes, [f"{m}: usable interleaved rounds" for m in sorted(broken)]
