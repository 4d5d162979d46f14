"""What does the run file beside asv's results: the platform fingerprint and why cases failed?

Where these files live in a results directory is ``compare.results_store``'s; this writes them.

``<results>/<machine>/vlmpath-fingerprint-<sha8>.json``: the benchmark interpreter's
``Platform.to_dict()`` (a toolchain change makes timings incomparable) plus ``gpu_state``
(clocks, power limit, modes: a changed setting is flagged like a toolchain change).
``<results>/<machine>/vlmpath-failures-<sha8>.json``: the failure lines the benchmarks
appended (format: ``vlmpath.core.failures``), deduplicated; entries of an earlier run of
the same commit survive for cases this run did not select. Both written atomically.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from vlmpath.runner.discovery import Discovered
from vlmpath.compare.asv_results import param_display
from vlmpath.compare.results_store import run_info_path
from vlmpath.core.atomic import write_text
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE
from vlmpath.core.failures import (
    collect_failures,
    failures_path,
    merge_failures,
    read_failures,
)


def write_json_atomic(path: Path, data: object) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_failures(results_dir: Path, machine: str, commit: str, lines_path: Path,
                   chosen: Sequence[tuple[Discovered, tuple[str, ...]]], out: TextIO) -> Path:
    """File this run's failure lines as ``<results>/<machine>/vlmpath-failures-<sha8>.json``."""

    path = failures_path(Path(results_dir) / machine, commit)
    new, bad = collect_failures(lines_path)
    if bad:
        out.write(f"vlmpath run: warning: {bad} unreadable line(s) in the benchmarks' failure log skipped\n")
    try:
        previous = read_failures(path)
    except VlmpathError as exc:
        out.write(f"vlmpath run: warning: {exc}; replacing it\n")
        previous = ()
    rerun = {(b.name, tuple(param_display(p) for p in combo)) for b, combo in chosen}
    write_json_atomic(path, merge_failures(previous, new, rerun))
    return path



def fingerprint(python: str | None, env: Mapping[str, str], machine: str) -> dict:
    """Platform.to_dict() of the benchmark interpreter (a subprocess if it is not us)."""
    if python is None or os.path.realpath(python) == os.path.realpath(sys.executable):
        from vlmpath.measure.platform import probe

        fp = probe(env={**env, "VLMPATH_MACHINE": machine}).to_dict()
    else:
        code = "import json; from vlmpath.measure.platform import probe; print(json.dumps(probe().to_dict()))"
        penv = dict(env)
        if env.get("ASV_PYTHONPATH"):
            penv["PYTHONPATH"] = env["ASV_PYTHONPATH"]
        proc = subprocess.run([python, "-c", code], env=penv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise VlmpathError(f"--python {python} cannot import vlmpath to probe the platform: "
                               f"{proc.stderr.strip().splitlines()[-1:] or proc.stdout}")
        fp = json.loads(proc.stdout.strip().splitlines()[-1])
    fp["machine"] = machine
    fp["gpu_state"] = gpu_state(fp.get("backend"))
    return fp


def gpu_state(backend: str | None) -> dict | None:
    """The GPU's clocks, power limit and modes from the vendor tool (``vlmpath.measure.gpu_state``),
    or None on CPU or when no tool answers. Read here, in the runner, because the tools see
    the whole machine (the benchmark interpreter need not be this one)."""
    from vlmpath.core.backends import is_gpu
    from vlmpath.measure.gpu_state import query_gpu_state

    if not is_gpu(backend):
        return None

    state = query_gpu_state()
    return None if state is None else state.to_dict()


# How the results of one commit were measured (quick, scale, selection, trusted), read by the
# PR flow's base reuse (pr/base_reuse.py) before it lets stored results stand in for a base run;
# where the file lives is the results store's (compare.results_store.run_info_path).
@dataclass(frozen=True)
class RunInfo:
    """How one commit's results were measured. ``shard``: which shard of the suite this run
    was and the units it owned (``runner.shard_costs``); ``partial``: why the last run of it
    did not finish (interrupted): such results are nobody's baseline (``pr.base_reuse``)
    until a complete run replaces the file; ``helpers``: each benchmark module's helper
    digest (``core.helper_digest``), so that ``ci alert`` judges a case only against
    commits that measured it through the same helpers."""

    quick: bool
    scale: str | None
    bench: str | None
    trusted: bool
    shard: dict | None = None
    partial: str | None = None
    helpers: Mapping[str, str] | None = None


def write_run_info(results_dir: Path, machine: str, commit: str, info: RunInfo) -> Path:
    """Record how ``commit``'s results on ``machine`` were measured (``RunInfo``), atomically."""
    quick, scale, bench, trusted = info.quick, info.scale, info.bench, info.trusted
    shard, partial, helpers = info.shard, info.partial, info.helpers
    path = run_info_path(results_dir, machine, commit)
    data = {"commit": commit, "quick": bool(quick), "scale": scale or DEFAULT_SCALE,
            "bench": bench, "trusted": bool(trusted) and partial is None, "partial": partial}
    if shard is not None:
        data["shard"] = shard
    if helpers:
        data["helpers"] = dict(helpers)
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def read_run_info(results_dir: Path, machine: str, commit: str) -> dict[str, Any] | None:
    path = run_info_path(results_dir, machine, commit)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):  # deep JSON too
        return None  # absent or unreadable: never trusted
    return data if isinstance(data, dict) else None
