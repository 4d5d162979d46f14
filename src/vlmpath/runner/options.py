"""What does ``vlmpath run`` take and what does it hand back?

``RunOptions`` (every flag of ``vlmpath run``; paths may be relative to ``repo``; the scale,
engine and shard as the typed values the CLI parsed them into, once),
``RunOutcome`` (what ran and where the summary went) and ``RunInterrupted`` (Ctrl-C during
``asv run``, carrying the interrupted run's outcome).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vlmpath.core.machine_names import MachineName
from vlmpath.core.scales import DEFAULT_SCALE, Scale
from vlmpath.engines.base import EngineSpec
from vlmpath.runner.shards import Shard


@dataclass(frozen=True)
class RunOptions:
    """Everything ``vlmpath run`` takes; paths may be relative to ``repo``."""

    repo: str = "."
    quick: bool = False
    bench: str | None = None
    scale: Scale = DEFAULT_SCALE
    machine: MachineName | None = None   # parsed by the CLI; None: VLMPATH_MACHINE or probed
    results_dir: str | None = None       # default: the config's (.asv/results)
    html_dir: str | None = None          # default: the config's (.asv/html)
    reports_dir: str | None = None       # default: <repo>/reports/out
    set_commit_hash: str | None = None   # default: HEAD of repo
    allow_dirty: bool = False
    python: str | None = None            # benchmark interpreter (default: this one)
    package_src: str | None = None       # None: <repo>/src if present; "": installed vlmpath
    launch_method: str = "auto"
    publish: bool = True
    trusted: bool = False                # stamp the results a trusted baseline (main workflow only)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    engine: EngineSpec | None = None     # parsed by the CLI (EngineSpec.parse); None: reference
    engine_python: str | None = None     # interpreter for an --engine-src tree
    shard: Shard | None = None           # run only this shard's part (vlmpath.runner.shards)
    serve_model: str | None = None       # the opt-in serve benchmarks' model dir (bench_serve)


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


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``asv run``; ``outcome`` has the (interrupted) summary's paths."""

    def __init__(self, outcome: RunOutcome):
        super().__init__("interrupted")
        self.outcome = outcome

