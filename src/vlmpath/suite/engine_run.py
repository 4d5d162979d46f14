"""Which records do these cases give with this engine, measured in the engine's own process?

``measure_cases(cases, engine_spec, repeat=...)`` is the one entry the CLI, the asv suite
and the PR flow use to measure with any engine:

- ``reference``: in this process (``measure_case``, no subprocess);
- ``NAME==X`` (any engine of ``vlmpath.engines.registry``): the cached engine
  environment's python (``vlmpath engine install``) runs ``python -m vlmpath.suite.worker``;
- ``NAME@src:DIR``: the same worker in ``--engine-python`` (default: the newest complete
  environment of that engine, else this interpreter) with DIR first on its path.

The worker always imports *this* vlmpath (a directory holding it alone goes on the path
after the engine's), so two engines, or two commits of one engine, are measured by one and
the same suite, and the engine's own packages (torch first of all) come from its own
environment: the directory vlmpath is installed in never goes on the path (for a
non-editable install it is the host's site-packages). Records come back as ``CaseRecord``
objects (``suite.record.read_records``); a case the worker did not report (it crashed) is a
failed record naming the worker's exit status and the last line of its stderr; a worker that
refused an engine option (``worker.REFUSED``: ``--vllm-runner v2`` on a release without that
runner) raises its one line as a ``VlmpathError`` (exit 2). ``vllm_runner``: which of vLLM's
model runners a vLLM engine drives (``engines.vllm_runner_choice``). ``json_path`` writes them as JSON Lines, atomically.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.core.option_enums import Tower, VllmRunner
from vlmpath.engines.base import EngineSpec
from vlmpath.suite.bench_env import BenchEnv
from vlmpath.suite.record import CaseRecord, read_records, write_records
from vlmpath.suite.worker import REFUSED, REFUSED_RC, case_to_dict, error_text, failed_record

#: Which vision tower an engine case runs: ours (the seeded transformers tower, the default)
#: or the engine's own (its adapter's ``engine_tower``: vLLM's or sglang's Qwen2.5-VL).
TOWERS = tuple(Tower)  # core.option_enums: parsed once, by the CLI


_alone: list[Path] = []  # this process's directory holding vlmpath alone (made once)


def vlmpath_src() -> Path:
    """A directory that holds this ``vlmpath`` package and nothing else (put on the worker's
    path): a temporary directory with a link to the package, removed at exit. Never the
    directory vlmpath sits in, which for a non-editable install is the host's site-packages:
    the engine env would import the host's torch and transformers instead of its own."""
    import vlmpath

    if not _alone or not (_alone[0] / "vlmpath").is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="vlmpath-alone-"))
        (tmp / "vlmpath").symlink_to(Path(vlmpath.__file__).resolve().parent, target_is_directory=True)
        atexit.register(shutil.rmtree, tmp, True)
        _alone[:] = [tmp]
    return _alone[0]


def worker_env(spec: EngineSpec, base: dict | None = None) -> dict:
    """The worker's environment: the engine's source tree (``--engine-src``), then vlmpath
    alone, then the caller's own ``PYTHONPATH`` (plug-ins, tests) on its path."""
    base = dict(os.environ if base is None else base)
    path = ([spec.src] if spec.kind == "src" else []) + [str(vlmpath_src())]
    path += [p for p in [base.get("PYTHONPATH")] if p]
    return dict(base, PYTHONPATH=os.pathsep.join(path), PYTHONWARNINGS="ignore")


def engine_python(spec: EngineSpec, python: str | None = None, home: str | None = None) -> str:
    """The interpreter that measures ``spec`` (see the module docstring)."""
    from vlmpath.engines import envs

    if spec.kind == "release":
        return str(envs.require_env(spec, home).python)
    python = python or BenchEnv.read().engine_python
    if python:
        if not Path(python).exists():
            raise VlmpathError(f"--engine-python {python!r} does not exist: give an interpreter path, e.g. "
                               f"{envs.engine_home(home)}/{spec.name}-X.Y.Z/bin/python")
        return python
    newest = envs.newest_env(home, spec.name)
    return str(newest.python) if newest is not None else sys.executable


def _run_reference(cases, repeat: int, count: bool, device: str | None, weights: str | None,
                   threads: int | None = None) -> list[CaseRecord]:
    from vlmpath.suite.measure import Session, measure_case

    session = Session(device or "cpu", weights)
    out = []
    for case in cases:
        try:
            out.append(measure_case(case, session, repeat=repeat, count=count, threads=threads))
        except VlmpathError:
            raise  # bad input (e.g. degenerate golden rows) stops the run, as before
        except Exception as exc:
            out.append(failed_record(case, error_text(exc), "reference", device=str(session.device)))
    return out


def _run_worker(cases, spec: EngineSpec, python: str, repeat: int, count: bool, device: str | None,
                weights: str | None, threads: int | None = None, tower: Tower = Tower.OURS,
                vllm_runner: VllmRunner = VllmRunner.SERVER) -> list[CaseRecord]:
    job = {"cases": [case_to_dict(c) for c in cases], "engine": spec.label, "repeat": repeat,
           "count": count, "device": device or "cpu", "weights": weights, "threads": threads, "tower": tower,
           "vllm_runner": vllm_runner}
    env = worker_env(spec)
    # One hash seed: the counted pass's bytecodes may not depend on set and dict order of strings.
    env.setdefault("PYTHONHASHSEED", "0")
    with tempfile.TemporaryDirectory(prefix="vlmpath-worker-") as tmp:
        out = Path(tmp) / "records.jsonl"
        job["out"] = str(out)
        proc = subprocess.Popen([python, "-m", "vlmpath.suite.worker"], text=True, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        tail: list[str] = []
        refused = None
        for line in proc.stderr:  # the worker's progress, passed on; its last lines kept
            if line.startswith(REFUSED):  # said once, by the CLI (below)
                refused = line[len(REFUSED):].strip()[:400]
                continue
            sys.stderr.write(line)
            if line.strip():
                tail = (tail + [line.rstrip()])[-20:]
        proc.wait()
        if refused and proc.returncode == REFUSED_RC:
            raise VlmpathError(refused)
        records = read_records(out, f"engine worker records ({python})") if out.exists() else []
    if len(records) < len(cases):
        why = (f"engine worker ({python}) exited with {proc.returncode} before this case: "
               f"{tail[-1] if tail else 'no message'}")
        records += [failed_record(c, why, spec.label, device=device or "cpu") for c in cases[len(records):]]
    return records


def measure_cases(cases: Sequence, engine_spec: EngineSpec | str | None = None, *, repeat: int = 3,
                  json_path: str | os.PathLike | None = None, count: bool = True, device: str | None = None,
                  weights: str | None = None, python: str | None = None, home: str | None = None,
                  threads: int | None = None, tower: Tower = Tower.OURS,
                  vllm_runner: VllmRunner = VllmRunner.SERVER) -> list[CaseRecord]:
    """Measure ``cases`` with the engine; returns one record per case, in order.
    ``threads``: torch's CPU threads while measuring (``vlmpath.measure.pinning``), recorded."""
    # A label arrives only from a benchmark module (VLMPATH_ENGINE, its process boundary; any
    # side's benchmarks pass the variable's text): everything else hands a parsed spec.
    spec = engine_spec if isinstance(engine_spec, EngineSpec) else EngineSpec.parse(engine_spec)
    if repeat < 1:
        raise VlmpathError(f"repeat must be at least 1, got {repeat}")
    if spec.in_process:
        if tower != "ours":
            raise VlmpathError("--tower engine runs an engine's own vision tower: name an engine (--engine NAME==X)")
        if vllm_runner != "server":
            raise VlmpathError(f"--vllm-runner {vllm_runner} chooses vLLM's model runner: name a vLLM engine "
                               "(--engine vllm==X), or leave --vllm-runner out")
        records = _run_reference(cases, repeat, count, device, weights, threads)
    else:
        records = _run_worker(cases, spec, engine_python(spec, python, home), repeat, count, device, weights,
                              threads, tower, vllm_runner)
    if json_path is not None:
        write_records(json_path, records)
    return records
