"""How are asv result directories read back as typed records?

asv files are parsed with asv's own loader (``asv.results.Results.load``), so the column
layout stays asv's business; the directory is walked through the results store
(``compare.results_store``: machines, run files, side files, ``benchmarks.json``), not
asv's iterators, because those log and skip broken files, and a broken file must stop a CI
comparison with a message that names it. A failed case gets the benchmark's own message
from the failures file (``vlmpath.core.failures``); with none it keeps ``NO_RESULT_ERROR``,
and an unreadable one is a note on the machine's run (the comparison goes on without the
messages).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from vlmpath.compare import results_store
from vlmpath.compare.records import (
    NO_RESULT_ERROR,
    Fingerprint,
    MachineRun,
    Metric,
    RunResults,
)
from vlmpath.compare.definitions import trusted_unit
from vlmpath.compare.values import checked
from vlmpath.core import budget, safe_json
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import failures_path, read_failures

# --- asv ---------------------------------------------------------------------------------

_SHA_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")
_QUOTED = re.compile(r"""^(?:u?'(.*)'|"(.*)")$""", re.S)


def param_display(raw: Any) -> str:
    """asv stores parameter values as repr() strings ("'fused'"); show the value."""
    s = str(raw)
    m = _QUOTED.match(s)
    if m:
        return m.group(1) if m.group(1) is not None else m.group(2)
    return s


def _read_json(path: Path) -> Any:
    # Bounded (size, depth, number length): a results directory may be an artifact's.
    return safe_json.load_file(path, "corrupted results file", "delete it or re-run")


def _read_benchmarks_json(results_dir: Path) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in results_store.read_benchmarks(results_dir).items() if isinstance(v, dict)}


def read_fingerprint(machine_dir: Path, commit: str) -> Fingerprint | None:
    """The fingerprint ``vlmpath run`` wrote for this commit, or None if there is none."""
    path = results_store.fingerprint_path(Path(machine_dir).parent, Path(machine_dir).name, commit)
    if not path.is_file():
        return None
    data = _read_json(path)
    if not isinstance(data, dict):
        raise VlmpathError(f"corrupted fingerprint file {path}: not a JSON object; delete it or re-run")
    return Fingerprint.from_dict(data)

def read_quick(machine_dir: Path, commit: str) -> bool | None:
    """Whether the run-info file ``vlmpath run`` / ``ci pr`` wrote beside the results says
    the run was quick; None when there is none or it does not say (or is unreadable)."""
    path = results_store.run_info_path(Path(machine_dir).parent, Path(machine_dir).name, commit)
    if not path.is_file():
        return None
    try:
        data = _read_json(path)
    except VlmpathError:
        return None
    quick = data.get("quick") if isinstance(data, dict) else None
    return quick if isinstance(quick, bool) else None


def _attach_failures(metrics: tuple[Metric, ...], machine_dir: Path, commit: str) -> tuple[tuple[Metric, ...], str | None]:
    """Metrics with each failed case's own message (see the module docstring), and a note
    when the failures file is unreadable."""
    if not any(m.error == NO_RESULT_ERROR for m in metrics):
        return metrics, None  # nothing to explain: the file is not even read
    try:
        failures = read_failures(failures_path(machine_dir, commit))
    except VlmpathError as exc:
        return metrics, f"failure messages not shown: {exc}"
    # By parameter names where they agree (order-proof), else by values in asv's order
    # (a base run's names may be asv's param1, param2).
    named = {(f.benchmark, frozenset(f.params)): f.error for f in failures}
    ordered = {f.key: f.error for f in failures}

    def why(m: Metric) -> str:
        return named.get((m.benchmark, frozenset(m.params)),
                         ordered.get((m.benchmark, tuple(v for _, v in m.params)), m.error))

    return tuple(replace(m, error=why(m)) if m.error == NO_RESULT_ERROR else m for m in metrics), None


def existing_commits(results_dir: str | os.PathLike[str]) -> dict[str, tuple[str, ...]]:
    """sha8 -> machines that have results for it (from file names only, cheap)."""
    found: dict[str, set[str]] = {}
    for mdir in results_store.machine_dirs(Path(results_dir)):
        for f in results_store.run_files(mdir):
            found.setdefault(f.name.split("-", 1)[0], set()).add(mdir.name)
    return {k: tuple(sorted(v)) for k, v in sorted(found.items())}


def _load_asv_file(path: Path):
    from asv import util as asv_util

    try:
        res = results_store.load_results(path, "corrupted results file")  # bounded first
        # asv trusts its own files; ours may come from an untrusted artifact.
        if not isinstance(res.commit_hash, (str, type(None))) or not isinstance(res.started_at, dict):
            raise TypeError("commit_hash or started_at has the wrong type")
        _bound(res, path)
        return res
    except asv_util.UserError as exc:
        raise VlmpathError(f"corrupted results file {path}: {exc}; delete it or re-run") from None
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        raise VlmpathError(
            f"corrupted results file {path}: unexpected layout ({type(exc).__name__}: {exc}); "
            "delete it or re-run"
        ) from None


def _bound(res, path: Path) -> None:
    """Hold asv's loaded results to ``core.budget`` before a case is built from them: a
    file's cases are the product of its parameter axes (a null result of three 50-value
    axes is 125,000 cases in a few hundred bytes), and every case keeps its own copy of
    each parameter value (a 50 kB value times 10,000 combinations is 500 MB). Long values
    are clipped in place, in the one list asv reads both the stored and the asked
    parameters from, so that the values still line up; too many cases or samples refuse
    the file."""
    total = 0
    for name in res.get_all_result_keys():
        params = res.get_result_params(name)
        if not isinstance(params, list) or not all(isinstance(a, list) for a in params):
            continue  # the wrong type is reported by _checked_metrics, by name
        combos = math.prod(len(a) for a in params)
        total += combos
        if total > budget.MAX_CASES:
            raise VlmpathError(
                f"corrupted results file {path}: more than {budget.MAX_CASES} cases (benchmark x parameter "
                f"combination; {str(name)[:80]!r} alone has {combos}); delete it or re-run")
        for axis in params:
            for i, v in enumerate(axis):
                if isinstance(v, str) and len(v) > budget.MAX_PARAM_CHARS:
                    axis[i] = _clip_param(v)
        samples = res.get_result_samples(name, params)
        if any(isinstance(sm, list) and len(sm) > budget.MAX_SAMPLES for sm in samples or ()):
            raise VlmpathError(f"corrupted results file {path}: {str(name)[:80]!r} has a case with more than "
                               f"{budget.MAX_SAMPLES} samples; delete it or re-run")


def _clip_param(raw: str) -> str:
    # The first MAX_PARAM_CHARS characters and a hash of the whole: two long values that
    # share a beginning stay two cases, and base and head clip one value alike.
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    m = _QUOTED.match(raw)
    inner = (m.group(1) if m.group(1) is not None else m.group(2)) if m else raw
    short = f"{inner[:budget.MAX_PARAM_CHARS]}…{digest}"
    return repr(short) if m else short


def _metrics_from_asv(res, machine: str, bench_meta: Mapping[str, Mapping[str, Any]]) -> list[Metric]:
    out: list[Metric] = []
    commit = res.commit_hash or ""
    for name in sorted(res.get_all_result_keys()):
        meta = bench_meta.get(name, {})
        # The table's unit by method name; benchmarks.json's is only checked (compare.definitions).
        unit, untrusted = trusted_unit(name, meta.get("unit"))
        params = res.get_result_params(name) or []
        names = list(meta.get("param_names") or [])
        if len(names) != len(params):
            # benchmarks.json describes the latest discovery; a base run may predate it.
            names = [f"param{i + 1}" for i in range(len(params))]
        values = res.get_result_value(name, params)
        stats = res.get_result_stats(name, params)
        samples = res.get_result_samples(name, params)
        version = res.benchmark_version.get(name) if isinstance(res.benchmark_version, dict) else None
        for j, combo in enumerate(itertools.product(*params)):
            v = values[j]
            st = stats[j] if stats else None
            sm = samples[j] if samples else None
            skipped = isinstance(v, float) and math.isnan(v)
            error = NO_RESULT_ERROR if v is None else None
            # A string ("nan"), a boolean, Infinity or an out-of-range value is kept as
            # not judged with its reason, never coerced by float() (compare.values).
            value, invalid = (None, None) if (v is None or skipped) else checked(v, unit)
            ci = None
            if st and "ci_99_a" in st and "ci_99_b" in st:
                a, b = float(st["ci_99_a"]), float(st["ci_99_b"])
                if math.isfinite(a) and math.isfinite(b):
                    ci = (a, b)
            out.append(Metric(
                machine=machine,
                benchmark=name,
                params=tuple((str(n), param_display(p)) for n, p in zip(names, combo)),
                unit=unit,
                value=value,
                invalid=invalid,
                version=None if version is None else str(version),
                samples=tuple(float(x) for x in (sm or ()) if checked(x, "")[0] is not None),
                ci_99=ci,
                error=error,
                skipped=skipped,
                commit=commit,
                source="asv",
                untrusted=untrusted,
            ))
    return out


def load_asv(results_dir: str | os.PathLike[str], commit: str) -> RunResults:
    """Every machine's results for ``commit`` (full sha or unique prefix of >= 7 hex digits).

    Machines without results for the commit are left out and named in ``notes``; a run
    that lacks benchmarks listed in ``benchmarks.json`` is kept, with ``missing`` set.
    """
    root = Path(results_dir)
    if not _SHA_RE.match(commit):
        raise VlmpathError(f"commit {commit!r} is not a hex sha of at least 7 digits: pass a full sha or a 7+ digit prefix")
    commit = commit.lower()
    if not root.is_dir():
        raise VlmpathError(f"results directory {root} does not exist: run `vlmpath run` first or pass --results DIR")
    mdirs = results_store.machine_dirs(root)
    if not mdirs:
        raise VlmpathError(f"results directory {root} has no <machine>/machine.json: is it an asv results dir?")
    bench_meta = _read_benchmarks_json(root)

    machines: list[MachineRun] = []
    full_shas: set[str] = set()
    notes: list[str] = []
    for mdir in mdirs:
        files = results_store.named_for(mdir, commit)
        loaded = []
        for f in files:
            res = _load_asv_file(f)
            sha = (res.commit_hash or "").lower()
            if sha.startswith(commit):
                loaded.append((f, res))
        if not loaded:
            notes.append(f"machine {mdir.name} has no results for commit {commit[:8]}")
            continue
        full_shas.update((r.commit_hash or "").lower() for _, r in loaded)
        # Several env files for one commit: later started runs win per benchmark.
        merged: dict[tuple, Metric] = {}
        for f, res in sorted(loaded, key=lambda fr: _started(fr[1])):
            for m in _checked_metrics(f, res, mdir.name, bench_meta):
                merged[(m.benchmark, m.params)] = m
        run_sha = loaded[0][1].commit_hash or commit
        metrics, failures_note = _attach_failures(tuple(merged[k] for k in sorted(merged)), mdir, run_sha)
        present = {m.benchmark for m in metrics}
        missing = tuple(sorted(set(bench_meta) - present))
        mnotes = [n for n in (_machine_file_note(mdir),) if n]
        fingerprint, fp_note = _fingerprint_or_note(mdir, run_sha)
        if fp_note:
            mnotes.append(fp_note)
        if len(loaded) > 1:
            mnotes.append(f"{len(loaded)} environment files merged: {', '.join(f.name for f, _ in loaded)}")
        if failures_note:
            mnotes.append(failures_note)
        machines.append(MachineRun(
            machine=mdir.name,
            commit=run_sha,
            metrics=metrics,
            fingerprint=fingerprint,
            missing=missing,
            notes=tuple(mnotes),
            quick=read_quick(mdir, run_sha),
        ))
    if sum(len(m.metrics) for m in machines) > budget.MAX_CASES:  # the run's bound, all machines together
        raise VlmpathError(f"results directory {root}: more than {budget.MAX_CASES} cases for commit {commit[:8]} "
                           "on all machines together; compare fewer machines or benchmarks")
    if len(full_shas) > 1:
        raise VlmpathError(
            f"commit prefix {commit!r} is ambiguous: matches {', '.join(sorted(full_shas))}; pass more digits"
        )
    if not machines:
        have = existing_commits(root)
        listing = ", ".join(f"{sha} ({', '.join(ms)})" for sha, ms in have.items()) or "none"
        raise VlmpathError(
            f"no results for commit {commit} in {root}; commits with results: {listing}. "
            "Run the benchmarks for it or check the sha"
        )
    return RunResults(commit=next(iter(full_shas)) or commit, machines=tuple(machines), source="asv", notes=tuple(notes))


def _started(res) -> float:
    """When a results file's run started (for "later runs win"); 0 when unreadable."""
    try:
        return max((float(v) for v in res.started_at.values() if v), default=0.0)
    except (AttributeError, TypeError, ValueError):
        return 0.0


def _checked_metrics(path: Path, res, machine: str, bench_meta) -> list[Metric]:
    """``_metrics_from_asv``, with a wrong-typed value (a string where asv writes a
    number, a dict where it writes a list) reported as a corrupted file, by name."""
    try:
        return _metrics_from_asv(res, machine, bench_meta)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise VlmpathError(f"corrupted results file {path}: a wrong-typed value "
                           f"({type(exc).__name__}: {str(exc)[:120]}); delete it or re-run") from None


def _machine_file_note(machine_dir: Path) -> str | None:
    """A warning naming ``machine.json`` when it is not a JSON object (asv publish needs it)."""
    path = machine_dir / results_store.MACHINE_JSON
    try:
        ok = isinstance(_read_json(path), dict)
    except VlmpathError:
        ok = False
    return None if ok else f"machine file {path} is corrupted (not a JSON object); delete it or re-run"


def _fingerprint_or_note(machine_dir: Path, commit: str) -> tuple[Fingerprint | None, str | None]:
    """The fingerprint, or None and a warning naming the corrupted file (never silent)."""
    try:
        return read_fingerprint(machine_dir, commit), None
    except (VlmpathError, TypeError, ValueError) as exc:
        return None, f"fingerprint not shown: {exc}"
