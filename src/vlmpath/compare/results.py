"""What did one benchmark run measure, read back from disk as typed records?

Reads asv result directories and pytest-benchmark JSON into frozen ``Metric`` records,
grouped per machine in a ``RunResults``. Nothing here compares or formats: that is
``compare.py`` and ``render.py``. asv files are parsed with asv's own loader
(``asv.results.Results.load``), so the column layout stays asv's business; we only
walk the directory ourselves because asv's iterators log and skip broken files, and a
broken file must stop a CI comparison with a message that names it.

Why a case failed: asv stores only ``null`` for a benchmark that raised. ``vlmpath run``
files the benchmarks' own messages beside the results as
``<machine>/vlmpath-failures-<sha8>.json`` (a JSON list of ``{"benchmark", "params",
"error"}``); ``load_asv`` puts each into ``Metric.error`` of the matching failed case. With
no such file a failed case keeps the generic ``NO_RESULT_ERROR``; an unreadable one is a
note on the machine's run (the comparison goes on without the messages).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from vlmpath.core import atomic
from vlmpath.core.errors import VlmpathError

SCHEMA_VERSION = 1

# Fingerprint keys whose change makes timings between two runs incomparable.
TOOLCHAIN_KEYS = ("backend", "device_name", "arch", "torch", "cuda", "hip", "driver")
FINGERPRINT_KEYS = TOOLCHAIN_KEYS + ("transformers", "python", "cpu", "machine", "vlmpath")
FINGERPRINT_PREFIX = "vlmpath-fingerprint-"
FAILURES_PREFIX = "vlmpath-failures-"
#: ``Metric.error`` of a failed asv case whose own message is unknown.
NO_RESULT_ERROR = "failed (asv recorded no result)"

# pytest-benchmark ``extra_info`` keys that carry a metric, and the unit each has.
EXTRA_INFO_UNITS: Mapping[str, str] = {
    "tok_per_s": "tok/s",
    "accuracy": "fraction",
    "syncs": "syncs",
    "encoder_calls": "calls",
}


@dataclass(frozen=True)
class Metric:
    """One measured number: a benchmark at one parameter combination on one machine.

    ``value`` is None when the benchmark failed (``error`` says so) or was skipped.
    ``samples`` are the raw repeats (empty when the source kept none); ``ci_99`` is
    asv's 99% interval when it is finite.
    """

    machine: str
    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    value: float | None
    samples: tuple[float, ...] = ()
    ci_99: tuple[float, float] | None = None
    error: str | None = None
    skipped: bool = False
    commit: str = ""
    source: str = "asv"

    @property
    def case(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Identity of the measurement across commits and machines."""
        return (self.benchmark, self.params)

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None and not self.skipped

    @property
    def message(self) -> str | None:
        """Why the case failed, in the benchmark's own words; None when unknown or not failed."""
        return None if self.error in (None, NO_RESULT_ERROR) else self.error

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metric:
        ci = d.get("ci_99")
        return cls(
            machine=d["machine"],
            benchmark=d["benchmark"],
            params=tuple((str(k), str(v)) for k, v in d.get("params", ())),
            unit=d["unit"],
            value=d.get("value"),
            samples=tuple(float(x) for x in d.get("samples", ())),
            ci_99=(float(ci[0]), float(ci[1])) if ci else None,
            error=d.get("error"),
            skipped=bool(d.get("skipped", False)),
            commit=d.get("commit", ""),
            source=d.get("source", "asv"),
        )


@dataclass(frozen=True)
class Fingerprint:
    """The platform a run was measured on (written by ``vlmpath run`` next to results)."""

    backend: str | None = None
    device_name: str | None = None
    arch: str | None = None
    torch: str | None = None
    cuda: str | None = None
    hip: str | None = None
    driver: str | None = None
    transformers: str | None = None
    python: str | None = None
    cpu: str | None = None
    machine: str | None = None
    vlmpath: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fingerprint:
        # Unknown keys are ignored: newer writers may record more than we compare.
        return cls(**{k: (None if d.get(k) is None else str(d[k])) for k in FINGERPRINT_KEYS})

    def toolchain_diff(self, other: Fingerprint) -> tuple[tuple[str, str | None, str | None], ...]:
        """(key, self value, other value) for each toolchain key that differs."""
        return tuple(
            (k, getattr(self, k), getattr(other, k))
            for k in TOOLCHAIN_KEYS
            if getattr(self, k) != getattr(other, k)
        )


@dataclass(frozen=True)
class MachineRun:
    """All metrics of one commit on one machine, with what was missing from the run."""

    machine: str
    commit: str
    metrics: tuple[Metric, ...]
    fingerprint: Fingerprint | None = None
    missing: tuple[str, ...] = ()  # benchmarks asv knows about but this run lacks
    notes: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.missing) or any(not m.ok for m in self.metrics)

    @property
    def backend(self) -> str:
        """cuda | rocm | cpu: from the fingerprint, else from the machine-name prefix."""
        if self.fingerprint is not None and self.fingerprint.backend:
            return self.fingerprint.backend
        return backend_from_name(self.machine)


@dataclass(frozen=True)
class RunResults:
    """One commit's results over every machine that has them."""

    commit: str
    machines: tuple[MachineRun, ...]
    source: str = "asv"
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION

    def machine(self, name: str) -> MachineRun | None:
        return next((m for m in self.machines if m.machine == name), None)

    @property
    def machine_names(self) -> tuple[str, ...]:
        return tuple(m.machine for m in self.machines)

    def metrics(self) -> Iterator[Metric]:
        for m in self.machines:
            yield from m.metrics

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunResults:
        if d.get("schema_version") != SCHEMA_VERSION:
            raise VlmpathError(
                f"run results schema_version {d.get('schema_version')!r} is not "
                f"{SCHEMA_VERSION}: regenerate the file with this vlmpath version"
            )
        machines = tuple(
            MachineRun(
                machine=m["machine"],
                commit=m["commit"],
                metrics=tuple(Metric.from_dict(x) for x in m["metrics"]),
                fingerprint=Fingerprint.from_dict(m["fingerprint"]) if m.get("fingerprint") else None,
                missing=tuple(m.get("missing", ())),
                notes=tuple(m.get("notes", ())),
            )
            for m in d["machines"]
        )
        return cls(
            commit=d["commit"], machines=machines, source=d.get("source", "asv"),
            notes=tuple(d.get("notes", ())),
        )


def backend_from_name(machine: str) -> str:
    for prefix in ("cuda", "rocm"):
        if machine.lower().startswith(prefix + "-"):
            return prefix
    return "cpu"


def merge_runs(a: RunResults, b: RunResults) -> RunResults:
    """One RunResults from two sources (asv + pytest-benchmark) of the same commit."""
    by_name: dict[str, MachineRun] = {m.machine: m for m in a.machines}
    for m in b.machines:
        old = by_name.get(m.machine)
        if old is None:
            by_name[m.machine] = m
        else:
            by_name[m.machine] = replace(
                old,
                metrics=old.metrics + m.metrics,
                fingerprint=old.fingerprint or m.fingerprint,
                missing=old.missing + m.missing,
                notes=old.notes + m.notes,
            )
    return RunResults(
        commit=a.commit or b.commit,
        machines=tuple(by_name[k] for k in sorted(by_name)),
        source=f"{a.source}+{b.source}",
        notes=a.notes + b.notes,
    )


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


def _unit_from_name(name: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    if leaf.startswith("time_"):
        return "seconds"
    if leaf.startswith(("peakmem_", "mem_")):
        return "bytes"
    return "unknown"


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:
        raise VlmpathError(f"corrupted results file {path}: {exc}; delete it or re-run") from None


def _read_benchmarks_json(results_dir: Path) -> dict[str, dict[str, Any]]:
    path = results_dir / "benchmarks.json"
    if not path.is_file():
        return {}
    data = _read_json(path)
    if not isinstance(data, dict):
        raise VlmpathError(f"corrupted results file {path}: not a JSON object; delete it or re-run")
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _machine_dirs(results_dir: Path) -> list[Path]:
    return sorted(p.parent for p in results_dir.glob("*/machine.json"))


def _run_files(machine_dir: Path) -> list[Path]:
    return sorted(
        p for p in machine_dir.glob("*.json")
        if p.name != "machine.json" and not p.name.startswith((FINGERPRINT_PREFIX, FAILURES_PREFIX))
    )


def read_fingerprint(machine_dir: Path, commit: str) -> Fingerprint | None:
    """The fingerprint ``vlmpath run`` wrote for this commit, or None if there is none."""
    path = Path(machine_dir) / f"{FINGERPRINT_PREFIX}{commit[:8]}.json"
    if not path.is_file():
        return None
    data = _read_json(path)
    if not isinstance(data, dict):
        raise VlmpathError(f"corrupted fingerprint file {path}: not a JSON object; delete it or re-run")
    return Fingerprint.from_dict(data)


@dataclass(frozen=True)
class Failure:
    """Why one benchmark case failed (one entry of a ``vlmpath-failures-<sha8>.json``)."""

    benchmark: str
    params: tuple[tuple[str, str], ...]  # (name, value as asv's results show it)
    error: str

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """Matches ``(Metric.benchmark, parameter values)``; names may differ (``param1``)."""
        return (self.benchmark, tuple(v for _, v in self.params))

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "params": dict(self.params), "error": self.error}

    @classmethod
    def from_dict(cls, d: Any) -> Failure:
        """From a failures-file entry (values as the benchmark saw them: 64, 'default')."""
        if not (isinstance(d, Mapping) and isinstance(d.get("benchmark"), str) and isinstance(d.get("error"), str)
                and isinstance(d.get("params", {}), Mapping)):
            raise TypeError(f"expected {{benchmark: str, params: object, error: str}}, got {str(d)[:80]!r}")
        params = tuple((str(k), str(v)) for k, v in d.get("params", {}).items())
        return cls(d["benchmark"], params, d["error"])


def failures_path(machine_dir: str | os.PathLike[str], commit: str) -> Path:
    return Path(machine_dir) / f"{FAILURES_PREFIX}{commit[:8]}.json"


def read_failures(path: str | os.PathLike[str]) -> tuple[Failure, ...]:
    """A failures file written by ``vlmpath run``: () if there is none; ``VlmpathError``
    naming the file if it cannot be read."""
    p = Path(path)
    if not p.is_file():
        return ()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise TypeError(f"not a JSON list but {type(data).__name__}")
        return tuple(Failure.from_dict(d) for d in data)
    except (OSError, ValueError, TypeError) as exc:
        raise VlmpathError(f"corrupted failures file {p}: {exc}; delete it or re-run") from None


def _attach_failures(metrics: tuple[Metric, ...], machine_dir: Path, commit: str) -> tuple[tuple[Metric, ...], str | None]:
    """Metrics with each failed case's own message (see the module docstring), and a note
    when the failures file is unreadable."""
    if not any(m.error == NO_RESULT_ERROR for m in metrics):
        return metrics, None  # nothing to explain: the file is not even read
    try:
        failures = read_failures(failures_path(machine_dir, commit))
    except VlmpathError as exc:
        return metrics, f"failure messages not shown: {exc}"
    why = {f.key: f.error for f in failures}
    return tuple(
        replace(m, error=why.get((m.benchmark, tuple(v for _, v in m.params)), m.error))
        if m.error == NO_RESULT_ERROR else m
        for m in metrics
    ), None


def existing_commits(results_dir: str | os.PathLike[str]) -> dict[str, tuple[str, ...]]:
    """sha8 -> machines that have results for it (from file names only, cheap)."""
    found: dict[str, set[str]] = {}
    for mdir in _machine_dirs(Path(results_dir)):
        for f in _run_files(mdir):
            found.setdefault(f.name.split("-", 1)[0], set()).add(mdir.name)
    return {k: tuple(sorted(v)) for k, v in sorted(found.items())}


def _load_asv_file(path: Path):
    from asv import util as asv_util
    from asv.results import Results

    try:
        return Results.load(str(path))
    except asv_util.UserError as exc:
        raise VlmpathError(f"corrupted results file {path}: {exc}; delete it or re-run") from None
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        raise VlmpathError(
            f"corrupted results file {path}: unexpected layout ({type(exc).__name__}: {exc}); "
            "delete it or re-run"
        ) from None


def _metrics_from_asv(res, machine: str, bench_meta: Mapping[str, Mapping[str, Any]]) -> list[Metric]:
    out: list[Metric] = []
    commit = res.commit_hash or ""
    for name in sorted(res.get_all_result_keys()):
        meta = bench_meta.get(name, {})
        unit = str(meta.get("unit") or _unit_from_name(name))
        params = res.get_result_params(name) or []
        names = list(meta.get("param_names") or [])
        if len(names) != len(params):
            # benchmarks.json describes the latest discovery; a base run may predate it.
            names = [f"param{i + 1}" for i in range(len(params))]
        values = res.get_result_value(name, params)
        stats = res.get_result_stats(name, params)
        samples = res.get_result_samples(name, params)
        for j, combo in enumerate(itertools.product(*params)):
            v = values[j]
            st = stats[j] if stats else None
            sm = samples[j] if samples else None
            skipped = isinstance(v, float) and math.isnan(v)
            error = NO_RESULT_ERROR if v is None else None
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
                value=None if (v is None or skipped) else float(v),
                samples=tuple(float(x) for x in (sm or ()) if x is not None and not math.isnan(x)),
                ci_99=ci,
                error=error,
                skipped=skipped,
                commit=commit,
                source="asv",
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
    mdirs = _machine_dirs(root)
    if not mdirs:
        raise VlmpathError(f"results directory {root} has no <machine>/machine.json: is it an asv results dir?")
    bench_meta = _read_benchmarks_json(root)

    machines: list[MachineRun] = []
    full_shas: set[str] = set()
    notes: list[str] = []
    for mdir in mdirs:
        files = [f for f in _run_files(mdir) if _prefix_match(f.name.split("-", 1)[0], commit)]
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
        for _, res in sorted(loaded, key=lambda fr: max((v for v in fr[1].started_at.values() if v), default=0)):
            for m in _metrics_from_asv(res, mdir.name, bench_meta):
                merged[(m.benchmark, m.params)] = m
        run_sha = loaded[0][1].commit_hash or commit
        metrics, failures_note = _attach_failures(tuple(merged[k] for k in sorted(merged)), mdir, run_sha)
        present = {m.benchmark for m in metrics}
        missing = tuple(sorted(set(bench_meta) - present))
        mnotes = []
        if len(loaded) > 1:
            mnotes.append(f"{len(loaded)} environment files merged: {', '.join(f.name for f, _ in loaded)}")
        if failures_note:
            mnotes.append(failures_note)
        machines.append(MachineRun(
            machine=mdir.name,
            commit=run_sha,
            metrics=metrics,
            fingerprint=read_fingerprint(mdir, run_sha),
            missing=missing,
            notes=tuple(mnotes),
        ))
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


def _prefix_match(sha8: str, commit: str) -> bool:
    n = min(len(sha8), len(commit))
    return sha8[:n].lower() == commit[:n]


# --- pytest-benchmark ------------------------------------------------------------------------


def load_pytest_benchmark(path: str | os.PathLike[str]) -> RunResults:
    """Read a ``pytest --benchmark-json`` file: a time metric per test plus known extra_info."""
    p = Path(path)
    if not p.is_file():
        raise VlmpathError(f"pytest-benchmark JSON {p} does not exist: run pytest with --benchmark-json={p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise VlmpathError(f"corrupted pytest-benchmark JSON {p}: {exc}; delete it or re-run") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise VlmpathError(f"{p} is not pytest-benchmark JSON (no 'benchmarks' list): pass a --benchmark-json file")
    info = data.get("machine_info") or {}
    machine = str(info.get("vlmpath_machine") or info.get("node") or "unknown")
    commit = str((data.get("commit_info") or {}).get("id") or "")
    fp = info.get("vlmpath_fingerprint")
    metrics: list[Metric] = []
    for b in data["benchmarks"]:
        try:
            name = str(b.get("fullname") or b["name"]).split("[", 1)[0]
            raw_params = b.get("params") or {}
            params = tuple((str(k), str(v)) for k, v in raw_params.items())
            stats = b.get("stats") or {}
            data_pts = stats.get("data") or ()
            value = stats.get("median")
        except (AttributeError, KeyError, TypeError) as exc:
            raise VlmpathError(f"malformed benchmark entry in {p}: {exc!r}; re-run pytest-benchmark") from None
        common = dict(machine=machine, params=params, commit=commit, source="pytest-benchmark")
        metrics.append(Metric(
            benchmark=name, unit="seconds",
            value=None if value is None else float(value),
            samples=tuple(float(x) for x in data_pts),
            error=None if value is not None else "no timing recorded",
            **common,
        ))
        for key, val in sorted((b.get("extra_info") or {}).items()):
            unit = EXTRA_INFO_UNITS.get(key)
            if unit is None or isinstance(val, bool) or not isinstance(val, (int, float)):
                continue
            metrics.append(Metric(benchmark=f"{name}.{key}", unit=unit, value=float(val), **common))
    run = MachineRun(
        machine=machine, commit=commit,
        metrics=tuple(sorted(metrics, key=lambda m: (m.benchmark, m.params))),
        fingerprint=Fingerprint.from_dict(fp) if isinstance(fp, dict) else None,
    )
    return RunResults(commit=commit, machines=(run,), source="pytest-benchmark")


# --- writing ---------------------------------------------------------------------------------


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` so that readers see the old file or the new one, never half of it."""
    atomic.write_text(path, text)

