"""How do the shards of one machine and commit become one asv results file?

Each shard (``vlmpath run --shard K/N``) writes a results file of its own, under the same
machine name, holding only its units' values (asv keeps ``None`` at the parameter
combinations it did not select). ``merge_shard_files`` combines them through asv's public
``Results`` API only (``Results.load``, the ``get_result_*`` readers, ``remove_result``,
``add_result``; the caller's ``Results.save``), per benchmark and per parameter
combination: a combination takes the value, samples and statistics of the shard that
**owns** its unit (the shard's run-info lists them), so a case that failed in its own shard
stays failed rather than being filled from nowhere. ``add_result`` derives a timing's
statistics from its samples and its ``number``; the merge hands it both, and checks that
what asv kept is what the owning shard measured (a future asv that derived them otherwise
is refused in one line, never merged into other numbers).

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

@dataclass(frozen=True)
class ShardFile:
    """One shard's results file and what its run-info says it owns."""

    path: Path
    k: int
    n: int
    units: frozenset[str]  # unit labels (``Unit.label``)


def _check_asv(res, where: Path) -> None:
    needed = ("get_all_result_keys", "get_result_value", "get_result_samples", "get_result_stats",
              "get_result_params", "remove_result", "add_result", "benchmark_version", "started_at", "duration")
    missing = [a for a in needed if not hasattr(res, a)]
    if missing:
        raise VlmpathError(f"{where}: this asv's Results has no {', '.join(missing)}: "
                           "the shard merge knows asv 0.6's public Results API only")


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
    keys = sorted(set().union(*(set(res.get_all_result_keys()) for _, res in loaded)))
    for key in keys:
        having = [(sf, res) for sf, res in loaded if key in res.get_all_result_keys()]
        _merge_key(target, key, having)
    return target


def _same(a: list, b: list) -> bool:
    """Equal lists of values, a NaN (asv's "skipped") equal to a NaN."""
    import math

    def nan(x) -> bool:
        return isinstance(x, float) and math.isnan(x)

    return len(a) == len(b) and all(x == y or (nan(x) and nan(y)) for x, y in zip(a, b))


def _as_saved(stats: list) -> list:
    """Statistics as asv's ``Results.save`` writes them (each field's floats truncated, as
    ``asv.util.truncate_float_list``): what a merged file will hold."""
    from asv.util import truncate_float_list

    fields = sorted({f for s in stats if isinstance(s, dict) for f in s})
    return [truncate_float_list([s.get(f) if isinstance(s, dict) else None for s in stats]) for f in fields]


def _same_params(key: str, having) -> list:
    params = having[0][1].get_result_params(key)
    version = having[0][1].benchmark_version.get(key)
    for sf, res in having[1:]:
        if res.get_result_params(key) != params:
            raise VlmpathError(f"shards {having[0][0].k} and {sf.k} ran {key} with different parameters")
        if res.benchmark_version.get(key) != version:
            raise VlmpathError(f"shards {having[0][0].k} and {sf.k} ran different versions of {key} "
                               "(different benchmark code): run every shard from one checkout")
    return params


def _merge_key(target, key: str, having) -> None:
    """``key``'s combinations, each from the shard that owns it, written into ``target``
    through ``add_result`` (module doc)."""
    import datetime

    from asv.runner import BenchmarkResult

    params = _same_params(key, having)
    combos = _combos(params)
    n = len(combos)
    values, samples, stats, numbers = [None] * n, [None] * n, [None] * n, [None] * n
    errcode, stderr, profile = 0, "", None
    for j, combo in enumerate(combos):
        got = _owner(having, key, combo)
        if got is None:
            continue
        _, res = got
        values[j] = _as_list(res.get_result_value(key, params), n)[j]
        samples[j] = _as_list(res.get_result_samples(key, params), n)[j]
        stats[j] = _as_list(res.get_result_stats(key, params), n)[j]
        if samples[j] is not None and isinstance(stats[j], dict):  # asv derives the stats from these
            numbers[j] = stats[j].get("number")
        errcode = errcode or res.errcode.get(key, 0) or 0
        stderr = stderr or res.stderr.get(key, "") or ""
        if profile is None and res.has_profile(key):
            profile = res.get_profile(key)
    started = [res.started_at[key] for _, res in having if res.started_at.get(key) is not None]
    durations = [res.duration[key] for _, res in having if res.duration.get(key) is not None]
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    if key in target.get_all_result_keys():
        target.remove_result(key)
    target.add_result({"name": key, "version": having[0][1].benchmark_version.get(key), "params": params},
                      BenchmarkResult(result=values, samples=samples, number=numbers, errcode=errcode,
                                      stderr=stderr, profile=profile),
                      started_at=epoch + datetime.timedelta(milliseconds=min(started)) if started else None,
                      duration=float(sum(durations)) if durations else None, record_samples=True)
    kept = (_as_list(target.get_result_value(key, params), n), _as_list(target.get_result_stats(key, params), n))
    if not (_same(kept[0], values) and _as_saved(kept[1]) == _as_saved(stats)):
        raise VlmpathError(f"shard merge of {key}: asv's Results.add_result did not keep the values and statistics "
                           "the owning shards measured (another asv version?): merge with the asv this vlmpath pins")


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
