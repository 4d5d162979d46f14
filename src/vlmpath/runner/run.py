"""How does one benchmark run go, from a clean work tree to asv results, dashboard and summary?

``run(RunOptions(...))`` is what ``vlmpath run`` does:

1. probe the platform (machine name: ``--machine``, else ``VLMPATH_MACHINE``, else
   ``probe().machine``) and refuse a dirty work tree unless ``allow_dirty`` (results would
   be filed under a commit that is not what ran);
2. write a temporary copy of ``asv.conf.json`` with absolute paths (asv has no flags for
   the results and html directories, and resolves relative paths against the *current*
   directory, not the config's);
3. select benchmarks: ``--bench`` is checked against asv's own discovery of the suite
   (``asv_runner.discovery``, same names and parameter strings as ``asv run -b``) so that a
   regex matching nothing fails up front, naming some benchmarks;
4. ``asv machine --yes`` then ``asv run -E existing:<python> --set-commit-hash <sha>
   --machine <name> --record-samples --show-stderr [--quick] [-b REGEX]``, streaming asv's
   lines (its ``[NN%]`` prefix is the progress);
5. write the platform fingerprint beside the results as
   ``<results>/<machine>/vlmpath-fingerprint-<sha8>.json`` and why benchmarks failed as
   ``<results>/<machine>/vlmpath-failures-<sha8>.json`` (see below), ``asv publish`` the
   dashboard, and write the summary (``vlmpath.render.summary``) under ``reports_dir``, from
   results JSON; then the charts and the landing page in front of the dashboard
   (``publish_pages``: ``<html_dir>/vlmpath/index.html``, linked from asv's index), read
   from the same results.

Why a benchmark failed: asv records a raising benchmark as ``null`` and keeps its message
only in the log. The suite (``benchmarks/_common.report_failures``) appends one JSON line
per failure to the file named by ``VLMPATH_FAILURES_FILE``; the run points it at a temp
file (asv hands its whole environment to every benchmark process, under ``spawn`` and
``forkserver`` alike) and afterwards files the lines, deduplicated, as a JSON list (empty
when nothing failed) beside the results. Entries of an earlier run of the same commit
survive for cases this run did not select (asv keeps those cases' results too).

Which ``vlmpath`` do the benchmarks import? asv runs the CURRENT benchmark files in the
existing interpreter (``--python``, default this one), one fresh process per benchmark.
asv's benchmark runner deletes ``PYTHONPATH`` from its own ``sys.path`` and environment
(asv/benchmark.py) unless ``ASV_PYTHONPATH`` is set, which it puts first on ``sys.path``
instead. So ``package_src`` and any ``PYTHONPATH`` of the caller are passed as
``ASV_PYTHONPATH``. ``package_src`` defaults to ``<repo>/src`` when the commit is the work
tree's HEAD (the tree is what runs); for another ``--set-commit-hash`` (the PR flow's base
run from the head checkout) nothing is prepended, so the caller's ``PYTHONPATH`` or the
installed package, i.e. that commit's package, is imported; ``package_src=""`` forces the
installed one. The run prints which ``vlmpath`` the benchmark interpreter imports. Other
variables pass through unchanged (asv copies ``os.environ``); ``extra_env`` adds more.

Launch method: GPU runs use ``spawn`` (a fresh interpreter per benchmark: a forked child
of a parent that touched CUDA/HIP cannot use the GPU). CPU runs default to ``forkserver``:
the suite is imported once and each benchmark is a fork, which saves ~2-4 s of torch and
transformers imports per benchmark (the quick suite would otherwise spend most of its
time starting interpreters). CPU runs also pin ``OMP_NUM_THREADS=1`` unless set: with two
cores and short kernels, waiting for a second OpenMP thread dominated (10 ms stalls on
50 us ops).

Interruption: asv saves a commit's results only after all its benchmarks ran, so an
interrupted run leaves no new results file (previous results stay as they were); the
fingerprint and summary are written atomically, the summary of an interrupted run is
marked ``interrupted`` with no rows (its files are ``interrupted-*``; the latest summary
stays the last complete one), and the run-info file is marked ``partial`` only when asv
filed results during the interrupted run (so no PR reuses them as a base; earlier complete
results stay as they were). SIGTERM is an interruption too (``core.interrupt``, in the CLI),
which also ends asv's benchmark processes. One run per results directory at a time
(``core.run_lock``): a second refuses, naming the first.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from vlmpath.runner.asv_config import abs_path, check_writable, load_config, write_config
from vlmpath.runner.asv_proc import asv, stream
from vlmpath.runner.run_files import RunInfo, write_run_info
from vlmpath.core.helper_digest import helper_digests
from vlmpath.runner import discovery_cache
from vlmpath.runner.discovery import Discovered, discover_listing, parse_listing, select
from vlmpath.runner.launch import (
    LAUNCH_METHODS,
    asv_env,
    asv_run_command,
    benchmark_env,
    launch_method,
    package_location,
)
from vlmpath.runner.run_files import (
    fingerprint,
    write_failures,
    write_json_atomic,
)
from vlmpath.compare.results_store import BENCHMARKS_JSON, MACHINE_JSON, files_named, fingerprint_path
from vlmpath.runner.options import RunInterrupted, RunOptions, RunOutcome
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import FAILURES_ENV
from vlmpath.core.git import dirty_paths, head, repo_root, resolve_commit
from vlmpath.core.interrupt import scratch_env
from vlmpath.core.run_lock import results_lock
from vlmpath.core.store_guard import unchanged_on_write_error


def run_commit(repo: Path, sha: str | None) -> str:
    """The commit results are filed under: HEAD, or ``--set-commit-hash`` (hex, must exist)."""
    if sha is None:
        return head(repo)
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", sha):
        raise VlmpathError(f"--set-commit-hash {sha!r} is not a hex commit sha (7-40 digits)")
    try:
        return resolve_commit(repo, sha)
    except VlmpathError:
        raise VlmpathError(f"--set-commit-hash {sha}: no such commit in {repo}; asv needs the commit in the "
                           "repository (fetch it first)") from None


def store_files(machine: str, commit: str):
    """The store files one run of ``commit`` on ``machine`` may write (relative paths)."""
    def touched(rel: Path) -> bool:
        return rel == Path(BENCHMARKS_JSON) or (len(rel.parts) == 2 and rel.parts[0] == machine
                                                and (rel.name == MACHINE_JSON or commit[:8] in rel.name))
    return touched


def _filed_since(results_dir: Path, machine: str, commit: str, since: float) -> bool:
    """Whether asv wrote a results file of ``commit`` on ``machine`` at or after ``since``."""
    return any(p.stat().st_mtime >= since for p in files_named(results_dir, commit[:8], machine))


def busy_warning() -> str | None:
    """The busy-machine warning (``measure.pinning.load_warning``) for the load right now."""
    from vlmpath.measure.pinning import load_warning

    try:
        return load_warning(os.getloadavg()[0])
    except OSError:  # no load average on this platform
        return None


def publish_pages(results_dir: Path, html_dir: Path, reports_dir: Path, commit: str, machine: str) -> Path:
    """The charts (``render.report``, into ``<reports_dir>/charts``) and the landing page in
    front of asv's dashboard (``render.dashboard``/``render.landing``), from the results
    just filed: nothing is measured again. Returns the page."""
    # Imported here: the charts pull in matplotlib.
    from vlmpath.compare.thresholds import load_thresholds
    from vlmpath.render.dashboard import write_dashboard
    from vlmpath.render.landing import link_from_asv, show_single_points
    from vlmpath.render.report import write_report

    write_report(results_dir, reports_dir, thresholds=load_thresholds(None), head=commit)
    page = write_dashboard(html_dir, reports_dir, results_dir=results_dir, commit=commit, machine=machine)
    link_from_asv(html_dir)
    show_single_points(html_dir)
    return page


def run(opts: RunOptions, *, out: TextIO | None = None) -> RunOutcome:
    """Run the asv suite once for one commit on this machine (see the module docstring)."""
    out = sys.stdout if out is None else out
    t0 = time.monotonic()
    repo = repo_root(opts.repo)
    conf = load_config(repo / "asv.conf.json")
    if not opts.allow_dirty:
        dirty = dirty_paths(repo)
        if dirty:
            shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
            raise VlmpathError(f"work tree {repo} has uncommitted changes ({shown}): results would be filed "
                               "under a commit that is not what ran. Commit or stash them, or pass --allow-dirty")
    commit = run_commit(repo, opts.set_commit_hash)
    results_dir = abs_path(repo, opts.results_dir or conf.get("results_dir", ".asv/results")).resolve()
    html_dir = abs_path(repo, opts.html_dir or conf.get("html_dir", ".asv/html")).resolve()
    reports_dir = abs_path(repo, opts.reports_dir or "reports/out").resolve()
    check_writable(results_dir, "results dir")
    # One run per results directory (core.run_lock): a second one refuses, naming this one,
    # before it has read or written anything there.
    with results_lock(results_dir, "vlmpath run " + " ".join(sys.argv[1:])):
        return _run_locked(opts, out, t0, _Where(repo, conf, commit, results_dir, html_dir, reports_dir))


@dataclass(frozen=True)
class _Where:
    """What one run works on, resolved once: the checkout, asv's config, the commit and the
    three directories it writes."""

    repo: Path
    conf: dict
    commit: str
    results_dir: Path
    html_dir: Path
    reports_dir: Path


def _run_locked(opts: RunOptions, out: TextIO, t0: float, where: _Where) -> RunOutcome:
    from vlmpath.runner.launch import engine_machine
    from vlmpath.measure.platform import machine_name, probe
    from vlmpath.render import summary as summary_mod

    repo, conf, commit = where.repo, where.conf, where.commit
    results_dir, html_dir, reports_dir = where.results_dir, where.html_dir, where.reports_dir
    plat = probe()
    machine = machine_name(plat.backend, plat.device_name, opts.machine or os.environ.get("VLMPATH_MACHINE"))
    machine = engine_machine(machine, opts.engine)
    check_writable(reports_dir, "reports dir")
    if opts.publish:
        check_writable(html_dir, "html dir")
    python = opts.python or sys.executable
    if shutil.which(python) is None and not Path(python).is_file():
        raise VlmpathError(f"--python {python} not found: pass the interpreter the benchmarks should run in")
    method = launch_method(opts.launch_method, plat.backend)
    head_sha = head(repo)
    env = benchmark_env(opts, repo, machine, plat.backend, commit_is_head=commit == head_sha)

    benchmark_dir = abs_path(repo, conf.get("benchmark_dir", "benchmarks"))
    listing = discover_listing(benchmark_dir, python, env)  # asv's own discovery, handed to asv below
    chosen = select(parse_listing(listing), opts.bench)
    bench, shard_entry = opts.bench, None
    if opts.shard is not None:  # this runner's part of the selection (vlmpath.runner.shards)
        from vlmpath.runner.shard_costs import pick_shard

        picked = pick_shard(chosen, opts.shard, results_dir, machine)
        chosen, bench, shard_entry = picked.chosen, picked.regex, picked.info
        out.write(f"vlmpath run: {picked.line}\n")
    out.write(f"vlmpath run: benchmarks import vlmpath from {package_location(python, env)}\n")
    out.write(f"vlmpath run: {len(chosen)} benchmark cases on {machine} ({plat.backend}), commit {commit[:8]}, "
              f"scale {opts.scale}{', quick' if opts.quick else ''}, launch {method}\n")
    busy = busy_warning()
    if busy:  # once per run, before asv's own processes add to the load
        out.write(f"vlmpath run: WARNING: {busy}\n")
    out.flush()

    # A write error (a full disk) anywhere below leaves the store as it was: no new results
    # beside an old fingerprint (vlmpath.core.store_guard), one line, exit 2.
    with unchanged_on_write_error(results_dir, store_files(machine, commit), "vlmpath run"):
        status, rc = "complete", 0
        with tempfile.TemporaryDirectory(prefix="vlmpath-asv-") as tmp:
            # asv's own temporary files (its fork server's) go with this directory, even when
            # asv is killed before it removes them.
            env = {**env, **scratch_env(Path(tmp))}
            cfg = write_config(conf, repo, results_dir, html_dir, Path(tmp) / "asv.conf.json")
            asv(["machine", "--yes", "--machine", machine, "--config", str(cfg)], env, repo, "machine")
            failure_lines = Path(tmp) / "failures.jsonl"
            started = time.time()
            try:
                listed = Path(tmp) / "discovered.json"
                discovery_cache.store(listed, listing)  # the same file the cache keeps
                rc = stream(asv_run_command(cfg, python, commit, machine, method, opts.quick, bench),
                            asv_env({**env, FAILURES_ENV: str(failure_lines)}, listed), repo, out)
            except KeyboardInterrupt as exc:
                status, rc = "interrupted", getattr(exc, "exit_code", 130)
                # Recorded only if asv filed something this run (earlier complete results stay
                # as they were): results of this commit are nobody's baseline until a complete run.
                if _filed_since(results_dir, machine, commit, started):
                    write_run_info(results_dir, machine, commit, RunInfo(quick=opts.quick, scale=opts.scale,
                                   bench=opts.bench, trusted=False, shard=shard_entry,
                                   partial=f"interrupted ({exc or 'SIGINT'})", helpers=helper_digests(benchmark_dir)))
            if status != "interrupted":
                write_json_atomic(fingerprint_path(results_dir, machine, commit), fingerprint(opts.python, env, machine))
                write_failures(results_dir, machine, commit, failure_lines, chosen, out)
                # How these results were measured: base reuse checks it (vlmpath.pr.base_reuse).
                write_run_info(results_dir, machine, commit, RunInfo(quick=opts.quick, scale=opts.scale,
                               bench=opts.bench, trusted=opts.trusted, shard=shard_entry,
                               helpers=helper_digests(benchmark_dir)))
                if opts.publish:
                    asv(["publish", "--config", str(cfg)], env, repo, "publish")
                    # asv's pages load their scripts from CDNs; GPU boxes are often offline.
                    # Imported here: dashboard pulls in matplotlib through report.
                    from vlmpath.render.dashboard import localize_assets

                    localize_assets(html_dir)
        summ = summary_mod.summarize(
            results_dir, commit, machine, selected=[(b.name, combo) for b, combo in chosen],
            interrupted=status == "interrupted", asv_returncode=rc,
            duration_s=time.monotonic() - t0, options={"quick": opts.quick, "bench": opts.bench, "scale": opts.scale},
        )
        paths = summary_mod.write_summary(summ, reports_dir)
        if opts.publish and status != "interrupted":
            publish_pages(results_dir, html_dir, reports_dir, commit, machine)  # the CLI ends on its path
    out.write(summary_mod.render_terminal(summ))
    out.flush()
    outcome = RunOutcome(commit=commit, machine=machine, results_dir=results_dir,
                         html_dir=html_dir if opts.publish else None, status=summ.status,
                         asv_returncode=rc, duration_s=time.monotonic() - t0,
                         summary_paths=paths, selected=len(chosen))
    if status == "interrupted":
        raise RunInterrupted(outcome)
    return outcome


__all__ = [
    "FAILURES_ENV",
    "LAUNCH_METHODS",
    "Discovered",
    "RunInterrupted",
    "RunOptions",
    "RunOutcome",
    "benchmark_env",
    "launch_method",
    "load_config",
    "run",
    "run_commit",
    "select",
    "write_config",
    "write_failures",
]
