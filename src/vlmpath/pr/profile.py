"""For each case the PR made slower, where did the time go, on base and on head?

After ``run_pr`` compared the two sides, ``profile_regressions`` re-runs every regressed
routine case (``bench_embed`` / ``bench_encode`` rows, timing/throughput/memory units:
exact counters and accuracy are not explained by a profile) on both sides under
``torch.profiler``, with each side's ``src/`` first on ``PYTHONPATH`` (the same rule as
the benchmarks, ``vlmpath.pr.flow``), by running this package's ``suite/profile.py`` as a
script. Both Chrome traces and operator tables land in ``OUT/profiles/<case>/``
(uploaded with the artifact) and the comment gets the top self-time deltas
(``vlmpath.compare.profile_diff``, ``vlmpath.render.profile_section``).

A side whose profile fails is a note in that case's section, never a failed PR check:
the comparison is what gates.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vlmpath.render.escape import file_name
from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.profile_diff import CaseProfile, diff_ops, read_ops
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.errors import VlmpathError
from vlmpath.core.git import worktree

PROFILES_SUBDIR = "profiles"
#: The CaseProfile records in OUT, read back by ``vlmpath ci merge`` for the merged comment.
PROFILES_FILE = "profiles.json"
#: Benchmark module -> (routine path, the parameter that names the variant).
_ROUTINE_BENCHES = {"bench_embed": ("embed", "pipeline"), "bench_encode": ("encode", "strategy")}


@dataclass(frozen=True)
class ProfileRequest:
    side: str          # "base" | "head"
    source: Path       # worktree of that side's commit
    case: str          # "embed:default/many_small_images"
    trace: Path
    ops: Path
    scale: str
    env: Mapping[str, str]


ProfileRunner = Callable[[ProfileRequest], None]


def regressed_cases(report: ComparisonReport, cfg: Thresholds, limit: int = 3) -> dict[str, tuple[str, list[str]]]:
    """case label -> (machine, regressed benchmark names), first ``limit`` cases."""
    found: dict[str, tuple[str, list[str]]] = {}
    for c in report.by_verdict(Verdict.REGRESSION):
        rule = cfg.unit_rule(c.unit)
        if rule is not None and rule.exact:
            continue
        spec = _ROUTINE_BENCHES.get(c.benchmark.split(".", 1)[0])
        params = dict(c.params)
        if spec is None or spec[1] not in params or "preset" not in params:
            continue
        label = f"{spec[0]}:{params[spec[1]]}/{params['preset']}"
        if label in found or len(found) < limit:
            found.setdefault(label, (c.machine, []))[1].append(c.benchmark)
    return found


def _script() -> Path:
    # This package's profiler script (the tool), run against either side's package.
    return Path(__file__).resolve().parents[1] / "suite" / "profile.py"


def run_profile_subprocess(req: ProfileRequest) -> None:
    """The real runner: ``suite/profile.py`` in a fresh interpreter that imports the side's code."""
    env = dict(req.env)
    env["PYTHONPATH"] = os.pathsep.join([str(req.source / "src"), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    # runpy.run_path: the script's own directory must not shadow stdlib names (profile).
    code = ("import runpy, sys; sys.argv = ['profile.py'] + sys.argv[1:]; "
            f"runpy.run_path({str(_script())!r}, run_name='__main__')")
    job = json.dumps({"case": req.case, "trace": str(req.trace), "ops": str(req.ops), "scale": req.scale})
    proc = subprocess.run([sys.executable, "-c", code, job],
                          env=env, capture_output=True, text=True, check=False, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise VlmpathError(f"profiling {req.case} on {req.side} failed: {tail[:300]}")


def _slug(label: str) -> str:
    # A case label names a folder: ASCII, bounded, never ".." (render.escape.file_name).
    return file_name(re.sub(r"[^A-Za-z0-9._-]+", "_", label))


def profile_regressions(root: Path, report: ComparisonReport, out: Path, *,
                        cfg: Thresholds, scale: str | None = None, env: Mapping[str, str] | None = None,
                        runner: ProfileRunner | None = None, top: int = 8) -> list[CaseProfile]:
    """Profile every regressed routine case on both sides, the report's base and head
    commits (see the module docstring)."""
    cases = regressed_cases(report, cfg)
    if not cases:
        return []
    runner = runner or run_profile_subprocess
    env = dict(os.environ if env is None else env)
    results: list[CaseProfile] = []
    tmp = Path(tempfile.mkdtemp(prefix="vlmpath-profile-"))
    try:
        job = _Job(root, report.base_commit, report.head_commit, tmp, out, scale, env, runner, top)
        _profile_all(job, cases, results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


@dataclass(frozen=True)
class _Job:
    """One ``profile_regressions`` call: where, which commits, how."""

    root: Path
    base_sha: str
    head_sha: str
    tmp: Path
    out: Path
    scale: str | None
    env: Mapping[str, str]
    runner: ProfileRunner
    top: int


def _profile_all(job: _Job, cases, results: list[CaseProfile]) -> None:
    out, scale, env, runner, top = job.out, job.scale, job.env, job.runner, job.top
    with worktree(job.root, job.head_sha, job.tmp / "head") as head_wt, \
            worktree(job.root, job.base_sha, job.tmp / "base") as base_wt:
        for label, (machine, benches) in cases.items():
            folder = out / PROFILES_SUBDIR / _slug(label)
            folder.mkdir(parents=True, exist_ok=True)
            ops, traces, notes = {}, {}, []
            for side, src in (("base", base_wt), ("head", head_wt)):
                req = ProfileRequest(side, src, label, folder / f"{side}.trace.json", folder / f"{side}.ops.json",
                                     scale or "tiny", env)
                try:
                    runner(req)
                    ops[side] = read_ops(req.ops)
                    traces[side] = req.trace.relative_to(out).as_posix()
                except VlmpathError as exc:
                    notes.append(str(exc))
            deltas = diff_ops(ops["base"], ops["head"], top) if len(ops) == 2 else ()
            results.append(CaseProfile(machine, label, tuple(dict.fromkeys(benches)), deltas,
                                       traces.get("base"), traces.get("head"), "; ".join(notes) or None))
