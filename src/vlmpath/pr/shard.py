"""Which cases does this runner measure when a PR check is split into shards, and how do
the shards' artifacts come back together?

``ci pr --shard K/N``: the shard's part of the selection is chosen **once**, before either
side runs (``pick``), from the suite that judges and the trusted store's costs, and both
sides get that exact selection: base and head of a shard measure the same cases, paired.
The instruction counts (``--instructions``: deterministic, one more pass of every case)
run in one shard only, the first of the least expected load (``runner.shard_costs.
counts_shard``: shard 1 when the loads are equal; shard 3 of 4 for 18 units, split 5, 5,
4, 4), so the merged comparison holds them once and a fullest shard does not also count.

``ci merge``: artifacts of one machine that say they are shards (``run.json`` ``shard``)
are merged into one results file per commit (``runner.shard_store``); a shard of 1..N
that did not arrive is a not-judged row naming it and keeps the check from reading green
(``missing_rows``, exit ``EXIT_INCOMPLETE`` at best). The missing shard's own cases are
in the merged results as asv's "not run" (no value on either side), which the comparison
would read as failing on base and head; ``with_missing_shards`` says instead that they
were not judged because their shard is missing. A case counts as the missing shard's when
no arrived shard owns its unit and neither side has a value: a row with a value (the
counts) stays as judged, and the claim of ownership (a PR's ``run.json``) can
only turn a row into "not judged", never into green.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from vlmpath.compare.comparison import Comparison, Verdict
from vlmpath.compare.selection import spellings
from vlmpath.runner.shard_costs import ShardPick, pick_shard
from vlmpath.runner.shards import Shard, owner_of


def pick(bench_root: Path, source: Path, bench: str | None, shard: Shard, store: Path, machine: str,
         env: Mapping[str, str]) -> ShardPick:
    """This shard's cases of ``bench_root``'s suite (imported against ``source``)."""
    import sys

    from vlmpath.pr.side import side_env
    from vlmpath.runner.discovery import discover, select

    chosen = select(discover(bench_root / "benchmarks", sys.executable, side_env(source, env)), bench)
    return pick_shard(chosen, shard, store, machine)


def missing_rows(machine: str, n: int, missing: list[int]) -> list[Comparison]:
    """One not-judged row per shard that did not arrive."""
    return [Comparison(machine=machine, benchmark=f"(shard {k}/{n})", params=(), unit="", base=None, head=None,
                       verdict=Verdict.NOT_COMPARABLE,
                       reason=f"shard {k}/{n} of {machine} is missing: its cases were not judged")
            for k in missing]


def _labels(c: Comparison) -> set[str]:
    """The unit labels a row may belong to: parameter values as asv's repr and as shown."""
    return set(spellings(owner_of(c.benchmark), c.params))


def _theirs(c: Comparison, owned: frozenset[str]) -> bool:
    """A row of a shard that did not arrive: no value on either side, its unit owned by none
    of the arrived shards (a claim of ownership can only make a row "not judged", never green)."""
    return c.base is None and c.head is None and not (_labels(c) & owned)


def only_arrived(m, n: int, missing: list[int], owned: frozenset[str]):
    """Machine report ``m`` cut to the arrived shards' rows: one shard's own check
    (``ci pr --shard K/N``), where the other shards' cases are judged by ``ci merge``."""
    return replace(m, comparisons=tuple(c for c in m.comparisons if not _theirs(c, owned)))


def with_missing_shards(m, n: int, missing: list[int], owned: frozenset[str]):
    """Machine report ``m`` with the missing shards named (``missing_rows``) and each row of
    theirs (no arrived shard owns its unit, no value on either side) not judged as such."""
    which = ", ".join(f"{k}/{n}" for k in missing)
    reason = (f"not judged: its shard is missing (shard {which} of {m.machine} did not arrive)" if len(missing) == 1
              else f"not judged: its shard is one of the missing ones (shards {which} of {m.machine} did not arrive)")
    rows = tuple(replace(c, verdict=Verdict.NOT_COMPARABLE, reason=reason, error=None) if _theirs(c, owned) else c
                 for c in m.comparisons)
    return replace(m, comparisons=rows + tuple(missing_rows(m.machine, n, missing)))


def merge_shard_artifacts(staging: Path, dest: Path, by_machine: Mapping[str, list], spent) -> dict:
    """Each machine's shard artifacts (``pr.artifact.Artifact``) merged into ``dest``, each
    one's results read through the checked, charged copy (``pr.artifact.copy_results``).
    Returns machine -> (N, missing shard numbers, units the arrived shards own)."""
    from vlmpath.core.errors import VlmpathError
    from vlmpath.pr.artifact import RESULTS_SUBDIR, copy_results
    from vlmpath.runner.shard_merge import missing_shards, shard_info
    from vlmpath.runner.shard_store import add_to_store

    gaps: dict[str, tuple[int, list[int]]] = {}
    for machine, arts in sorted(by_machine.items()):
        sources, entries, ns, ks, owned = [], {}, set(), [], set()
        for art in arts:
            name, entry = art.name, {"shard": art.manifest.shard.entry()}
            k, n, units = shard_info(entry)  # type: ignore[misc]  # checked when the manifest was read
            if art.manifest.machine != machine:
                raise VlmpathError(f"artifact {name}: shard of {art.manifest.machine!r} filed under {machine!r}")
            stage = staging / "shards" / name
            copy_results(art.path / RESULTS_SUBDIR, stage, {}, name, spent)
            sources.append(stage)
            entries[str(stage)] = entry
            ns.add(n)
            ks.append(k)
            owned |= units
        if len(ns) > 1:
            raise VlmpathError(f"machine {machine}: shard artifacts disagree on N ({sorted(ns)})")
        add_to_store(dest, sources, shards=entries)
        n = ns.pop()
        gaps[machine] = (n, missing_shards(n, ks), frozenset(owned))
    return gaps
