"""Where do an asv results directory's files live, which are one commit's runs, and how are
runs copied between directories and partial results merged into one?

One results directory (``ROOT``) is laid out as asv writes it, with vlmpath's files beside::

    ROOT/benchmarks.json                             what discovery found, per benchmark
    ROOT/<machine>/machine.json                      the machine (asv publish needs it)
    ROOT/<machine>/<sha8>-<env>.json                 a run file: one commit, one environment (asv's)
    ROOT/<machine>/vlmpath-fingerprint-<sha8>.json   the platform (runner.run_files)
    ROOT/<machine>/vlmpath-failures-<sha8>.json      why cases failed (core.failures)
    ROOT/<machine>/vlmpath-run-<sha8>.json           how the run was measured (runner.run_files)

This module is the one reading of that layout: the machines, a machine's run files, a
commit's run files (``commit_files``: named for it *and* recording it as their
``commit_hash``; a file named for the commit that cannot be read is kept, so that the reader,
``compare.asv_results.load_asv``, names it instead of the run going missing silently), the
side files, ``benchmarks.json`` read, trimmed to what ran and merged, a comparison's runs
copied (``copy_comparison``: ``ci pr``'s artifact, each interleaved round), and partial
results of one machine and commit combined through asv's public ``Results`` API
(``load_results``, ``merge_partials``, ``save_results``; the shard merge decides who owns a
case, ``runner.shard_merge``). The typed merge of ``RunResults`` is elsewhere and only
there (``compare.records.merge_runs``); this merges asv's files.

It sits in ``compare/``, the lowest layer that reads asv results, so that every user (the
reader ``compare.asv_results``, ``runner``'s store and shard merge, ``render``'s history,
``github.alert``, ``pr``'s sides, rounds and artifacts) imports it downwards. What an
untrusted artifact may hold is checked by ``pr.artifact.copy_results`` against the name
patterns here, before anything here reads it.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlmpath.compare.records import FINGERPRINT_PREFIX, RUN_INFO_PREFIX
from vlmpath.core.atomic import write_text
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import FAILURES_PREFIX, failures_path

BENCHMARKS_JSON = "benchmarks.json"
MACHINE_JSON = "machine.json"
_SIDE_PREFIXES = (FINGERPRINT_PREFIX, FAILURES_PREFIX, RUN_INFO_PREFIX)

#: The names an untrusted artifact's results may hold (``pr.artifact.copy_results`` refuses
#: any other): a run file, a fingerprint or failures file, a run-info file.
RUN_FILE_NAME = re.compile(r"^[0-9a-f]{8}-[A-Za-z0-9._+-]{1,200}\.json$")
SIDE_FILE_NAME = re.compile(
    rf"^({re.escape(FINGERPRINT_PREFIX)}|{re.escape(FAILURES_PREFIX)})[0-9a-f]{{8}}\.json$")
RUN_INFO_NAME = re.compile(rf"^{re.escape(RUN_INFO_PREFIX)}[0-9a-f]{{8}}\.json$")


# --- layout ----------------------------------------------------------------------------------


def machine_dirs(root: Path) -> list[Path]:
    """Every ``ROOT/<machine>`` that holds a ``machine.json``, sorted."""
    return sorted(p.parent for p in Path(root).glob(f"*/{MACHINE_JSON}"))


def is_run_file(path: Path) -> bool:
    """An asv run file (not ``machine.json``, not one of vlmpath's side files)."""
    return path.suffix == ".json" and path.name != MACHINE_JSON and not path.name.startswith(_SIDE_PREFIXES)


def run_files(machine_dir: Path) -> list[Path]:
    """Every run file of one machine, sorted by name."""
    return sorted(p for p in Path(machine_dir).glob("*.json") if is_run_file(p))


def named_for(machine_dir: Path, commit: str) -> list[Path]:
    """The run files of one machine whose name says ``commit`` (a full sha or a prefix of 7+
    digits; the name holds 8). The name only: ``commit_files`` also reads what they record."""
    want = commit.lower()
    out = []
    for p in run_files(machine_dir):
        sha8 = p.name.split("-", 1)[0].lower()
        n = min(len(sha8), len(want))
        if sha8[:n] == want[:n]:
            out.append(p)
    return out


def files_named(root: Path, commit: str, machine: str | None = None) -> list[Path]:
    """``named_for`` over every machine directory of ``root`` (or ``machine``'s only)."""
    root = Path(root)
    dirs = [root / machine] if machine else sorted(p for p in root.glob("*") if p.is_dir())
    return [f for d in dirs for f in named_for(d, commit)]


def commit_files(root: Path, machine: str, sha: str) -> list[Path]:
    """``sha``'s run files on ``machine``: named for it and recording it as ``commit_hash``
    (a file named for ``sha`` that holds another commit is not its). A file that cannot be
    read is kept: the reader names it (module doc)."""
    sha = sha.lower()
    out = []
    for p in named_for(Path(root) / machine, sha[:8]):
        if not p.is_file():
            continue
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):  # deep JSON too
            out.append(p)
            continue
        if isinstance(data, dict) and str(data.get("commit_hash", "")).lower() == sha:
            out.append(p)
    return out


def run_file_path(root: Path, machine: str, commit: str, env: str) -> Path:
    """Where asv files ``commit``'s run in environment ``env`` (its ``Results.save``)."""
    return Path(root) / machine / f"{commit[:8]}-{env}.json"


def fingerprint_path(root: Path, machine: str, commit: str) -> Path:
    return Path(root) / machine / f"{FINGERPRINT_PREFIX}{commit[:8]}.json"


def run_info_path(root: Path, machine: str, commit: str) -> Path:
    return Path(root) / machine / f"{RUN_INFO_PREFIX}{commit[:8]}.json"


def side_files(root: Path, machine: str, commit: str, *, run_info: bool = True) -> list[Path]:
    """The side files of ``commit`` on ``machine`` that exist: fingerprint, failures and
    (``run_info``) the run-info."""
    paths = [fingerprint_path(root, machine, commit), failures_path(Path(root) / machine, commit)]
    if run_info:
        paths.append(run_info_path(root, machine, commit))
    return [p for p in paths if p.is_file()]


def result_keys(paths: Iterable[Path]) -> set[str]:
    """The benchmarks these run files hold results of; empty when one cannot be read (then
    nothing is trimmed away on its account)."""
    keys: set[str] = set()
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):  # deep JSON too
            return set()
        if isinstance(data, dict) and isinstance(data.get("results"), dict):
            keys.update(data["results"])
    return keys


# --- benchmarks.json -------------------------------------------------------------------------


def read_benchmarks(root: Path) -> dict[str, Any]:
    """``ROOT/benchmarks.json`` (bounded: the directory may be an artifact's); ``{}`` when
    there is none; a corrupted one is refused, named."""
    from vlmpath.core import safe_json

    path = Path(root) / BENCHMARKS_JSON
    if not path.is_file():
        return {}
    data = safe_json.load_file(path, "corrupted results file", "delete it or re-run")
    if not isinstance(data, dict):
        raise VlmpathError(f"corrupted results file {path}: not a JSON object; delete it or re-run")
    return data


def trim_benchmarks(meta: Mapping[str, Any], ran: set[str]) -> dict[str, Any]:
    """``meta`` cut to the benchmarks that ran (and its ``version``); untouched when ``ran``
    is empty (not known). A benchmark listed but never asked for (``--bench``) would mark
    every run "partial"."""
    if not ran:
        return dict(meta)
    return {k: v for k, v in meta.items() if k == "version" or k in ran}


def write_benchmarks(root: Path, meta: Mapping[str, Any]) -> None:
    """``ROOT/benchmarks.json``, sorted and indented, atomically."""
    write_text(Path(root) / BENCHMARKS_JSON, json.dumps(meta, indent=1, sort_keys=True) + "\n")


def add_benchmarks(root: Path, incoming: Mapping[str, Any]) -> None:
    """``incoming``'s benchmarks added to ``ROOT/benchmarks.json``: a benchmark already
    listed keeps its entry (the first directory added owns it)."""
    target = Path(root) / BENCHMARKS_JSON
    merged = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {}
    for k, v in incoming.items():
        merged.setdefault(k, v)
    write_benchmarks(root, merged)


# --- copies ----------------------------------------------------------------------------------


def copy_machine(src: Path, dest: Path, machine: str) -> None:
    """``machine.json`` of ``machine`` from ``src`` to ``dest`` (when ``src`` has one)."""
    if (Path(src) / machine / MACHINE_JSON).is_file():
        (Path(dest) / machine).mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(src) / machine / MACHINE_JSON, Path(dest) / machine / MACHINE_JSON)


def copy_run(src: Path, dest: Path, machine: str, run_file: Path, *, run_info: bool = True) -> Path:
    """One run file and its commit's side files from ``src`` to ``dest`` (same machine)."""
    (Path(dest) / machine).mkdir(parents=True, exist_ok=True)
    target = Path(dest) / machine / run_file.name
    shutil.copy2(run_file, target)
    sha8 = run_file.name.split("-", 1)[0]
    for side in side_files(src, machine, sha8, run_info=run_info):
        shutil.copy2(side, Path(dest) / machine / side.name)
    return target


def copy_comparison(src: Path, dest: Path, machine: str, shas: Sequence[str],
                    sources: Mapping[str, Path] | None = None) -> None:
    """Copy only what one comparison needs (not the whole history) into ``dest``: each
    sha's run files on ``machine`` (``commit_files``) with their fingerprint and failures,
    ``machine.json``, and ``benchmarks.json`` trimmed to the benchmarks these runs hold (a
    benchmark run on one side only still shows: new, removed, newly failing). ``sources``
    names another results directory for a sha (a reused trusted base). Run-info files stay
    behind: they say how a run was measured where it was, and an artifact refuses them."""
    mdest = Path(dest) / machine
    mdest.mkdir(parents=True, exist_ok=True)
    copy_machine(src, dest, machine)
    copied: list[Path] = []
    for sha in dict.fromkeys(shas):
        where = Path((sources or {}).get(sha, src))
        for p in commit_files(where, machine, sha):
            shutil.copy2(p, mdest / p.name)
            copied.append(mdest / p.name)
        for side in side_files(where, machine, sha, run_info=False):
            shutil.copy2(side, mdest / side.name)
    bench_json = Path(src) / BENCHMARKS_JSON
    if not bench_json.is_file():
        return
    try:
        meta = json.loads(bench_json.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        shutil.copy2(bench_json, Path(dest) / BENCHMARKS_JSON)  # as it is: load_asv names it
        return
    write_benchmarks(dest, trim_benchmarks(meta, result_keys(copied)) if isinstance(meta, dict) else meta)


# --- partial results through asv's public Results API ------------------------------------------


def load_results(path: Path, what: str = "results file"):
    """One run file as asv's ``Results``, bounded first (asv's own loader has no bounds)."""
    from asv.results import Results

    from vlmpath.core import safe_json

    safe_json.check_file(path, what)
    return Results.load(str(path))


def save_results(res, root: Path) -> None:
    """asv's own writer: ``ROOT/<machine>/<sha8>-<env>.json``."""
    res.save(str(root))


@dataclass(frozen=True)
class Partial:
    """Part of one machine's run of one commit: asv's ``Results`` and the name a refusal
    gives it ("shard 2/3")."""

    label: str
    results: Any


#: Which of the parts that hold a benchmark owns one of its parameter combinations:
#: ``owner(key, combo, having)`` returns one of ``having`` or None (nobody ran it).
Owner = Callable[[str, tuple[str, ...], Sequence[Partial]], "Partial | None"]

_API = ("get_all_result_keys", "get_result_value", "get_result_samples", "get_result_stats",
        "get_result_params", "remove_result", "add_result", "benchmark_version", "started_at", "duration")


def merge_partials(parts: Sequence[Partial], owner: Owner, what: str = "merge"):
    """One asv ``Results`` from ``parts`` (one machine, one commit): each benchmark's
    parameter combination takes the value, samples and statistics of the part ``owner``
    names (a case that failed in its owner stays failed, never filled from another part);
    written with ``add_result`` into the first part's ``Results``, which is returned (save
    it with ``save_results``). ``add_result`` derives a timing's statistics from its samples
    and ``number``: what asv kept is checked against what the owner measured, and another
    asv that derived them otherwise is refused in one line, never merged into other numbers.
    Parts that ran a benchmark with other parameters or another version are refused."""
    if not parts:
        raise VlmpathError(f"{what}: nothing to merge")
    missing = [a for a in _API if not hasattr(parts[0].results, a)]
    if missing:
        raise VlmpathError(f"{what}: this asv's Results has no {', '.join(missing)}: "
                           "vlmpath knows asv 0.6's public Results API only")
    target = parts[0].results
    keys = sorted(set().union(*(set(p.results.get_all_result_keys()) for p in parts)))
    for key in keys:
        _merge_key(target, key, [p for p in parts if key in p.results.get_all_result_keys()], owner, what)
    return target


def _as_list(value, n: int) -> list:
    if value is None:
        return [None] * n
    return list(value) if isinstance(value, list) else [value]


def combos(params) -> list[tuple[str, ...]]:
    """A benchmark's parameter combinations in asv's order, each value as asv's text."""
    import itertools

    return [tuple(str(p) for p in c) for c in itertools.product(*params)] if params else [()]


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


def _same_params(key: str, having: Sequence[Partial]) -> list:
    first = having[0]
    params = first.results.get_result_params(key)
    version = first.results.benchmark_version.get(key)
    for p in having[1:]:
        if p.results.get_result_params(key) != params:
            raise VlmpathError(f"{first.label} and {p.label} ran {key} with different parameters")
        if p.results.benchmark_version.get(key) != version:
            raise VlmpathError(f"{first.label} and {p.label} ran different versions of {key} "
                               "(different benchmark code): run every part from one checkout")
    return params


def _merge_key(target, key: str, having: Sequence[Partial], owner: Owner, what: str) -> None:
    """``key``'s combinations, each from its owner, written into ``target`` (``merge_partials``)."""
    import datetime

    from asv.runner import BenchmarkResult

    params = _same_params(key, having)
    every = combos(params)
    n = len(every)
    values, samples, stats, numbers = [None] * n, [None] * n, [None] * n, [None] * n
    errcode, stderr, profile = 0, "", None
    for j, combo in enumerate(every):
        got = owner(key, combo, having)
        if got is None:
            continue
        res = got.results
        values[j] = _as_list(res.get_result_value(key, params), n)[j]
        samples[j] = _as_list(res.get_result_samples(key, params), n)[j]
        stats[j] = _as_list(res.get_result_stats(key, params), n)[j]
        if samples[j] is not None and isinstance(stats[j], dict):  # asv derives the stats from these
            numbers[j] = stats[j].get("number")
        errcode = errcode or res.errcode.get(key, 0) or 0
        stderr = stderr or res.stderr.get(key, "") or ""
        if profile is None and res.has_profile(key):
            profile = res.get_profile(key)
    started = [p.results.started_at[key] for p in having if p.results.started_at.get(key) is not None]
    durations = [p.results.duration[key] for p in having if p.results.duration.get(key) is not None]
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    if key in target.get_all_result_keys():
        target.remove_result(key)
    target.add_result({"name": key, "version": having[0].results.benchmark_version.get(key), "params": params},
                      BenchmarkResult(result=values, samples=samples, number=numbers, errcode=errcode,
                                      stderr=stderr, profile=profile),
                      started_at=epoch + datetime.timedelta(milliseconds=min(started)) if started else None,
                      duration=float(sum(durations)) if durations else None, record_samples=True)
    kept = (_as_list(target.get_result_value(key, params), n), _as_list(target.get_result_stats(key, params), n))
    if not (_same(kept[0], values) and _as_saved(kept[1]) == _as_saved(stats)):
        raise VlmpathError(f"{what} of {key}: asv's Results.add_result did not keep the values and statistics "
                           "their owners measured (another asv version?): merge with the asv this vlmpath pins")
