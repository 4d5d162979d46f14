"""How is a ``pytest --benchmark-json`` file read back as typed records?

A time metric per test, plus the ``extra_info`` numbers the mirror suite records
(``EXTRA_INFO_UNITS``: the keys that carry a metric, and each one's unit).
"""

from __future__ import annotations

import os
from pathlib import Path

from vlmpath.compare.records import EXTRA_INFO_UNITS, Fingerprint, MachineRun, Metric, RunResults
from vlmpath.compare.values import checked
from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError

def load_pytest_benchmark(path: str | os.PathLike[str]) -> RunResults:
    """Read a ``pytest --benchmark-json`` file: a time metric per test plus known extra_info."""
    p = Path(path)
    if not p.is_file():
        raise VlmpathError(f"pytest-benchmark JSON {p} does not exist: run pytest with --benchmark-json={p}")
    data = safe_json.load_file(p, "corrupted pytest-benchmark JSON", "delete it or re-run")
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
            value=checked(value, "seconds")[0],
            invalid=checked(value, "seconds")[1],
            samples=tuple(float(x) for x in data_pts if checked(x, "seconds")[0] is not None),
            error=None if value is not None else "no timing recorded",
            **common,
        ))
        for key, val in sorted((b.get("extra_info") or {}).items()):
            unit = EXTRA_INFO_UNITS.get(key)
            if unit is None:
                continue
            metrics.append(Metric(benchmark=f"{name}.{key}", unit=unit, value=checked(val, unit)[0],
                                  invalid=checked(val, unit)[1], **common))
    run = MachineRun(
        machine=machine, commit=commit,
        metrics=tuple(sorted(metrics, key=lambda m: (m.benchmark, m.params))),
        fingerprint=Fingerprint.from_dict(fp) if isinstance(fp, dict) else None,
    )
    return RunResults(commit=commit, machines=(run,), source="pytest-benchmark")
