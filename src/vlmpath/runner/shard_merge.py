"""How do the shards of one machine and commit become one asv results file?

Each shard (``vlmpath run --shard K/N``) writes a results file of its own, under the same
machine name, holding only its units' values (asv keeps ``None`` at the parameter
combinations it did not select). ``merge_shard_files`` combines them through asv's own
``Results`` object (loaded with ``Results.load``, written with ``Results.save``), per
benchmark and per parameter combination: a combination takes the value, samples and
statistics of the shard that **owns** its unit (the shard's run-info lists them), so a
case that failed in its own shard stays failed rather than being filled from nowhere.

Refused, one line each: two shards that own one unit (overlap), shards that disagree on
N, on a benchmark's version (different benchmark code) or on its parameters, and two
files for one shard. A shard of 1..N that is absent is not an error here: the merged
run-info lists it under ``missing_shards`` and the comparison names its cases as not
judged (``pr.merge_shards``), never as green.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.runner.shards import unit_of

#: The per-benchmark maps of an asv ``Results`` that a merge carries over (asv 0.6's
#: attribute names; a ``Results`` without them is refused as an unknown asv).
_PER_KEY = ("_results", "_samples", "_stats", "_benchmark_params", "_profiles", "_started_at",
            "_duration", "_benchmark_version")


@dataclass(frozen=True)
class ShardFile:
    """One shard's results file and what its run-info says it owns."""

    path: Path
    k: int
    n: int
    units: frozenset[str]  # unit labels (``Unit.label``)


def _check_asv(res, where: Path) -> None:
    missing = [a for a in _PER_KEY if not isinstance(getattr(res, a, None), dict)]
    if missing:
        raise VlmpathError(f"{where}: this asv's Results has no {', '.join(missing)}: "
                           "the shard merge knows asv 0.6's results layout only")


def _as_list(value, n: int) -> list:
    if value is None:
        return [None] * n
    return list(value) if isinstance(value, list) else [value]


def _combos(params) -> list[tuple[str, ...]]:
    return [tuple(str(p) for p in c) for c in itertools.product(*params)] if params else [()]


def _owner(files: Sequence[tuple[ShardFile, object]], key: str, combo: tuple[str, ...]):
    label = unit_of(key, combo).label
    owners = [(sf, res) for sf, res in files if label in sf.units]
    if len(owners) > 1:
        raise VlmpathError(f"shards {owners[0][0].k}/{owners[0][0].n} and {owners[1][0].k}/{owners[1][0].n} "
                           f"both own {label}: shards of one run must not overlap (re-run with one --shard list)")
    return owners[0] if owners else None


def merge_shard_files(shards: Sequence[ShardFile]):
    """One asv ``Results`` from the shards of one machine and commit (see the docstring)."""
    from asv.results import Results

    from vlmpath.core import safe_json

    if not shards:
        raise VlmpathError("no shard results to merge")
    ns = {s.n for s in shards}
    if len(ns) > 1:
        raise VlmpathError(f"shards disagree on N ({sorted(ns)}): every shard of one run uses the same K/N")
    ks = [s.k for s in shards]
    if len(set(ks)) != len(ks):
        dup = sorted({k for k in ks if ks.count(k) > 1})
        raise VlmpathError(f"shard {dup[0]}/{shards[0].n} appears twice: each shard's results once")
    loaded = []
    for sf in sorted(shards, key=lambda s: s.k):
        safe_json.check_file(sf.path, f"shard {sf.k}/{sf.n} results file")
        res = Results.load(str(sf.path))
        _check_asv(res, sf.path)
        loaded.append((sf, res))
    commits = {res.commit_hash for _, res in loaded}
    if len(commits) > 1:
        raise VlmpathError(f"shards measured different commits ({', '.join(sorted(map(str, commits)))})")
    target = loaded[0][1]
    keys = sorted(set().union(*(set(res._results) for _, res in loaded)))
    for key in keys:
        having = [(sf, res) for sf, res in loaded if key in res._results]
        params = having[0][1]._benchmark_params[key]
        for sf, res in having[1:]:
            if res._benchmark_params[key] != params:
                raise VlmpathError(f"shards {having[0][0].k} and {sf.k} ran {key} with different parameters")
            if res._benchmark_version.get(key) != having[0][1]._benchmark_version.get(key):
                raise VlmpathError(f"shards {having[0][0].k} and {sf.k} ran different versions of {key} "
                                   "(different benchmark code): run every shard from one checkout")
        combos = _combos(params)
        n = len(combos)
        merged = {a: [None] * n for a in ("_results", "_samples", "_stats")}
        for j, combo in enumerate(combos):
            got = _owner(having, key, combo)
            if got is None:
                continue
            _, res = got
            for attr in merged:
                merged[attr][j] = _as_list(getattr(res, attr).get(key), n)[j]
        for attr, vals in merged.items():  # asv keeps a list per key, None when all are None
            getattr(target, attr)[key] = None if all(v is None for v in vals) else vals
        target._benchmark_params[key] = params
        target._benchmark_version[key] = having[0][1]._benchmark_version.get(key)
        target._started_at[key] = min(res._started_at[key] for _, res in having if key in res._started_at) \
            if any(key in res._started_at for _, res in having) else None
        durations = [res._duration[key] for _, res in having if key in res._duration]
        if durations:
            target._duration[key] = float(sum(durations))
        profiles = [res._profiles[key] for _, res in having if key in res._profiles]
        if profiles:
            target._profiles[key] = profiles[0]
    return target


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
