"""Did this pull request make the embedding path slower or less accurate than its base?

``run_pr`` is the whole PR check on one machine (``vlmpath ci pr``):

1. resolve ``--base`` and ``--head`` to commits and take their **merge-base** as the
   baseline (comparing against the live base tip would blame the PR for whatever landed on
   the base branch meanwhile);
2. check head (and, when needed, the merge-base) out into temporary ``git worktree``\\ s,
   removed again afterwards, also when anything fails;
3. run the asv suite once per side with ``--set-commit-hash <sha>``, the same ``--machine``
   and the same results directory, so both runs land in one asv results tree;
4. copy just those two runs into ``OUT/results`` and compare them there, writing
   ``comment.md`` (the PR comment body), ``comparison.json``, ``summary.txt`` and
   ``run.json`` (what was compared, for the comment workflow).

How each side's code is put under test: the benchmarks run in the one existing
environment (the docker image or the CI venv; asv ``-E existing``), and each side's
worktree ``src/`` is put **first on ``ASV_PYTHONPATH``** (``vlmpath run --package-src``). asv 0.6.6 discards a plain
``PYTHONPATH`` in its benchmark subprocesses but turns ``ASV_PYTHONPATH`` into their
``PYTHONPATH`` (asv/environment.py ``Environment.run``), and ``PYTHONPATH`` entries come
before site-packages, so ``import vlmpath`` there resolves to that commit. We chose this
over ``pip install --no-deps <worktree>`` because it never mutates the environment: two
sides cannot leave the environment pointing at the wrong commit if a run is killed, no
write access to site-packages is needed (the images run as a non-root user), an editable
install of the checkout is left alone, and the torch of the image can never be touched.
Its limit is the same as ``--no-deps``: a commit that needs new dependencies must bring
them in the image first. Before each run the flow checks, in a subprocess with exactly
that path, that ``vlmpath`` imports from the worktree, so a shadowing install cannot
silently benchmark the wrong code.

Which benchmark files run: **head's** ``asv.conf.json`` and ``benchmarks/`` for both
sides (the asv convention: one checkout's suite measures every commit). The same
measuring code on both sides means a difference comes from the library, not from a
changed benchmark; a benchmark the base cannot run shows as failing on base / fixed, not
as a silent change. The runner (``vlmpath run``) is this process's own vlmpath.

Base results already in the results directory for the merge-base on this machine are
reused when they cover every benchmark head ran (``--rerun-base`` measures again);
head is always measured afresh, and a head run that wrote nothing new is an error.

The comment workflow's half (``vlmpath ci merge``, merging every machine's artifact into
one comparison) is ``ci_merge``; it shares this module's output files and writers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vlmpath.core.errors import VlmpathError

RUN_SCHEMA_VERSION = 1
RESULTS_ENV = "VLMPATH_RESULTS_DIR"
# Files written into OUT (and uploaded as one artifact per machine).
COMMENT_FILE = "comment.md"
COMPARISON_FILE = "comparison.json"
SUMMARY_FILE = "summary.txt"
RUN_FILE = "run.json"
ERROR_FILE = "error.txt"
PR_NUMBER_FILE = "pr-number"
RESULTS_SUBDIR = "results"

MACHINE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _log(msg: str) -> None:
    print(f"vlmpath ci: {msg}", file=sys.stderr, flush=True)


# --- git ---------------------------------------------------------------------------------


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise VlmpathError("git is not installed or not on PATH: install git") from None
    if check and r.returncode != 0:
        raise VlmpathError(f"git {' '.join(args)} failed in {repo}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def repo_root(path: str | os.PathLike[str]) -> Path:
    """Top level of the git checkout containing ``path``."""
    p = Path(path).resolve()
    r = _git(p if p.is_dir() else p.parent, "rev-parse", "--show-toplevel", check=False)
    if r.returncode != 0:
        raise VlmpathError(f"{p} is not inside a git checkout: run from the repository (asv needs its history)")
    return Path(r.stdout.strip())


def resolve_commit(repo: Path, ref: str) -> str:
    """Full sha of ``ref``; an unknown ref is a ``VlmpathError`` naming it."""
    if not ref or ref.startswith("-") or any(c.isspace() for c in ref):
        raise VlmpathError(f"{ref!r} is not a git ref or commit: pass a branch, tag or sha")
    r = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if r.returncode != 0:
        raise VlmpathError(
            f"unknown commit {ref!r} in {repo}: fetch it first (in CI: actions/checkout "
            "with fetch-depth: 0) or check the name"
        )
    return r.stdout.strip()


def merge_base(repo: Path, a: str, b: str) -> str:
    r = _git(repo, "merge-base", a, b, check=False)
    if r.returncode != 0 or not r.stdout.strip():
        raise VlmpathError(
            f"commits {a[:12]} and {b[:12]} have no merge-base: is the history shallow? "
            "Fetch the full history (actions/checkout fetch-depth: 0)"
        )
    return r.stdout.strip()


@contextmanager
def worktree(repo: Path, sha: str, path: Path) -> Iterator[Path]:
    """A detached checkout of ``sha`` at ``path``, removed on exit (also on failure)."""
    _git(repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
    try:
        yield path
    finally:
        _git(repo, "worktree", "remove", "--force", str(path), check=False)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        _git(repo, "worktree", "prune", check=False)


# --- running one side --------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteRequest:
    """One run of the benchmark suite, as ``run_pr`` asks a runner for it."""

    commit: str  # full sha, recorded with --set-commit-hash
    source: Path  # worktree of that commit; its src/ is what the benchmarks import
    bench_root: Path  # checkout whose asv.conf.json and benchmarks/ run (head's)
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
    return Path(__file__).resolve().parents[1]


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
    """The real runner: ``vlmpath run`` of this package, with head's suite (``--repo``)
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
    _log(f"running the suite for {req.commit[:8]} (code from {req.source}): {' '.join(cmd[1:])}")
    r = subprocess.run(cmd, cwd=req.bench_root, env=dict(req.env))
    if r.returncode != 0:
        # A run whose benchmarks failed still files results (the failures are data):
        # run_pr checks that a new results file was written and compares it.
        _log(f"vlmpath run for {req.commit[:8]} exited {r.returncode}")


def _run_files(results_dir: Path, machine: str, sha: str) -> list[Path]:
    """asv run files of ``sha`` on ``machine`` whose recorded commit_hash is ``sha``."""
    mdir = results_dir / machine
    out = []
    for p in sorted(mdir.glob(f"{sha[:8]}-*.json")):
        if not p.is_file():
            continue
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            out.append(p)  # corrupted: load_asv will name it
            continue
        if isinstance(data, dict) and str(data.get("commit_hash", "")).lower() == sha:
            out.append(p)
    return out


def _stamp(paths: Sequence[Path]) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in paths if p.exists()}


def _run_side(run_suite: RunSuite, req: SuiteRequest) -> None:
    before = _stamp(_run_files(req.results_dir, req.machine, req.commit))
    check_import(req.source, req.env)
    run_suite(req)
    after = _stamp(_run_files(req.results_dir, req.machine, req.commit))
    fresh = [p for p, st in after.items() if before.get(p) != st]
    if not fresh:
        raise VlmpathError(
            f"the benchmark run for commit {req.commit[:8]} on machine {req.machine} wrote no "
            f"(new) results under {req.results_dir / req.machine}: see the run's log above; "
            "check --bench matches at least one benchmark"
        )


def _result_keys(paths: Sequence[Path]) -> set[str]:
    keys: set[str] = set()
    for p in paths:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return set()
        if isinstance(data, dict) and isinstance(data.get("results"), dict):
            keys.update(data["results"])
    return keys


def base_reusable(results_dir: Path, machine: str, base_sha: str, head_sha: str) -> bool:
    """Do stored base results on this machine cover every benchmark head has results for?"""
    base = _run_files(results_dir, machine, base_sha)
    head_keys = _result_keys(_run_files(results_dir, machine, head_sha))
    return bool(base) and bool(head_keys) and head_keys <= _result_keys(base)


def copy_results(results_dir: Path, dest: Path, machine: str, shas: Sequence[str]) -> None:
    """Copy only what one comparison needs (not the whole history) into ``dest``.

    ``benchmarks.json`` keeps only the benchmarks these runs selected: with ``--bench``
    the others were never asked for, and listing them would mark both runs "partial".
    A benchmark run on one side only still shows (new / removed / newly failing).
    """
    mdest = dest / machine
    mdest.mkdir(parents=True, exist_ok=True)
    src_m = results_dir / machine
    if (src_m / "machine.json").is_file():
        shutil.copy2(src_m / "machine.json", mdest / "machine.json")
    copied: list[Path] = []
    for sha in dict.fromkeys(shas):
        for p in _run_files(results_dir, machine, sha):
            shutil.copy2(p, mdest / p.name)
            copied.append(mdest / p.name)
        for fp in (src_m / f"vlmpath-fingerprint-{sha[:8]}.json", src_m / f"vlmpath-failures-{sha[:8]}.json"):
            if fp.is_file():
                shutil.copy2(fp, mdest / fp.name)
    bench_json = results_dir / "benchmarks.json"
    if bench_json.is_file():
        try:
            meta = json.loads(bench_json.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            shutil.copy2(bench_json, dest / "benchmarks.json")  # load_asv names it
            return
        ran = _result_keys(copied)
        if isinstance(meta, dict) and ran:
            meta = {k: v for k, v in meta.items() if k == "version" or k in ran}
        write_json(dest / "benchmarks.json", meta)


def _selected(pattern: str, benchmark: str, params: Sequence[tuple[str, str]]) -> bool:
    """Did ``asv run -b pattern`` select this case? asv matches ``name(p1, p2)`` with the
    parameters as repr strings; we only have display values, so try both spellings."""
    if not params:
        return re.search(pattern, benchmark) is not None
    names = (f"{benchmark}({', '.join(repr(v) for _, v in params)})",
             f"{benchmark}({', '.join(v for _, v in params)})")
    return any(re.search(pattern, n) for n in names)


def drop_unselected(report, bench_by_machine: Mapping[str, str | None]):
    """Remove rows for parameter combinations ``--bench`` did not select (asv records
    them as skipped on both sides); a selected case skipped on both sides stays."""
    from vlmpath.compare.verdict import Verdict

    machines = []
    for m in report.machines:
        pattern = bench_by_machine.get(m.machine)
        if pattern:
            kept = tuple(c for c in m.comparisons
                         if not (c.verdict is Verdict.NOT_COMPARABLE and c.reason == "skipped on base and head"
                                 and not _selected(pattern, c.benchmark, c.params)))
            m = replace(m, comparisons=kept)
        machines.append(m)
    return replace(report, machines=tuple(machines))


# --- the PR flow -------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowResult:
    """What ``run_pr`` / ``merge_artifacts`` compared and decided."""

    base_sha: str  # the merge-base actually measured as the baseline
    head_sha: str
    machines: tuple[str, ...]
    out_dir: Path
    report: Any  # compare.ComparisonReport
    exit_code: int
    reused_base: bool = False
    notes: tuple[str, ...] = ()


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Sorted, indented JSON written atomically (run.json, merged benchmarks.json)."""
    from vlmpath.compare.results import write_text_atomic

    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_outputs(out: Path, report, *, header: Sequence[str], fail: bool,
                   thresholds_note: str | None = None) -> int:
    """comment.md, comparison.json and summary.txt for ``report`` into OUT; returns the exit code."""
    from vlmpath.compare.results import write_text_atomic
    from vlmpath.render import comment as render

    write_text_atomic(out / COMMENT_FILE, render.render_markdown(report))
    write_text_atomic(out / COMPARISON_FILE, render.render_json(report))
    code = report.exit_code(fail_on_regression=fail)
    verdict = (f"{len(report.regressions)} regression(s): exit {code}" if report.regressions
               else f"no regressions: exit {code}")
    text = "\n".join([*header, f"verdict: {verdict}", "", render.render_terminal(report)])
    write_text_atomic(out / SUMMARY_FILE, text)
    return code


def _default_machine() -> str:
    from vlmpath.measure.platform import probe

    return probe().machine


def run_pr(base: str, head: str, *, out_dir: str | os.PathLike[str], repo: str | os.PathLike[str] = ".",
           machine: str | None = None, bench: str | None = None, quick: bool = False,
           results_dir: str | os.PathLike[str] | None = None, rerun_base: bool = False,
           fail_on_regression: bool = True, run_suite: RunSuite | None = None,
           thresholds: str | os.PathLike[str] | None = None, scale: str | None = None,
           charts: bool = True, env: Mapping[str, str] | None = None) -> FlowResult:
    """Benchmark merge-base(base, head) and head on one machine and compare them."""
    from vlmpath.compare import results
    from vlmpath.compare import verdict as compare

    if bench is not None:
        try:
            re.compile(bench)
        except re.error as exc:
            raise VlmpathError(f"--bench {bench!r} is not a regular expression: {exc}") from None
    root = repo_root(repo)
    base_tip = resolve_commit(root, base)
    head_sha = resolve_commit(root, head)
    base_sha = merge_base(root, base_tip, head_sha)
    machine = machine or _default_machine()
    if not MACHINE_NAME.match(machine):
        raise VlmpathError(f"machine name {machine!r}: use letters, digits, '.', '_' and '-' only (at most 64)")
    rdir = Path(results_dir or (env or os.environ).get(RESULTS_ENV) or root / ".asv" / "results").resolve()
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if (out / RESULTS_SUBDIR).exists():
        shutil.rmtree(out / RESULTS_SUBDIR)  # a stale copy would be compared as if new
    cfg = compare.load_thresholds(thresholds)
    runner = run_suite or run_suite_subprocess
    notes: list[str] = []
    _log(f"base {base} -> merge-base {base_sha[:8]} (tip {base_tip[:8]}); head {head} -> {head_sha[:8]}; "
         f"machine {machine}; results {rdir}")

    def request(sha: str, source: Path, bench_root: Path) -> SuiteRequest:
        return SuiteRequest(commit=sha, source=source, bench_root=bench_root, results_dir=rdir,
                            machine=machine, bench=bench, quick=quick, env=side_env(source, env),
                            scale=scale, reports_dir=out / "runs" / sha[:8])

    reused = False
    tmp = Path(tempfile.mkdtemp(prefix="vlmpath-ci-"))
    try:
        with worktree(root, head_sha, tmp / "head") as head_wt:
            _run_side(runner, request(head_sha, head_wt, head_wt))
            if base_sha == head_sha:
                reused = True
                notes.append(f"base and head are the same commit {head_sha[:8]}: one run compared with itself")
            elif not rerun_base and base_reusable(rdir, machine, base_sha, head_sha):
                reused = True
                notes.append(f"base results for {base_sha[:8]} on {machine} reused from an earlier run "
                             "(--rerun-base measures it again)")
            else:
                with worktree(root, base_sha, tmp / "base") as base_wt:
                    _run_side(runner, request(base_sha, base_wt, head_wt))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    copy_results(rdir, out / RESULTS_SUBDIR, machine, (base_sha, head_sha))
    report = compare.compare(results.load_asv(out / RESULTS_SUBDIR, base_sha),
                             results.load_asv(out / RESULTS_SUBDIR, head_sha), cfg)
    report = drop_unselected(report, {machine: bench})
    header = [f"base: {base} -> merge-base {base_sha} (base tip {base_tip})",
              f"head: {head} -> {head_sha}", f"machine: {machine}", f"results: {rdir}",
              *(f"note: {n}" for n in notes)]
    code = write_outputs(out, report, header=header, fail=fail_on_regression)
    chart_notes = draw_charts(out, base_sha, head_sha) if charts else []
    for n in chart_notes:
        _log(n)
    write_json(out / RUN_FILE, {
        "schema_version": RUN_SCHEMA_VERSION, "base_ref": base, "head_ref": head,
        "base_sha": base_sha, "base_tip": base_tip, "head_sha": head_sha, "machine": machine,
        "bench": bench, "quick": quick, "scale": scale, "reused_base": reused, "notes": notes,
        "chart_notes": chart_notes,
        "regressions": len(report.regressions), "exit_code": code,
    })
    for n in notes:
        _log(n)
    return FlowResult(base_sha, head_sha, (machine,), out, report, code, reused, tuple(notes))


def draw_charts(out: Path, base_sha: str, head_sha: str) -> list[str]:
    """PR charts into OUT/report/charts with ``vlmpath report``; a failure is a note, not fatal
    (the comparison is what gates the PR)."""
    try:
        from vlmpath.render.report import write_report

        rep = write_report(out / RESULTS_SUBDIR, out / "report", base=base_sha, head=head_sha,
                           comparison=out / COMPARISON_FILE)
    except (ImportError, VlmpathError) as exc:
        return [f"charts not drawn: {exc}"]
    return [f"chart warning: {w}" for w in rep.warnings]


def write_error(out_dir: str | os.PathLike[str], message: str) -> None:
    """Leave the failure in OUT so the comment workflow can report it (never silence)."""
    from vlmpath.compare.results import write_text_atomic

    write_text_atomic(Path(out_dir) / ERROR_FILE, message.rstrip() + "\n")
