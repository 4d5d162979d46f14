"""Where does one routine case spend its time, operator by operator?

``profile_case`` re-runs a routine case (``cases.RoutineCase``: ``encode:<strategy>/<preset>``
or ``embed:<pipeline>/<preset>``) under ``torch.profiler`` (CPU activity, plus CUDA when a
CUDA or ROCm device is present: HIP builds report through the same activity), after one
untimed warm-up pass, and writes:

- a Chrome-trace JSON (open it in https://ui.perfetto.dev or chrome://tracing);
- an operator table (``ops`` JSON: name, calls, self CPU and self device microseconds per
  operator), which ``vlmpath.compare.profile_diff`` diffs between base and head.

This file is also a script (``python .../suite/profile.py JOB_JSON``, the job written by ``pr.profile``):
the PR flow runs it with each side's ``src/`` first on ``PYTHONPATH`` so that the routine is
that commit's code. It therefore imports only names every commit of the package has
(``suite.cases.RoutineCase``, ``suite.measure.Session``/``prepare``,
``engines.reference.EmbedRoutine``), and only inside functions.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass

OPS_SCHEMA = 1
#: What `vlmpath profile` accepts as --engine; the engine adapters are routines too, but only
#: the reference routine exists here today.
ENGINES = ("reference",)


@dataclass(frozen=True)
class OpRow:
    """One operator's totals over the profiled passes (microseconds)."""

    name: str
    calls: int
    self_cpu_us: float
    self_device_us: float

    @property
    def self_us(self) -> float:
        return self.self_cpu_us + self.self_device_us


def case_parts(text: str) -> tuple[str, str, str]:
    """``embed:default/many_small_images`` -> ``("embed", "default", "many_small_images")``;
    a text of another form is one line (torch-free: the CLI refuses it before torch loads)."""
    from vlmpath.core.errors import VlmpathError

    path, _, rest = text.partition(":")
    variant, _, preset = rest.partition("/")
    if path not in ("encode", "embed") or not variant or not preset:
        raise VlmpathError(f"case {text!r}: write PATH:VARIANT/PRESET, e.g. embed:default/many_small_images "
                           "or encode:batched/video")
    return path, variant, preset


def parse_case(text: str):
    """``embed:default/many_small_images`` -> ``RoutineCase`` (the suite's case label)."""
    parts = case_parts(text)
    from vlmpath.suite.cases import RoutineCase  # imports torch: after the form is judged

    return RoutineCase(*parts)


def check_options(engine: str, passes: int, top: int, out_dir: str = ".") -> None:
    """``vlmpath profile``'s other values, each refused in one line (torch-free: the CLI
    checks them before the profiler's imports)."""
    from vlmpath.core.errors import UnknownNameError, VlmpathError

    if engine not in ENGINES:
        raise UnknownNameError("engine", engine, ENGINES)
    if passes < 1:
        raise VlmpathError(f"--passes must be at least 1, got {passes}")
    if top < 1:
        raise VlmpathError(f"--top must be at least 1 (operators printed), got {top}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise VlmpathError(f"--out {out_dir}: a file is in the way; give a directory for the trace and ops JSON")


def _device() -> str:
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def _activities(device: str):
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])


def _op_rows(prof) -> list[OpRow]:
    rows = []
    for evt in prof.key_averages():
        device_us = getattr(evt, "self_device_time_total", None)
        if device_us is None:  # older torch
            device_us = getattr(evt, "self_cuda_time_total", 0.0)
        rows.append(OpRow(str(evt.key), int(evt.count), float(evt.self_cpu_time_total), float(device_us or 0.0)))
    return sorted(rows, key=lambda r: -r.self_us)


def profile_case(case, *, trace_path: str, scale: str = "tiny", passes: int = 2,
                 device: str | None = None, session=None) -> list[OpRow]:
    """Profile ``passes`` passes of the case's schedule; write the Chrome trace to
    ``trace_path`` and return the operator rows (largest self time first)."""
    import torch
    from torch.profiler import profile

    from vlmpath.engines.reference import EmbedRoutine
    from vlmpath.suite.measure import Session, prepare

    device = device or _device()
    session = session or Session(device)
    pipe = case.pipeline()
    prep = prepare(case.preset, pipe.hash, scale, session)

    def one_pass() -> None:
        routine = EmbedRoutine(prep.workload, prep.encoder, pipe, prep.table)
        for step in prep.workload.steps:
            routine.run_step(step)
        if session.device.type == "cuda":
            torch.cuda.synchronize(session.device)

    one_pass()  # warm-up: first-call costs (allocator, kernel selection) are not the routine's
    with profile(activities=_activities(str(session.device))) as prof:
        for _ in range(max(1, passes)):
            one_pass()
    os.makedirs(os.path.dirname(os.path.abspath(trace_path)), exist_ok=True)
    prof.export_chrome_trace(trace_path)
    return _op_rows(prof)


def write_ops(path: str, case_label: str, rows: list[OpRow], passes: int) -> None:
    """The operator table as JSON, written atomically (a temp file, then a rename)."""
    data = {"schema": OPS_SCHEMA, "case": case_label, "passes": passes, "ops": [asdict(r) for r in rows]}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def top_table(rows: list[OpRow], top: int = 15) -> str:
    """The top operators by self time, as aligned text."""
    lines = [f"{'operator':<48} {'calls':>7} {'self cpu ms':>12} {'self dev ms':>12}"]
    for r in rows[:top]:
        lines.append(f"{r.name[:48]:<48} {r.calls:>7} {r.self_cpu_us / 1e3:>12.3f} {r.self_device_us / 1e3:>12.3f}")
    return "\n".join(lines)


def run_command(case_text: str, *, engine: str = "reference", scale: str = "tiny", passes: int = 2,
                out_dir: str = "reports/profile", top: int = 15, device: str | None = None) -> str:
    """``vlmpath profile``: profile the case, write ``<out>/<case>.trace.json`` and
    ``<case>.ops.json``, and return the report (top operators by self time)."""
    check_options(engine, passes, top, out_dir)
    case = parse_case(case_text)
    case.pipeline()  # an unknown strategy or pipeline fails here, naming the choices
    stem = os.path.join(out_dir, case.label.replace(":", "-").replace("/", "-"))
    rows = profile_case(case, trace_path=f"{stem}.trace.json", scale=scale, passes=passes, device=device)
    write_ops(f"{stem}.ops.json", case.label, rows, passes)
    return (f"{case.label}: {passes} pass(es) under torch.profiler on {device or _device()} ({engine})\n"
            f"trace: {stem}.trace.json (open in https://ui.perfetto.dev)\nops:   {stem}.ops.json\n\n"
            + top_table(rows, top))


def main(argv: list[str] | None = None) -> int:
    """The script entry the PR flow runs per side (see the module docstring): one JSON job
    (``case``, ``trace``, ``ops``, optional ``scale`` and ``passes``) as the only argument,
    written by ``pr.profile.run_profile_subprocess``."""
    args = sys.argv[1:] if argv is None else argv
    job = json.loads(args[0])
    passes = int(job.get("passes", 2))
    case = parse_case(job["case"])
    rows = profile_case(case, trace_path=job["trace"], scale=job.get("scale", "tiny"), passes=passes)
    write_ops(job["ops"], case.label, rows, passes)
    return 0


if __name__ == "__main__":  # run as a file by the PR flow, against either side's package
    sys.exit(main())
