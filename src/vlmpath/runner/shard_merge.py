"""How do the shards of one machine and commit become one asv results file?

Each shard (``vlmpath run --shard K/N``) writes a results file of its own, under the same
machine name, holding only its units' values (asv keeps ``None`` at the parameter
combinations it did not select). ``merge_shard_files`` says who owns each case: a
combination takes the value, samples and statistics of the shard that **owns** its unit
(the shard's run-info lists them), so a case that failed in its own shard stays failed
rather than being filled from nowhere. The writing is the results store's
(``compare.results_store.merge_partials``: asv's public ``Results`` API only, ``add_result``
per benchmark, what asv kept checked against what the owner measured; the caller saves
with ``save_results``).

Refused, one line each: two shards that own one unit (overlap), shards that disagree on
N, on a benchmark's version (different benchmark code) or on its parameters, and two
files for one shard. A shard of 1..N that is absent is not an error here: the merged
run-info lists it under ``missing_shards`` and the comparison names its cases as not
judged (``pr.shard``), never as green.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.results_store import Partial, load_results, merge_partials
from vlmpath.core.errors import VlmpathError
from vlmpath.runner.shards import unit_of


@dataclass(frozen=True)
class ShardFile:
    """One shard's results file and what its run-info says it owns."""

    path: Path
    k: int
    n: int
    units: frozenset[str]  # unit labels (``Unit.label``)


@dataclass(frozen=True)
class _ShardPart(Partial):
    """A shard's ``Results`` as a part of the merge, with its file's claim (what it owns)."""

    shard: ShardFile | None = None


def _owner(key: str, combo: tuple[str, ...], having: Sequence[Partial]) -> Partial | None:
    """The part (shard) whose run-info lists ``key``'s unit at ``combo``; two: refused."""
    label = unit_of(key, combo).label
    owners = [p for p in having if label in p.shard.units]  # type: ignore[attr-defined]
    if len(owners) > 1:
        a, b = owners[0].shard, owners[1].shard  # type: ignore[attr-defined]
        raise VlmpathError(f"shards {a.k}/{a.n} and {b.k}/{b.n} "
                           f"both own {label}: shards of one run must not overlap (re-run with one --shard list)")
    return owners[0] if owners else None


def merge_shard_files(shards: Sequence[ShardFile]):
    """One asv ``Results`` from the shards of one machine and commit (see the docstring)."""
    if not shards:
        raise VlmpathError("no shard results to merge")
    ns = {s.n for s in shards}
    if len(ns) > 1:
        raise VlmpathError(f"shards disagree on N ({sorted(ns)}): every shard of one run uses the same K/N")
    ks = [s.k for s in shards]
    if len(set(ks)) != len(ks):
        dup = sorted({k for k in ks if ks.count(k) > 1})
        raise VlmpathError(f"shard {dup[0]}/{shards[0].n} appears twice: each shard's results once")
    parts = [_ShardPart(f"shard {sf.k}/{sf.n}", load_results(sf.path, f"shard {sf.k}/{sf.n} results file"), sf)
             for sf in sorted(shards, key=lambda s: s.k)]
    commits = {p.results.commit_hash for p in parts}
    if len(commits) > 1:
        raise VlmpathError(f"shards measured different commits ({', '.join(sorted(map(str, commits)))})")
    return merge_partials(parts, _owner, "shard merge")


def missing_shards(n: int, present: Sequence[int]) -> list[int]:
    return [k for k in range(1, n + 1) if k not in set(present)]


def shard_info(info: Mapping | None) -> tuple[int, int, frozenset[str]] | None:
    """(k, n, unit labels) from a run-info / run.json ``shard`` entry; None when the run was
    not sharded; a malformed entry is refused (it would silently drop or double cases)."""
    if not info or info.get("shard") is None:
        return None
    s = info["shard"]
    ok = (isinstance(s, Mapping) and isinstance(s.get("k"), int) and isinstance(s.get("n"), int)
          and not isinstance(s.get("k"), bool) and 1 <= s["k"] <= s["n"] <= 64
          and isinstance(s.get("units"), list) and len(s["units"]) <= 100_000
          and all(isinstance(u, str) and len(u) <= 1000 for u in s["units"]))
    if not ok:
        raise VlmpathError("a run's shard entry is not {k, n, units}: re-run the shard with this vlmpath")
    return s["k"], s["n"], frozenset(s["units"])
