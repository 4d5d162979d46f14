"""Write asv-0.6-format results directories for tests (reusable by any test module).

``write_asv_run`` produces the same files ``asv run --record-samples`` writes:
``benchmarks.json`` (api version 2), ``<machine>/machine.json`` (api version 1) and
``<machine>/<sha8>-<env>.json`` in asv's columnar layout, with stats computed by
asv_runner's own ``compute_stats``. ``tests/test_results.py`` loads its output with
``asv.results.Results.load`` to keep it honest, and compares it with a real asv run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from asv.util import truncate_float_list
from asv_runner.statistics import compute_stats

RESULT_COLUMNS = [
    "result", "params", "version", "started_at", "duration",
    "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
    "stats_number", "stats_repeat", "samples", "profile",
]
DEFAULT_ENV = "existing-py_usr_bin_python3"

# name -> (unit, param_names, params (python values per axis), values, samples-or-None)
BenchSpec = tuple[str, Sequence[str], Sequence[Sequence[Any]], Sequence[Any], Any]


def sha(label: str) -> str:
    """A deterministic 40-hex commit sha for a readable label."""
    return hashlib.sha1(label.encode()).hexdigest()


def _bench_type(name: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    for prefix, kind in (("time_", "time"), ("peakmem_", "peakmemory"), ("mem_", "memory"), ("track_", "track")):
        if leaf.startswith(prefix):
            return kind
    return "track"


def _none_if_all_none(values: list[Any]) -> list[Any] | None:
    return None if all(v is None for v in values) else values


def write_asv_run(
    results_dir: Path | str,
    machine: str,
    commit: str,
    benchmarks: Mapping[str, BenchSpec],
    fingerprint: Mapping[str, Any] | None = None,
    *,
    env_name: str = DEFAULT_ENV,
    date: int = 1_700_000_000_000,
    update_benchmarks_json: bool = True,
) -> Path:
    """Write one asv run (one machine, one commit); returns the result file path.

    ``params`` are python values (stored as ``repr`` like asv does); ``values`` are one
    per cartesian-product combination (None = failed, NaN = skipped); ``samples`` is
    None or a list with, per combination, a list of raw samples or None. Where samples
    are given, the stored result is their median (as asv stores it), not the float
    passed in ``values``, which then only marks the case as measured.
    """
    root = Path(results_dir)
    mdir = root / machine
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "machine.json").write_text(json.dumps(
        {"arch": "x86_64", "cpu": "Test CPU", "machine": machine, "num_cpu": "2",
         "os": "Linux 6.1", "ram": "24000000", "version": 1}, indent=4, sort_keys=True))

    bench_path = root / "benchmarks.json"
    meta: dict[str, Any] = json.loads(bench_path.read_text()) if bench_path.is_file() else {"version": 2}
    results: dict[str, list[Any]] = {}
    for i, (name, (unit, param_names, params, values, samples)) in enumerate(sorted(benchmarks.items())):
        param_reprs = [[repr(v) for v in axis] for axis in params]
        n = len(list(itertools.product(*param_reprs)))
        if len(values) != n:
            raise ValueError(f"{name}: {len(values)} values for {n} parameter combinations")
        version = hashlib.sha256(f"{name}:{unit}".encode("utf-8", "surrogatepass")).hexdigest()
        if update_benchmarks_json:
            meta[name] = {
                "code": f"def {name.rsplit('.', 1)[-1]}(self): ...", "name": name,
                "param_names": list(param_names), "params": param_reprs, "type": _bench_type(name),
                "unit": unit, "version": version, "timeout": 60.0,
            }
        result: list[Any] = []
        stats: list[dict[str, Any] | None] = []
        kept_samples: list[Any] = []
        for j, v in enumerate(values):
            s = samples[j] if samples is not None else None
            if v is None or (isinstance(v, float) and math.isnan(v)):
                result.append(v)
                stats.append(None)
                kept_samples.append(None)
                continue
            if s:
                # As asv does: the stored result is the median of the samples.
                med, st = compute_stats([float(x) for x in s], 1)
                result.append(med)
                stats.append(st)
                kept_samples.append([float(x) for x in s])
            else:
                result.append(float(v))
                stats.append(None)
                kept_samples.append(None)
        row: list[Any] = [
            None if all(r is None for r in result) else result,
            param_reprs,
            version,
            date + 1000 * i,
            0.5,
        ]
        for key in ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat"):
            col = [st.get(key) if st else None for st in stats]
            row.append(truncate_float_list(_none_if_all_none(col)))
        row.append(_none_if_all_none(kept_samples))
        row.append(None)  # profile
        while row and row[-1] is None:
            row.pop()
        results[name] = row

    data = {
        "commit_hash": commit, "env_name": env_name, "date": date,
        "params": {"machine": machine, "python": "3.11"}, "python": "3.11",
        "requirements": {}, "env_vars": {}, "result_columns": RESULT_COLUMNS,
        "results": results, "durations": {"<build>": 0.01}, "version": 2,
    }
    path = mdir / f"{commit[:8]}-{env_name}.json"
    path.write_text(json.dumps(data))
    if update_benchmarks_json:
        bench_path.write_text(json.dumps(meta, indent=4, sort_keys=True))
    if fingerprint is not None:
        (mdir / f"vlmpath-fingerprint-{commit[:8]}.json").write_text(json.dumps(dict(fingerprint)))
    return path


def fingerprint(backend: str = "cpu", **overrides: Any) -> dict[str, Any]:
    """A plausible fingerprint for ``backend``; override any key."""
    base = {
        "backend": backend,
        "device_name": {"cuda": "NVIDIA H200", "rocm": "AMD Instinct MI300X", "cpu": "cpu"}[backend],
        "arch": {"cuda": "sm_90", "rocm": "gfx942", "cpu": "x86_64"}[backend],
        "torch": "2.7.1",
        "cuda": "12.8" if backend == "cuda" else None,
        "hip": "6.4" if backend == "rocm" else None,
        "driver": {"cuda": "570.124", "rocm": "6.10.5", "cpu": None}[backend],
        "transformers": "4.53.0", "python": "3.11.9", "cpu": "Test CPU",
        "machine": "x86_64", "vlmpath": "0.1.0",
    }
    base.update(overrides)
    return base
