"""What does ``vlmpath ci pr`` take?

``PrOptions``: every flag of ``vlmpath ci pr`` as one record, built once by the CLI (as
``runner.options.RunOptions`` is for ``vlmpath run``), with the scale and shard as the
typed values the CLI parsed them into, and handed whole to the flow: ``pr.flow.run_pr``
for vlmpath's own commits, ``pr.engine.run_engine_pr`` with ``engine_src``. What a test
injects instead of the real world (a fake suite runner or measurer, an environment, a
profiler) stays a keyword of the flow: those are not options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vlmpath.core.errors import VlmpathError
from vlmpath.core.machine_names import MachineName
from vlmpath.core.option_enums import Counter, Tower
from vlmpath.core.scales import Scale
from vlmpath.runner.shards import Shard

if TYPE_CHECKING:
    from vlmpath.pr.serve import ServeOptions

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class PrOptions:
    """Everything ``vlmpath ci pr`` takes (see ``pr.flow.run_pr`` for what each one does)."""

    base: str
    head: str
    out_dir: PathLike = "bench-out"
    repo: PathLike = "."
    machine: MachineName | None = None         # default: VLMPATH_MACHINE or probed
    bench: str | None = None
    quick: bool = False
    results_dir: PathLike | None = None
    rerun_base: bool = False
    fail_on_regression: bool = True
    thresholds: PathLike | None = None
    scale: Scale | None = None                 # None: `vlmpath run`'s default (tiny)
    charts: bool = True
    trusted_results: PathLike | None = None
    interleave: int = 0
    instructions: bool = False
    instructions_bench: str | None = None
    counter: Counter = Counter.OPS
    accepted: PathLike | None = None
    shard: Shard | None = None
    pr: int | None = None
    # --engine-src REPO: two commits of an engine instead of vlmpath's own (pr.engine)
    engine_src: PathLike | None = None
    engine: str | None = None                  # the engine's registry name (None: found from the tree)
    engine_subdir: str | None = None
    engine_python: str | None = None
    workloads: Sequence[str] | None = None
    repeat: int = 3
    tower: Tower = Tower.OURS
    # --engine-option NAME=VALUE: the engine's options as given (checked against its entry
    # once the engine is known: engines.engine_options); handed on untouched
    engine_options: Mapping[str, str] = field(default_factory=dict)
    # --serve MODEL_DIR: each side's tree also served (pr.serve.ServeOptions, checked by the CLI)
    serve: ServeOptions | None = None

    def __post_init__(self) -> None:
        if self.engine_src and (self.instructions or self.shard or self.serve):
            raise VlmpathError("--instructions, --shard and --serve take vlmpath's own sides: leave them out "
                               "with --engine-src (serve an engine's two trees with `vlmpath serve-pair "
                               "--base-pythonpath A --head-pythonpath B`)")
        if self.engine_options and not self.engine_src:
            name, value = next(iter(self.engine_options.items()))
            raise VlmpathError(f"--engine-option {name}={value} goes to an engine's adapter: give --engine-src REPO "
                               "(vlmpath's own commits run its reference routine, which takes none)")

