"""How are an interleaved artifact's timings judged: on its own paired rounds?

``ci pr --interleave N`` measures base and head in N alternating rounds and judges the
timing rows on the paired rounds (``compare.paired.paired_report``), not on one run's
band. The judge (``ci pr`` on its own artifact, ``ci merge`` on every machine's) reads every
artifact from its own files (never its comparison.json), so an artifact whose manifest says
``interleave`` N has its ``rounds/NN/{base,head}`` read here, through the checked, budgeted
copy its ``results/`` go through (``pr.artifact.copy_results``), each round for that artifact's machine and shas only, and the
machine's timing rows judged on those pairs with the same function ``ci pr`` used. Shards
of one machine each carry the rounds of their own cases: each shard's rounds re-judge its
rows (a row already judged on pairs is not judged again).

A round that is missing, holds another machine or no results for its side's sha is named
in a note, and that machine's timing rows are not judged (on pairs or otherwise): never a
green verdict from the single run the rounds were meant to replace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.paired import pairable, paired_report
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.budget import RunBudget
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.artifact import Artifact, copy_results
from vlmpath.pr.interleave import ROUNDS_SUBDIR, side_dir
from vlmpath.pr.sources import Context, Rows, RowSource


def _copy(artifact: Artifact, n: int, staging: Path, spent: RunBudget):
    """The artifact's rounds copied (checked, charged) into staging: {(i, side): dir}, or
    the reason they cannot be used."""
    from vlmpath.compare import asv_results

    name, m = artifact.name, artifact.manifest
    machine = m.machine
    dirs: dict[tuple[int, str], Path] = {}
    for i in range(n):
        for side, sha in (("base", m.base_sha), ("head", m.head_sha)):
            src = side_dir(artifact.path, i, side)
            where = f"{ROUNDS_SUBDIR}/{i:02d}/{side}"
            if not src.is_dir() or src.is_symlink():
                return None, f"artifact {name}: {where} is missing"
            dest = side_dir(staging / ROUNDS_SUBDIR / name, i, side)
            dest.mkdir(parents=True)
            owner: dict[str, str] = {}
            copy_results(src, dest, owner, f"{name} ({where})", spent)
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

    (_, m, dirs), *rest = good
    sides: dict[str, list] = {"base": [], "head": []}
    for i in range(n):
        for side, sha in (("base", m.base_sha), ("head", m.head_sha)):
            if m.shard is None:
                where = dirs[(i, side)]
            else:
                where = side_dir(staging / ROUNDS_SUBDIR / f"{machine} (shards)", i, side)
                add_to_store(where, [d[(i, side)] for _, _, d in good],
                             shards={str(d[(i, side)]): {"shard": e.shard.entry()} for _, e, d in good})
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


def judge_rounds(report: ComparisonReport, staging: Path, arts: Sequence[Artifact], cfg: Thresholds,
                 spent: RunBudget) -> tuple[ComparisonReport, list[str], list[str]]:
    """``report`` with each interleaved machine's timing rows judged on its paired rounds
    (as ``ci pr`` judged them); returns it, the notes, and the machines whose rounds could
    not all be used (``machine: usable interleaved rounds``: the check is incomplete at best).
    ``arts``: the asv artifacts (an engine PR's records have no rounds)."""
    by_machine: dict[str, list[tuple[Artifact, int | None]]] = {}
    for art in arts:
        by_machine.setdefault(art.manifest.machine, []).append((art, art.manifest.interleave or None))
    notes: list[str] = []
    broken: list[str] = []
    for machine, group in sorted(by_machine.items()):
        ns = {n for _, n in group if n is not None}
        if not ns:
            continue
        if len(ns) > 1:
            raise VlmpathError(f"machine {machine}: artifacts disagree on the interleaved rounds ({sorted(ns)})")
        n = ns.pop()
        good, why = [], []
        for art, own_n in group:
            if own_n is None:  # a shard that says it was not interleaved while its siblings were
                why.append(f"artifact {art.name}: no interleaved rounds, unlike the machine's other shards")
                continue
            copied, reason = _copy(art, n, staging, spent)
            if copied is None:
                why.append(reason)
            else:
                good.append((art.name, art.manifest, copied))
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


class Rounds(RowSource):
    """Interleaved rounds: they add no rows; they re-judge their machine's timings on pairs."""

    def rejudge(self, report: ComparisonReport, ctx: Context) -> tuple[ComparisonReport, Rows]:
        report, notes, broken = judge_rounds(report, ctx.staging, ctx.of_kind(engine=False), ctx.cfg, ctx.spent)
        return report, Rows(notes=notes, missing=broken)
