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
   results JSON.

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
fingerprint and summary are written atomically, and the summary of an interrupted run is
marked ``interrupted``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from vlmpath.core.errors import VlmpathError

FINGERPRINT_PREFIX = "vlmpath-fingerprint-"
#: The suite appends why each benchmark failed to this file (``benchmarks/_common.py``).
FAILURES_ENV = "VLMPATH_FAILURES_FILE"
LAUNCH_METHODS = ("auto", "spawn", "forkserver")
_SHA40 = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class RunOptions:
    """Everything ``vlmpath run`` takes; paths may be relative to ``repo``."""

    repo: str = "."
    quick: bool = False
    bench: str | None = None
    scale: str = "tiny"
    machine: str | None = None
    results_dir: str | None = None       # default: the config's (.asv/results)
    html_dir: str | None = None          # default: the config's (.asv/html)
    reports_dir: str | None = None       # default: <repo>/reports/out
    set_commit_hash: str | None = None   # default: HEAD of repo
    allow_dirty: bool = False
    python: str | None = None            # benchmark interpreter (default: this one)
    package_src: str | None = None       # None: <repo>/src if present; "": installed vlmpath
    launch_method: str = "auto"
    publish: bool = True
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOutcome:
    commit: str
    machine: str
    results_dir: Path
    html_dir: Path | None
    status: str                          # complete | partial | interrupted | failed
    asv_returncode: int
    duration_s: float
    summary_paths: tuple[Path, ...]
    selected: int                        # selected (benchmark, params) combinations


# --- small helpers ---------------------------------------------------------------------------
def _git(repo: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise VlmpathError("git is not installed: vlmpath run needs git to name the commit") from None
    if proc.returncode != 0:
        raise VlmpathError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def repo_root(path: str | os.PathLike[str]) -> Path:
    p = Path(path).resolve()
    if not p.is_dir():
        raise VlmpathError(f"--repo {path} is not a directory: pass the vlmpath checkout")
    try:
        return Path(_git(p, "rev-parse", "--show-toplevel").strip())
    except VlmpathError:
        raise VlmpathError(f"{p} is not inside a git work tree: vlmpath run names results by commit, "
                           "run it in a git checkout") from None


def dirty_paths(repo: Path) -> list[str]:
    """Modified, staged and untracked (not ignored) paths of the work tree."""
    return [line[3:] for line in _git(repo, "status", "--porcelain").splitlines() if line.strip()]


def resolve_commit(repo: Path, sha: str | None) -> str:
    if sha is None:
        return _git(repo, "rev-parse", "HEAD").strip()
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", sha):
        raise VlmpathError(f"--set-commit-hash {sha!r} is not a hex commit sha (7-40 digits)")
    try:
        return _git(repo, "rev-parse", "--verify", f"{sha}^{{commit}}").strip()
    except VlmpathError:
        raise VlmpathError(f"--set-commit-hash {sha}: no such commit in {repo}; asv needs the commit in the "
                           "repository (fetch it first)") from None


def _abs(repo: Path, p: str | os.PathLike[str]) -> Path:
    q = Path(p).expanduser()
    return q if q.is_absolute() else (repo / q)


def load_config(path: Path) -> dict:
    """asv.conf.json, which may hold // comments (asv's own loader strips them)."""
    from asv import util as asv_util

    if not path.is_file():
        raise VlmpathError(f"{path} not found: run from the vlmpath checkout or pass --repo")
    try:
        return asv_util.load_json(str(path), js_comments=True)
    except asv_util.UserError as exc:
        raise VlmpathError(f"cannot read {path}: {exc}") from None


def write_config(conf: Mapping, repo: Path, results_dir: Path, html_dir: Path, dest: Path) -> Path:
    """A copy of the config with every path absolute (see the module docstring)."""
    c = dict(conf)
    c["repo"] = str(_abs(repo, conf.get("repo", ".")))
    c["benchmark_dir"] = str(_abs(repo, conf.get("benchmark_dir", "benchmarks")))
    c["env_dir"] = str(_abs(repo, conf.get("env_dir", ".asv/env")))
    c["results_dir"] = str(results_dir)
    c["html_dir"] = str(html_dir)
    dest.write_text(json.dumps(c, indent=2), encoding="utf-8")
    return dest


def check_writable(path: Path, what: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".vlmpath-write-check-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise VlmpathError(f"{what} {path} is not writable ({exc.strerror or exc}): pass a writable directory "
                           f"with --{what.replace(' ', '-')}") from None


def write_json_atomic(path: Path, data: object) -> None:
    from vlmpath.render.summary import write_atomic

    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def fingerprint_path(results_dir: Path, machine: str, commit: str) -> Path:
    return Path(results_dir) / machine / f"{FINGERPRINT_PREFIX}{commit[:8]}.json"


def collect_failures(lines_path: Path) -> tuple[list, int]:
    """The failure lines the benchmarks appended: (``results.Failure`` list in file order,
    number of unreadable lines). A missing file means nothing failed."""
    from vlmpath.compare.results import Failure

    try:
        raw = Path(lines_path).read_bytes()
    except FileNotFoundError:
        return [], 0
    found, bad = [], 0
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            found.append(Failure.from_dict(json.loads(line)))
        except (ValueError, TypeError):
            bad += 1
    return found, bad


def merge_failures(previous: Sequence, new: Sequence, rerun: set[tuple[str, tuple[str, ...]]]) -> list[dict]:
    """The failures file's content: ``new`` (first message per case: asv may run a case
    in several rounds), plus ``previous`` entries for cases this run did not select
    (``rerun``: (benchmark, parameter values) keys), sorted, as JSON-ready dicts."""
    out: dict = {}
    for f in new:
        out.setdefault(f.key, f)
    for f in previous:
        if f.key not in rerun:
            out.setdefault(f.key, f)
    return [out[k].to_dict() for k in sorted(out)]


def write_failures(results_dir: Path, machine: str, commit: str, lines_path: Path,
                   chosen: Sequence[tuple[Discovered, tuple[str, ...]]], out: TextIO) -> Path:
    """File this run's failure lines as ``<results>/<machine>/vlmpath-failures-<sha8>.json``."""
    from vlmpath.compare.results import failures_path, param_display, read_failures

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


# --- discovery and selection -------------------------------------------------------------
@dataclass(frozen=True)
class Discovered:
    name: str
    params: tuple[tuple[str, ...], ...]   # asv's repr strings per axis
    unit: str

    def combos(self) -> list[tuple[str, ...]]:
        import itertools

        return list(itertools.product(*self.params)) if self.params else [()]

    def label(self, combo: tuple[str, ...]) -> str:
        return f"{self.name}({', '.join(combo)})" if combo else self.name


_DISCOVER_SCRIPT = r"""
import json, sys
from asv_runner.discovery import disc_benchmarks
out = []
for b in disc_benchmarks(sys.argv[1]):
    out.append({"name": b.name, "params": [[str(p) for p in axis] for axis in b.params],
                "unit": getattr(b, "unit", "")})
json.dump(out, open(sys.argv[2], "w"))
"""


def discover(benchmark_dir: Path, python: str, env: Mapping[str, str]) -> list[Discovered]:
    """asv's discovery, in the benchmark interpreter (a subprocess: the suite's package must
    not land in this process's ``sys.modules``)."""
    with tempfile.TemporaryDirectory(prefix="vlmpath-discover-") as tmp:
        out = Path(tmp) / "benchmarks.json"
        penv = dict(env)
        penv["PYTHONPATH"] = os.pathsep.join(x for x in (str(benchmark_dir.parent), penv.get("ASV_PYTHONPATH", "")) if x)
        proc = subprocess.run([python, "-c", _DISCOVER_SCRIPT, str(benchmark_dir), str(out)],
                              capture_output=True, text=True, env=penv, cwd=tmp, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise VlmpathError(f"importing the benchmark suite in {benchmark_dir} failed with {python}:\n{tail}")
        raw = json.loads(out.read_text(encoding="utf-8"))
    return [Discovered(d["name"], tuple(tuple(a) for a in d["params"]), d["unit"]) for d in raw]


def select(benchmarks: Sequence[Discovered], regex: str | None) -> list[tuple[Discovered, tuple[str, ...]]]:
    """(benchmark, parameter combination) pairs that ``asv run -b regex`` runs."""
    if regex is not None:
        try:
            pat = re.compile(regex)
        except re.error as exc:
            raise VlmpathError(f"--bench {regex!r} is not a valid regular expression: {exc}") from None
    chosen = []
    for b in benchmarks:
        for combo in b.combos():
            if regex is None or pat.search(b.label(combo)):
                chosen.append((b, combo))
    if not chosen:
        names = sorted(b.name for b in benchmarks)
        sample = ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")
        raise VlmpathError(f"--bench {regex!r} matches no benchmark; benchmarks are e.g. {sample}. "
                           "The regex is searched in 'module.Class.method(param, ...)'")
    return chosen


# --- the run ---------------------------------------------------------------------------------
def benchmark_env(opts: RunOptions, repo: Path, machine: str, backend: str,
                  base: Mapping[str, str] | None = None, *, commit_is_head: bool = True) -> dict[str, str]:
    """Environment of asv and, through it, of every benchmark process."""
    from vlmpath.suite.cases import QUICK_ENV, SCALE_ENV

    env = dict(os.environ if base is None else base)
    env.update(opts.extra_env)
    src = opts.package_src
    if src is None:
        tree = commit_is_head and (repo / "src" / "vlmpath").is_dir()
        src = str(repo / "src") if tree else ""
    paths = [p for p in (src and str(_abs(repo, src)), env.get("ASV_PYTHONPATH", ""), env.get("PYTHONPATH", "")) if p]
    if paths:
        env["ASV_PYTHONPATH"] = os.pathsep.join(paths)
    env[SCALE_ENV] = opts.scale
    env["VLMPATH_MACHINE"] = machine  # the benchmarks' own probe names the same machine
    if opts.quick:
        env[QUICK_ENV] = "1"
    else:
        env.pop(QUICK_ENV, None)
    if backend == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def launch_method(requested: str, backend: str) -> str:
    if requested not in LAUNCH_METHODS:
        raise VlmpathError(f"--launch-method {requested!r}: choose one of {', '.join(LAUNCH_METHODS)}")
    if requested == "forkserver" and backend != "cpu":
        raise VlmpathError("--launch-method forkserver cannot be used on a GPU: forked children of a "
                           "process that initialised CUDA/HIP cannot use the device; use spawn")
    if requested == "auto":
        return "forkserver" if backend == "cpu" else "spawn"
    return requested


def asv_run_command(cfg: Path, python: str, commit: str, machine: str, method: str,
                    quick: bool, bench: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "asv", "run", "--config", str(cfg), "-E", f"existing:{python}",
           "--set-commit-hash", commit, "--machine", machine, "--launch-method", method,
           "--record-samples", "--show-stderr"]
    if quick:
        cmd.append("--quick")
    if bench is not None:
        cmd += ["-b", bench]
    return cmd


def _stream(cmd: Sequence[str], env: Mapping[str, str], cwd: Path, out: TextIO,
            on_line: Callable[[str], None] | None = None) -> int:
    """Run ``cmd``, echoing its output line by line; Ctrl-C stops it and re-raises."""
    proc = subprocess.Popen(list(cmd), env=dict(env), cwd=str(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            out.flush()
            if on_line is not None:
                on_line(line)
        return proc.wait()
    except KeyboardInterrupt:
        # A terminal's Ctrl-C reaches asv too; a signal sent to us alone must be forwarded.
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise


def _asv(args: Sequence[str], env: Mapping[str, str], cwd: Path, what: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "asv", *args], env=dict(env), cwd=str(cwd),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise VlmpathError(f"asv {what} failed (exit {proc.returncode}):\n{tail}")


def package_location(python: str, env: Mapping[str, str]) -> str:
    """Where the benchmark interpreter imports ``vlmpath`` from (as asv will set its path)."""
    penv = dict(env)
    penv["PYTHONPATH"] = env.get("ASV_PYTHONPATH", "")
    proc = subprocess.run([python, "-c", "import vlmpath, os; print(os.path.dirname(vlmpath.__file__))"],
                          env=penv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise VlmpathError(f"the benchmark interpreter {python} cannot import vlmpath: install the commit under "
                           "test, set PYTHONPATH to its src/, or pass --package-src")
    return proc.stdout.strip()


def _fingerprint(python: str | None, env: Mapping[str, str], machine: str) -> dict:
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
    return fp


def run(opts: RunOptions, *, out: TextIO | None = None) -> RunOutcome:
    """Run the asv suite once for one commit on this machine (see the module docstring)."""
    from vlmpath.measure.platform import machine_name, probe
    from vlmpath.measure.workload import check_scale
    from vlmpath.render import summary as summary_mod

    out = sys.stdout if out is None else out
    t0 = time.monotonic()
    check_scale(opts.scale)
    repo = repo_root(opts.repo)
    conf = load_config(repo / "asv.conf.json")
    plat = probe()
    machine = machine_name(plat.backend, plat.device_name, opts.machine or os.environ.get("VLMPATH_MACHINE"))
    if not opts.allow_dirty:
        dirty = dirty_paths(repo)
        if dirty:
            shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
            raise VlmpathError(f"work tree {repo} has uncommitted changes ({shown}): results would be filed "
                               "under a commit that is not what ran. Commit or stash them, or pass --allow-dirty")
    commit = resolve_commit(repo, opts.set_commit_hash)
    results_dir = _abs(repo, opts.results_dir or conf.get("results_dir", ".asv/results")).resolve()
    html_dir = _abs(repo, opts.html_dir or conf.get("html_dir", ".asv/html")).resolve()
    reports_dir = _abs(repo, opts.reports_dir or "reports/out").resolve()
    check_writable(results_dir, "results dir")
    check_writable(reports_dir, "reports dir")
    if opts.publish:
        check_writable(html_dir, "html dir")
    python = opts.python or sys.executable
    if shutil.which(python) is None and not Path(python).is_file():
        raise VlmpathError(f"--python {python} not found: pass the interpreter the benchmarks should run in")
    method = launch_method(opts.launch_method, plat.backend)
    head = _git(repo, "rev-parse", "HEAD").strip()
    env = benchmark_env(opts, repo, machine, plat.backend, commit_is_head=commit == head)

    benchmark_dir = _abs(repo, conf.get("benchmark_dir", "benchmarks"))
    chosen = select(discover(benchmark_dir, python, env), opts.bench)
    out.write(f"vlmpath run: benchmarks import vlmpath from {package_location(python, env)}\n")
    out.write(f"vlmpath run: {len(chosen)} benchmark cases on {machine} ({plat.backend}), commit {commit[:8]}, "
              f"scale {opts.scale}{', quick' if opts.quick else ''}, launch {method}\n")
    out.flush()

    status, rc = "complete", 0
    with tempfile.TemporaryDirectory(prefix="vlmpath-asv-") as tmp:
        cfg = write_config(conf, repo, results_dir, html_dir, Path(tmp) / "asv.conf.json")
        _asv(["machine", "--yes", "--machine", machine, "--config", str(cfg)], env, repo, "machine")
        failure_lines = Path(tmp) / "failures.jsonl"
        try:
            rc = _stream(asv_run_command(cfg, python, commit, machine, method, opts.quick, opts.bench),
                         {**env, FAILURES_ENV: str(failure_lines)}, repo, out)
        except KeyboardInterrupt:
            status, rc = "interrupted", 130
        if status != "interrupted":
            write_json_atomic(fingerprint_path(results_dir, machine, commit), _fingerprint(opts.python, env, machine))
            write_failures(results_dir, machine, commit, failure_lines, chosen, out)
            if opts.publish:
                _asv(["publish", "--config", str(cfg)], env, repo, "publish")
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
    out.write(summary_mod.render_terminal(summ))
    out.flush()
    outcome = RunOutcome(commit=commit, machine=machine, results_dir=results_dir,
                         html_dir=html_dir if opts.publish else None, status=summ.status,
                         asv_returncode=rc, duration_s=time.monotonic() - t0,
                         summary_paths=paths, selected=len(chosen))
    if status == "interrupted":
        raise RunInterrupted(outcome)
    return outcome


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``asv run``; ``outcome`` has the (interrupted) summary's paths."""

    def __init__(self, outcome: RunOutcome):
        super().__init__("interrupted")
        self.outcome = outcome


# --- serving the dashboard ----------------------------------------------------------------
def make_server(html_dir: str | os.PathLike[str], port: int = 8080, bind: str = "127.0.0.1"):
    """An HTTP server over the published dashboard (call ``serve_forever``)."""
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = Path(html_dir)
    if not (root / "index.html").is_file():
        raise VlmpathError(f"{root} has no index.html: run `vlmpath run` (it publishes the dashboard) "
                           "or pass --html-dir")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    try:
        return ThreadingHTTPServer((bind, port), handler)
    except OSError as exc:
        raise VlmpathError(f"cannot listen on {bind}:{port} ({exc.strerror or exc}): pick another --port") from None


__all__ = [
    "RunInterrupted",
    "RunOptions",
    "RunOutcome",
    "benchmark_env",
    "collect_failures",
    "dirty_paths",
    "discover",
    "fingerprint_path",
    "launch_method",
    "make_server",
    "merge_failures",
    "run",
    "select",
    "write_failures",
]
