"""How is one side (base or head) of a PR comparison benchmarked, and its results found?

``SuiteRequest`` is one run of the suite as the PR flow asks a runner for it;
``run_suite_subprocess`` is the real runner (``vlmpath run`` of this package with base's
suite importing the commit's code through ``ASV_PYTHONPATH``, see ``vlmpath.pr.flow``);
``check_import`` proves a benchmark process would import the commit under test;
``base_reuse_problem`` says whether stored base results are valid for
what head ran (``vlmpath.pr.base_reuse``: trusted, same options, toolchain, benchmark
versions and cases). A side's results are found, and copied into the artifact, through the
results store (``compare.results_store``: ``commit_files``, ``copy_comparison``).

Why a process per side rather than a call of ``runner.run``: each side runs with its own
environment (``ASV_PYTHONPATH``, results directory, machine) and working directory, its
whole output (ours and asv's) is teed into the artifact's log so a side that wrote no
results can be explained, and nothing one side imported or set survives into the other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import vlmpath
from vlmpath.pr.base_reuse import Stored, reuse_problem
from vlmpath.runner.run_files import RunInfo, write_run_info
from vlmpath.core.helper_digest import helper_digests
from vlmpath.compare.results_store import commit_files
from vlmpath.core.errors import VlmpathError
from vlmpath.core.interrupt import end_group


def log(msg: str) -> None:
    print(f"vlmpath ci: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SuiteRequest:
    """One run of the benchmark suite, as ``run_pr`` asks a runner for it."""

    commit: str  # full sha, recorded with --set-commit-hash
    source: Path  # worktree of that commit; its src/ is what the benchmarks import
    bench_root: Path  # checkout whose asv.conf.json and benchmarks/ run (base's: the yardstick)
    results_dir: Path
    machine: str
    bench: str | None
    quick: bool
    env: Mapping[str, str]  # full environment for the runner process
    scale: str | None = None  # None: the runner's default (tiny)
    reports_dir: Path | None = None  # where the runner may leave its own summary


RunSuite = Callable[[SuiteRequest], None]


def _own_package_root() -> Path:
    # The directory that holds this vlmpath package: the runner process must import the
    # same vlmpath as this flow (the tool), whatever commit is under test.
    return Path(vlmpath.__file__).resolve().parents[1]


def _prepend(path: str, existing: str | None) -> str:
    rest = [p for p in (existing or "").split(os.pathsep) if p and p != path]
    return os.pathsep.join([path, *rest])


def side_env(source: Path, base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for running the suite against the commit checked out at ``source``."""
    env = dict(os.environ if base_env is None else base_env)
    env["ASV_PYTHONPATH"] = _prepend(str(source / "src"), env.get("ASV_PYTHONPATH"))
    env["PYTHONPATH"] = _prepend(str(_own_package_root()), env.get("PYTHONPATH"))
    return env


def check_import(source: Path, env: Mapping[str, str]) -> None:
    """Prove that a benchmark process (PYTHONPATH = ASV_PYTHONPATH) imports ``source``'s vlmpath."""
    probe_env = dict(env)
    probe_env["PYTHONPATH"] = probe_env.get("ASV_PYTHONPATH", "")
    probe_env.pop("ASV_PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-c", "import vlmpath; print(vlmpath.__file__)"],
                       capture_output=True, text=True, env=probe_env, cwd=tempfile.gettempdir())
    want = (source / "src" / "vlmpath").resolve()
    got = Path(r.stdout.strip()).resolve().parent if r.returncode == 0 and r.stdout.strip() else None
    if got != want:
        detail = f"it imports {got}" if got else f"import failed: {r.stderr.strip()[-300:]}"
        raise VlmpathError(
            f"the benchmarks would not import the commit under test from {want} ({detail}): "
            "is src/vlmpath missing in that commit, or does a .pth/meta-path hook shadow PYTHONPATH?"
        )


def run_suite_subprocess(req: SuiteRequest) -> None:
    """The real runner: ``vlmpath run`` of this package, with base's suite (``--repo``)
    importing the commit's code (``--package-src``), filed under ``--set-commit-hash``.
    No dashboard is published per side (``--no-publish``); the flow draws its charts once."""
    cmd = [sys.executable, "-m", "vlmpath.cli", "run", "--repo", str(req.bench_root),
           "--package-src", str(req.source / "src"), "--set-commit-hash", req.commit,
           "--machine", req.machine, "--results-dir", str(req.results_dir), "--no-publish"]
    if req.reports_dir is not None:
        cmd += ["--reports-dir", str(req.reports_dir)]
    if req.scale:
        cmd += ["--scale", req.scale]
    if req.quick:
        cmd.append("--quick")
    if req.bench:
        cmd += ["--bench", req.bench]
    log(f"running the suite for {req.commit[:8]} (code from {req.source}): {' '.join(cmd[1:])}")
    log_file = run_log_path(req)
    # Its own session: a terminal's Ctrl-C reaches this flow only, which ends the run's
    # process group (core.interrupt) and, through the subreaper, whatever asv left.
    if log_file is None:
        r = subprocess.Popen(cmd, cwd=req.bench_root, env=dict(req.env), start_new_session=True)
        try:
            r.wait()
        finally:
            end_group(r)
    else:
        # The run's (and asv's) output goes to the job log and into the output folder, so
        # that a side that wrote no results can be explained after the fact.
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("w", encoding="utf-8", errors="replace") as fh:
            r = subprocess.Popen(cmd, cwd=req.bench_root, env=dict(req.env), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
            try:
                for line in r.stdout:  # type: ignore[union-attr]
                    sys.stdout.write(line)
                    fh.write(line)
                r.wait()
            finally:
                end_group(r)
    if r.returncode != 0:
        # A run whose benchmarks failed still files results (the failures are data):
        # run_pr checks that a new results file was written and compares it.
        log(f"vlmpath run for {req.commit[:8]} exited {r.returncode}")


def run_log_path(req: SuiteRequest) -> Path | None:
    """Where one side's run log is kept: ``<out>/runs/<sha8>/run.log``."""
    return None if req.reports_dir is None else Path(req.reports_dir) / "run.log"


def _log_tail(req: SuiteRequest) -> str:
    log_file = run_log_path(req)
    try:
        lines = ([ln.strip() for ln in log_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
                 if log_file else [])
    except OSError:
        lines = []
    where = f"the run's log is kept in {log_file}" if log_file and log_file.exists() else "see the run's log above"
    return f"{where}; its last line: {lines[-1][:200]!r}" if lines else where


def _stamp(paths: Sequence[Path]) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in paths if p.exists()}


def run_side(run_suite: RunSuite, req: SuiteRequest) -> None:
    before = _stamp(commit_files(req.results_dir, req.machine, req.commit))
    check_import(req.source, req.env)
    run_suite(req)
    after = _stamp(commit_files(req.results_dir, req.machine, req.commit))
    fresh = [p for p, st in after.items() if before.get(p) != st]
    if not fresh:
        raise VlmpathError(
            f"the benchmark run for commit {req.commit[:8]} on machine {req.machine} wrote no "
            f"(new) results under {req.results_dir / req.machine}: {_log_tail(req)}; "
            "check --bench matches at least one benchmark"
        )
    # Whatever the runner wrote: a side the PR flow measured is never a trusted baseline.
    write_run_info(req.results_dir, req.machine, req.commit, RunInfo(quick=req.quick, scale=req.scale,
                   bench=req.bench, trusted=False, helpers=helper_digests(req.bench_root / "benchmarks")))


def base_reuse_problem(store: Path, results_dir: Path, machine: str, base_sha: str, head_sha: str, *,
                       bench: str | None = None, quick: bool = False, scale: str | None = None) -> str | None:
    """Why base results stored in ``store`` may not stand in for measuring the base (None: they may).
    Head's results are read from ``results_dir``."""
    return reuse_problem(Stored(store, base_sha, tuple(commit_files(store, machine, base_sha))),
                         Stored(results_dir, head_sha, tuple(commit_files(results_dir, machine, head_sha))),
                         machine, bench=bench, quick=quick, scale=scale)
