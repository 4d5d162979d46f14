"""How are the benchmark processes launched: environment, launch method, asv command line?

Which ``vlmpath`` do the benchmarks import? asv's benchmark runner deletes ``PYTHONPATH``
unless ``ASV_PYTHONPATH`` is set, which it puts first on ``sys.path`` instead; so
``package_src`` and any ``PYTHONPATH`` of the caller are passed as ``ASV_PYTHONPATH`` (see
``vlmpath.runner.run``). GPU runs use ``spawn`` (a forked child of a parent that touched
CUDA/HIP cannot use the GPU); CPU runs default to ``forkserver`` (the suite is imported
once) and pin ``OMP_NUM_THREADS=1`` unless set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from vlmpath.engines.base import EngineSpec
from vlmpath.runner.asv_config import abs_path
from vlmpath.runner.options import RunOptions
from vlmpath.suite.bench_env import BenchEnv
from vlmpath.core.errors import VlmpathError

LAUNCH_METHODS = ("auto", "spawn", "forkserver")


def benchmark_env(opts: RunOptions, repo: Path, machine: str, backend: str,
                  base: Mapping[str, str] | None = None, *, commit_is_head: bool = True) -> dict[str, str]:
    """Environment of asv and, through it, of every benchmark process."""
    env = dict(os.environ if base is None else base)
    env.update(opts.extra_env)
    src = opts.package_src
    if src is None:
        tree = commit_is_head and (repo / "src" / "vlmpath").is_dir()
        src = str(repo / "src") if tree else ""
    paths = [p for p in (src and str(abs_path(repo, src)), env.get("ASV_PYTHONPATH", ""), env.get("PYTHONPATH", "")) if p]
    if paths:
        env["ASV_PYTHONPATH"] = os.pathsep.join(paths)
    if backend == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    # The benchmarks measure with this engine (parsed by the CLI; its label crosses to them).
    engine = opts.engine.label if opts.engine is not None else None
    # The one place the run's options are handed to the benchmark processes (asv's own).
    BenchEnv(scale=opts.scale, quick=opts.quick, machine=machine, engine=engine,
             engine_python=opts.engine_python if engine else None,
             serve_model=opts.serve_model).apply(env)
    return env


def engine_machine(machine: str, engine: EngineSpec | None) -> str:
    """The machine name results are filed under: the engine's slug is appended for any engine
    but the reference, so release-by-release history stays apart (``cpu-x86-NAME-X.Y.Z``)."""
    return machine if engine is None or engine.in_process else f"{machine}-{engine.slug}"


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
    # asv itself, its discovery answered from the run's listing when it names one (asv_main).
    cmd = [sys.executable, "-m", "vlmpath.runner.asv_main", "run", "--config", str(cfg), "-E", f"existing:{python}",
           "--set-commit-hash", commit, "--machine", machine, "--launch-method", method,
           "--record-samples", "--show-stderr"]
    if quick:
        cmd.append("--quick")
    if bench is not None:
        cmd += ["-b", bench]
    return cmd


def asv_env(env: Mapping[str, str], listing: Path | None) -> dict[str, str]:
    """The environment of the ``asv run`` process: ``env``, with this vlmpath importable
    (``-m vlmpath.runner.asv_main``; asv hands its benchmarks ``ASV_PYTHONPATH``, not this)
    and the run's listing named."""
    import vlmpath
    from vlmpath.runner.discovery_cache import ASV_LISTING_ENV

    own = str(Path(vlmpath.__file__).resolve().parents[1])
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join([own, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != own)])
    if listing is not None:
        out[ASV_LISTING_ENV] = str(listing)
    return out


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

