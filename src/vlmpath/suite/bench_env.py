"""What does a benchmark process measure: which scale, quick or not, on which machine, with which engine?

asv runs every benchmark in a process of its own, so ``vlmpath run``'s options cannot reach
the benchmarks as values: they cross that one process boundary as environment variables.
``BenchEnv`` is that handover as one typed record, written by ``BenchEnv.apply`` (only
``runner.launch`` calls it) and read by ``BenchEnv.read`` (``suite.cases``,
``suite.engine_run`` and, through them, the benchmark modules). Everywhere else in one
process the options travel as values.

The variable names stay the ones older commits read (``VLMPATH_SCALE``, ...): in a PR
comparison the base side's ``src/`` may predate this module and must still see its scale.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from vlmpath.core.scales import DEFAULT_SCALE, Scale

SCALE_ENV = "VLMPATH_SCALE"
QUICK_ENV = "VLMPATH_QUICK"  # set: measurements inside ``track_`` benchmarks use one pass
MACHINE_ENV = "VLMPATH_MACHINE"  # the benchmarks' own probe names the run's machine
ENGINE_ENV = "VLMPATH_ENGINE"  # the engine spec label the asv suite measures with
ENGINE_PYTHON_ENV = "VLMPATH_ENGINE_PYTHON"  # that engine environment's interpreter
#: The model directory the opt-in serve benchmarks (``bench_serve.Serve``) serve: ``vlmpath
#: run --serve DIR``, or a machine's own setting (an unset value keeps the caller's).
SERVE_MODEL_ENV = "VLMPATH_SERVE_MODEL"
#: Kept from the caller's environment when this record leaves them unset: machine settings.
MACHINE_SETTINGS = ("VLMPATH_MACHINE", SERVE_MODEL_ENV)


@dataclass(frozen=True)
class BenchEnv:
    scale: Scale = DEFAULT_SCALE
    quick: bool = False
    machine: str | None = None
    engine: str | None = None  # None: the reference routine
    engine_python: str | None = None
    serve_model: str | None = None  # None: the serve benchmarks are skipped (opt-in)

    def apply(self, env: MutableMapping[str, str]) -> MutableMapping[str, str]:
        """Write this record into ``env`` (the benchmark processes' environment), replacing
        whatever an earlier value of each field left there."""
        for key, value in ((SCALE_ENV, self.scale), (QUICK_ENV, "1" if self.quick else None),
                           (MACHINE_ENV, self.machine), (ENGINE_ENV, self.engine),
                           (ENGINE_PYTHON_ENV, self.engine_python), (SERVE_MODEL_ENV, self.serve_model)):
            if value:
                env[key] = value
            elif key not in MACHINE_SETTINGS:  # an unset machine keeps the caller's own pin
                env.pop(key, None)
        return env

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> BenchEnv:
        """The record from ``env`` (default: this process's); an unknown scale is an error
        naming the choices. This is where ``VLMPATH_SCALE`` is parsed (``Scale.parse``): the
        one boundary besides the CLI's ``--scale``."""
        env = os.environ if env is None else env
        scale = Scale.parse(env.get(SCALE_ENV) or DEFAULT_SCALE, given=f"{SCALE_ENV}=")
        return cls(scale=scale, quick=env.get(QUICK_ENV, "") not in ("", "0"),
                   machine=env.get(MACHINE_ENV) or None, engine=(env.get(ENGINE_ENV) or "").strip() or None,
                   engine_python=env.get(ENGINE_PYTHON_ENV) or None,
                   serve_model=(env.get(SERVE_MODEL_ENV) or "").strip() or None)
