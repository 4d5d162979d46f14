"""How does a sweep's store become one asv dashboard with the releases on its time axis?

asv keys a result by a commit of its repository and draws it at the commit's ``date``
(milliseconds since the epoch, in the result file) and at its place in
``git rev-list --all --date-order``. A release is not a commit of ours, so
``write_asv(store)`` builds the store's own *release history*: ``<store>/history``, a
git repository with one parentless commit per release, dated (author and committer) at
the release's upload, tagged ``<engine>-<version>`` (asv draws tags on its graphs) and
content-addressed (same release, same date: same sha, so rewriting the history for a
resumed sweep keeps every result file's commit). Then per engine one machine
``sweep-<engine>`` with one result file per release, the benchmark names
``bench_engine.Engine.track_<metric>(preset)`` of ``vlmpath run --engine`` (so the
numbers read as the engine benchmarks do), and ``benchmarks.json`` describing them.

A failed release is a result whose every value is NaN (asv's failed point) plus
``vlmpath-failures-<sha8>.json`` naming the reason. ``publish`` writes the asv config for
the store and runs ``asv publish`` into ``<store>/html``.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

from vlmpath.compare import results_store
from vlmpath.core import atomic
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import Failure, failures_path
from vlmpath.core.git import git
from vlmpath.core.metrics import routine_metrics
from vlmpath.suite.sweep import SweepState, point_records

ENV_NAME = "sweep"
BENCH_CLASS = "bench_engine.Engine"
COLUMNS = ["result", "params", "version", "started_at", "duration"]
_GIT_ID = {"GIT_AUTHOR_NAME": "vlmpath engine sweep", "GIT_AUTHOR_EMAIL": "sweep@example.invalid",
           "GIT_COMMITTER_NAME": "vlmpath engine sweep", "GIT_COMMITTER_EMAIL": "sweep@example.invalid"}


def machine_name(engine: str) -> str:
    return f"sweep-{engine}"


def _git(repo: Path, args: list[str], env: dict | None = None, stdin: str | None = None) -> str:
    return git(repo, *args, stdin=stdin, env=env).stdout.strip()


def release_history(store: Path, states: list[SweepState]) -> dict[tuple[str, str], str]:
    """``{(engine, version): sha}`` of the store's release history (see the module docstring)."""
    repo = Path(store) / "history"
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, ["init", "-q", "-b", "main"])
    shas: dict[tuple[str, str], str] = {}
    newest: tuple[str, str] | None = None
    for st in states:
        for p in st.ordered():
            blob = _git(repo, ["hash-object", "-w", "--stdin"], stdin=f"{st.engine}=={p.version}\n")
            tree = _git(repo, ["mktree"], stdin=f"100644 blob {blob}\tRELEASE\n")
            stamp = f"{int(p.when.timestamp())} +0000"
            sha = _git(repo, ["commit-tree", tree, "-m", f"{st.engine} {p.version}"],
                       env={**_GIT_ID, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
            _git(repo, ["tag", "-f", f"{st.engine}-{p.version}", sha])
            shas[(st.engine, p.version)] = sha
            if newest is None or p.date > newest[0]:
                newest = (p.date, sha)
    if newest:  # asv needs its branch; every release is reached through its tag
        _git(repo, ["update-ref", "refs/heads/main", newest[1]])
    return shas


def _version_of(name: str) -> str:
    return hashlib.sha256(f"vlmpath engine sweep {name}".encode()).hexdigest()


def _value(rec, metric: str) -> float | None:
    v = None if rec is None else getattr(rec, metric, None)
    if rec is not None and rec.error and metric not in ("accuracy",):
        return None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def write_asv(store: Path, states: list[SweepState]) -> Path:
    """The store's asv results directory (see the module docstring); returns it."""
    store = Path(store)
    results = store / "results"
    shas = release_history(store, states)
    metrics = routine_metrics("engine")
    workloads = list(dict.fromkeys(w for st in states for w in st.workloads))
    params = [[repr(w) for w in workloads]]
    bench = {"version": 2}
    for m in metrics:
        name = f"{BENCH_CLASS}.{m.track_method}"
        bench[name] = {"code": f"vlmpath engine sweep: {m.description}", "name": name, "param_names": ["preset"],
                       "params": params, "timeout": 900, "type": "track", "unit": m.unit,
                       "version": _version_of(name)}
    results_store.write_benchmarks(results, bench)
    for st in states:
        machine = machine_name(st.engine)
        atomic.write_text(results / machine / results_store.MACHINE_JSON,
                          json.dumps({"machine": machine, "version": 1}, indent=2) + "\n")
        for p in st.ordered():
            sha = shas[(st.engine, p.version)]
            by_workload = {r.workload: r for r in point_records(store, st.engine, p)}
            out = {}
            for m in metrics:
                name = f"{BENCH_CLASS}.{m.track_method}"
                values = [_value(by_workload.get(w), m.name) for w in workloads]
                out[name] = [values, params, _version_of(name), p.when.timestamp() * 1000, p.measure_seconds]
            data = {"commit_hash": sha, "env_name": ENV_NAME, "date": int(p.when.timestamp() * 1000),
                    "params": {"machine": machine, "python": ENV_NAME, "engine": st.engine},
                    "python": ENV_NAME, "requirements": {st.engine: p.version}, "env_vars": {},
                    "result_columns": COLUMNS, "results": out, "durations": {}, "version": 2}
            atomic.write_text(results_store.run_file_path(results, machine, sha, ENV_NAME), json.dumps(data) + "\n")
            fail = failures_path(results / machine, sha)
            if p.state == "failed":  # the failure-file format of ``vlmpath run``: one entry per case
                entries = [Failure(b, (("preset", repr(w)),), f"{st.engine}=={p.version}: {p.reason}").to_dict()
                           for b in out for w in workloads]
                atomic.write_text(fail, json.dumps(entries, indent=2, sort_keys=True) + "\n")
            else:
                fail.unlink(missing_ok=True)
    return results


def publish(store: Path) -> Path:
    """``asv publish`` of the store's results into ``<store>/html``; returns the site's index."""
    store = Path(store).resolve()
    conf = {"version": 1, "project": "vlmpath engine sweep", "project_url": "https://pypi.org/",
            "repo": str(store / "history"), "branches": ["main"], "dvcs": "git",
            "environment_type": "existing", "results_dir": str(store / "results"),
            "html_dir": str(store / "html"), "show_commit_url": "https://pypi.org/project/"}
    path = atomic.write_text(store / "asv.conf.json", json.dumps(conf, indent=2) + "\n")
    proc = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(path)], cwd=store,
                          capture_output=True, text=True)
    if proc.returncode:
        raise VlmpathError(f"engine sweep: asv publish failed ({proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    try:
        from vlmpath.render.dashboard import localize_assets

        localize_assets(store / "html")
    except (VlmpathError, OSError):  # the dashboard still works online
        pass
    return store / "html" / "index.html"
