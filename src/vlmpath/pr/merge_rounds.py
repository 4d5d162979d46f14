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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.paired import pairable, paired_report
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.interleave import MAX_ROUNDS, ROUNDS_SUBDIR, side_dir
from vlmpath.pr.merge_engine import is_engine_run


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


def _copy(art: Path, name: str, data: dict[str, Any], n: int, staging: Path, copy_checked: Callable):
    """The artifact's rounds copied (checked, charged) into staging: {(i, side): dir}, or
    the reason they cannot be used."""
    from vlmpath.compare import asv_results

    machine = data["machine"]
    dirs: dict[tuple[int, str], Path] = {}
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
            dirs[(i, side)] = dest
    return dirs, None


def _load(machine: str, good: list, n: int, staging: Path):
    """Base and head rounds of ``machine`` from its usable artifacts: one artifact's as they
    are; shards' merged per round, each case from the shard that owns it (the same
    ``runner.shard_store`` merge as their results: a case two shards claim is refused)."""
    from vlmpath.compare import asv_results
    from vlmpath.runner.shard_store import add_to_store

    (_, data, dirs), *rest = good
    sides: dict[str, list] = {"base": [], "head": []}
    for i in range(n):
        for side, sha in (("base", data["base_sha"]), ("head", data["head_sha"])):
            if data.get("shard") is None:
                where = dirs[(i, side)]
            else:
                where = side_dir(staging / ROUNDS_SUBDIR / f"{machine} (shards)", i, side)
                add_to_store(where, [d[(i, side)] for _, _, d in good],
                             shards={str(d[(i, side)]): e for _, e, d in good})
            sides[side].append(asv_results.load_asv(where, sha))
    return sides["base"], sides["head"]


def _not_judged(report: ComparisonReport, machine: str, why: str) -> ComparisonReport:
    """``machine``'s timing rows not judged on pairs: not judged, naming why."""
    return replace(report, machines=tuple(
        replace(m, comparisons=tuple(
            replace(c, verdict=Verdict.NOT_COMPARABLE, indicative=False, significant=None,
                    reason=f"interleaved rounds unusable, not judged on pairs: {why}"[:400])
            if pairable(c) else c for c in m.comparisons))
        if m.machine == machine else m for m in report.machines))


def judge_rounds(report: ComparisonReport, staging: Path, dirs: Mapping[str, Path], runs: Sequence[tuple[str, dict]],
                 cfg: Thresholds, copy_checked: Callable) -> tuple[ComparisonReport, list[str], list[str]]:
    """``report`` with each interleaved machine's timing rows judged on its paired rounds
    (as ``ci pr`` judged them); returns it, the notes, and the machines whose rounds could
    not all be used (``machine: usable interleaved rounds``: the check is incomplete at best).
    ``dirs``: artifact name -> its directory; ``copy_checked(src, dest, owner, name)``: the
    merge's checked, charged copy of results."""
    by_machine: dict[str, list[tuple[str, dict, int | None]]] = {}
    for name, data in runs:
        if not is_engine_run(data):  # an engine PR's records are judged by pr.merge_engine
            by_machine.setdefault(data["machine"], []).append((name, data, _rounds_of(data)))
    notes: list[str] = []
    broken: list[str] = []
    for machine, arts in sorted(by_machine.items()):
        ns = {n for _, _, n in arts if n is not None}
        if not ns:
            continue
        if len(ns) > 1:
            raise VlmpathError(f"machine {machine}: artifacts disagree on the interleaved rounds ({sorted(ns)})")
        n = ns.pop()
        good, why = [], []
        for name, data, own_n in arts:
            if own_n is None:  # a shard that says it was not interleaved while its siblings were
                why.append(f"artifact {name}: no interleaved rounds, unlike the machine's other shards")
                continue
            copied, reason = _copy(dirs[name], name, data, n, staging, copy_checked)
            if copied is None:
                why.append(reason)
            else:
                good.append((name, data, copied))
        if good:
            own = replace(report, machines=tuple(m for m in report.machines if m.machine == machine), notes=())
            judged = {m.machine: m for m in paired_report(*_load(machine, good, n, staging), own, cfg).machines}
            report = replace(report, machines=tuple(judged.get(m.machine, m) for m in report.machines))
            notes.append(f"{machine}: base and head measured in {n} interleaved rounds "
                         f"({', '.join(g[0] for g in good)}); timings judged on paired rounds")
        if why:
            # Rows the usable rounds did not cover (a broken shard's cases): not judged.
            report = _not_judged(report, machine, why[0])
            notes.extend(f"{machine}: {w}: its timings are not judged" for w in why)
            broken.append(f"{machine}: usable interleaved rounds")
    return report, notes, broken
