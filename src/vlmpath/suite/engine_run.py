"""Which records do these cases give with this engine, measured in the engine's own process?

``measure_cases(cases, engine_spec, repeat=...)`` is the one entry the CLI, the asv suite
and the PR flow use to measure with any engine:

- ``reference``: in this process (``measure_case``, no subprocess);
- ``NAME==X`` (any engine of ``vlmpath.engines.registry``): the cached engine
  environment's python (``vlmpath engine install``) runs ``python -m vlmpath.suite.worker``;
- ``NAME@src:DIR``: the same worker in ``--engine-python`` (default: the newest complete
  environment of that engine, else this interpreter) with DIR first on its path.

It is the one-set case of ``measure_case_sets([CaseSet(...), ...], engine_spec)``: several
case sets, each with its own options (``repeat``, ``count``, ``tower``, ``engine_options``
and, for tests only, planted ``faults``), measured by ONE worker start (importing an engine
costs seconds), one list of records per set. The worker builds the adapter anew for each
set, so no option of one set reaches another (``suite.worker``).

The worker always imports *this* vlmpath (a directory holding it alone goes on the path
after the engine's), so two engines, or two commits of one engine, are measured by one and
the same suite, and the engine's own packages (torch first of all) come from its own
environment: the directory vlmpath is installed in never goes on the path (for a
non-editable install it is the host's site-packages). Records come back as ``CaseRecord``
objects (``suite.record.read_records``); a case the worker did not report (it crashed: that
set's rest and every later set) is a failed record naming the worker's exit status and the
last line of its stderr; a set the worker refused (``worker.REFUSED``: an engine option the
engine does not declare, or its release cannot honour) is its one line as a ``VlmpathError``
in that set's place (``measure_cases`` raises it: exit 2). ``engine_options``: the values of
the engine entry's options (``engines.engine_options``: a plain mapping, handed to the
adapter untouched and written into every record). ``json_path`` writes them as JSON Lines,
atomically.

``CaseSet.faults`` (``engines.adapter_common``'s plant text) is a test hook, as
``VLMPATH_ENGINE_FAULT`` is: only a Python caller sets it (no CLI option, configuration
or artifact maps to it; ``measure_cases`` has none), and it reaches that set's adapter alone.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.core.option_enums import Tower
from vlmpath.engines.base import EngineSpec
from vlmpath.suite.bench_env import BenchEnv
from vlmpath.suite.record import CaseRecord, read_records, write_records
from vlmpath.suite.worker import REFUSED, REFUSED_RC, SET_LINE, case_to_dict, error_text, failed_record

#: Which vision tower an engine case runs: ours (the seeded transformers tower, the default)
#: or the engine's own (its adapter's ``engine_tower``: the engine's own Qwen2.5-VL).
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


@dataclass(frozen=True)
class CaseSet:
    """Cases measured together with one set of options (see the module docstring)."""

    cases: tuple
    repeat: int = 3
    count: bool = True
    tower: Tower = Tower.OURS
    engine_options: Mapping[str, str] = field(default_factory=dict)  # name -> value (engines.engine_options)
    faults: str | None = None  # tests only: the plants of this set's adapter (adapter_common)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cases", tuple(self.cases))
        object.__setattr__(self, "engine_options", dict(self.engine_options or {}))
        if self.repeat < 1:
            raise VlmpathError(f"repeat must be at least 1, got {self.repeat}")

    def job(self) -> dict:
        """This set as the worker's job reads it (its ``out`` added by ``_run_worker``)."""
        return {"cases": [case_to_dict(c) for c in self.cases], "repeat": self.repeat, "count": self.count,
                "tower": self.tower, "engine_options": dict(self.engine_options), "faults": self.faults}

    def not_in_process(self) -> str | None:
        """Why the reference (in this process) cannot measure this set, or None."""
        if self.tower != "ours":
            return "--tower engine runs an engine's own vision tower: name an engine (--engine NAME==X)"
        if self.engine_options:  # the reference declares none: one line naming an engine that does
            from vlmpath.core.errors import EngineOptionError
            from vlmpath.engines.engine_options import resolve

            try:
                resolve(None, self.engine_options)
            except EngineOptionError as exc:
                return str(exc)
        if self.faults is not None:
            return "planted faults go into an engine's adapter (a test hook): name an engine"
        return None


#: What ``measure_case_sets`` gives for each set: its records, or the refusal of that set.
SetResult = list[CaseRecord] | VlmpathError


def _run_reference(sets: Sequence[CaseSet], device: str | None, weights: str | None,
                   threads: int | None = None) -> list[SetResult]:
    from vlmpath.suite.measure import Session, measure_case

    session = Session(device or "cpu", weights)  # one per call: the sets share built encoders
    results: list[SetResult] = []
    for cs in sets:
        why = cs.not_in_process()
        if why:
            results.append(VlmpathError(why))
            continue
        out = []
        for case in cs.cases:
            try:
                out.append(measure_case(case, session, repeat=cs.repeat, count=cs.count, threads=threads))
            except VlmpathError:
                raise  # bad input (e.g. degenerate golden rows) stops the run, as before
            except Exception as exc:
                out.append(failed_record(case, error_text(exc), "reference", device=str(session.device)))
        results.append(out)
    return results


def _run_worker(sets: Sequence[CaseSet], spec: EngineSpec, python: str, device: str | None,
                weights: str | None, threads: int | None = None) -> list[SetResult]:
    env = worker_env(spec)
    # One hash seed: the counted pass's bytecodes may not depend on set and dict order of strings.
    env.setdefault("PYTHONHASHSEED", "0")
    with tempfile.TemporaryDirectory(prefix="vlmpath-worker-") as tmp:
        outs = [Path(tmp) / f"records-{i}.jsonl" for i in range(len(sets))]
        job = {"engine": spec.label, "device": device or "cpu", "weights": weights, "threads": threads,
               "sets": [dict(cs.job(), out=str(out)) for cs, out in zip(sets, outs)]}
        proc = subprocess.Popen([python, "-m", "vlmpath.suite.worker"], text=True, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        tail: list[str] = []
        refused: dict[int, str] = {}  # set index -> its refusal
        current = 0  # the set the worker said it started last (``SET_LINE``)
        for line in proc.stderr:  # the worker's progress, passed on; its last lines kept
            if line.startswith(SET_LINE):
                n = line[len(SET_LINE):].split(" ", 1)[0]
                if n.isdigit() and 1 <= int(n) <= len(sets):
                    current = int(n) - 1
            if line.startswith(REFUSED):  # said once, by the CLI (below)
                refused[current] = line[len(REFUSED):].strip()[:400]
                continue
            sys.stderr.write(line)
            if line.strip():
                tail = (tail + [line.rstrip()])[-20:]
        proc.wait()
        got = [read_records(out, f"engine worker records ({python})") if out.exists() else [] for out in outs]
    why = (f"engine worker ({python}) exited with {proc.returncode} before this case: "
           f"{tail[-1] if tail else 'no message'}")
    results: list[SetResult] = []
    for i, (cs, records) in enumerate(zip(sets, got)):
        if proc.returncode == REFUSED_RC and i in refused:  # without that exit status: a crash
            results.append(VlmpathError(refused[i]))
            continue
        records = records[:len(cs.cases)]
        records += [failed_record(c, why, spec.label, device=device or "cpu") for c in cs.cases[len(records):]]
        results.append(records)
    return results


def measure_case_sets(sets: Sequence[CaseSet], engine_spec: EngineSpec | str | None = None, *,
                      device: str | None = None, weights: str | None = None, python: str | None = None,
                      home: str | None = None, threads: int | None = None) -> list[SetResult]:
    """Measure every set with the engine in one process (see the module docstring); returns,
    per set in order, one record per case, or the ``VlmpathError`` that refused that set.
    ``threads``: torch's CPU threads while measuring (``vlmpath.measure.pinning``), recorded."""
    # A label arrives only from a benchmark module (VLMPATH_ENGINE, its process boundary; any
    # side's benchmarks pass the variable's text): everything else hands a parsed spec.
    spec = engine_spec if isinstance(engine_spec, EngineSpec) else EngineSpec.parse(engine_spec)
    if not sets:
        return []  # no worker started for nothing
    if spec.in_process:
        return _run_reference(sets, device, weights, threads)
    return _run_worker(sets, spec, engine_python(spec, python, home), device, weights, threads)


def measure_cases(cases: Sequence, engine_spec: EngineSpec | str | None = None, *, repeat: int = 3,
                  json_path: str | os.PathLike | None = None, count: bool = True, device: str | None = None,
                  weights: str | None = None, python: str | None = None, home: str | None = None,
                  threads: int | None = None, tower: Tower = Tower.OURS,
                  engine_options: Mapping[str, str] | None = None) -> list[CaseRecord]:
    """Measure ``cases`` with the engine (one ``CaseSet``); returns one record per case, in
    order; a refusal raises its ``VlmpathError``."""
    spec = engine_spec if isinstance(engine_spec, EngineSpec) else EngineSpec.parse(engine_spec)
    (records,) = measure_case_sets([CaseSet(cases, repeat, count, tower, engine_options or {})], spec, device=device,
                                   weights=weights, python=python, home=home, threads=threads)
    if isinstance(records, VlmpathError):
        raise records
    if json_path is not None:
        write_records(json_path, records)
    return records
