"""Which typed values do the CLI's stringly options become, and where are they parsed?

At the boundary, once. ``--scale`` becomes a ``core.scales.Scale`` (``scale_option``: an
argparse ``type``, so a bad one is refused while the arguments are parsed, before any
handler runs or torch is imported; ``--tower``, ``--counter`` and ``--machine`` are declared
the same way beside their commands, as ``core.option_enums.Tower``/``Counter`` and
``core.machine_names.MachineName``); ``--engine``/``--engine-src`` one
``engines.base.EngineSpec`` (``engine_spec``: two flags make one value, so in the handler);
``--shard`` a ``runner.shards.Shard`` (in the handler). The handlers hand these values on in
one options record (``runner.options.RunOptions``, ``pr.options.PrOptions``); nothing below
parses them again. The other boundaries are where a value crosses into a process as text:
``VLMPATH_SCALE`` (``suite.bench_env``), ``VLMPATH_MACHINE`` (``measure.platform``), an engine
label handed to a benchmark or worker process (``suite.engine_run``, ``suite.worker``).
"""

from __future__ import annotations

import argparse

from vlmpath.core.scales import DEFAULT_SCALE, Scale, scale_help


def scale_option(p: argparse.ArgumentParser, *, default: Scale | None = DEFAULT_SCALE,
                 help: str | None = None) -> None:
    """``--scale NAME`` as a ``Scale`` (``default`` None: the option is optional and the
    command's library decides). A wrong name is one line with a "did you mean"
    (``Scale.parse``; ``vlmpath.cli.main`` prints it)."""
    p.add_argument("--scale", default=default, type=Scale.parse, choices=list(Scale), help=help or scale_help())


def engine_spec(a: argparse.Namespace):
    """The ``EngineSpec`` of ``--engine`` with ``--engine-src``; None when neither was given
    (the reference routine, by default). ``vlmpath measure``'s repeatable ``--engine`` parses
    each one the same way (``cli.engine``)."""
    from vlmpath.engines.base import EngineSpec  # the registry, torch-free

    if not a.engine and not a.engine_src:
        return None
    return EngineSpec.parse(a.engine, src=a.engine_src)


def launch_kinds() -> list[str]:
    """``--launch`` / ``--serve-launch`` choices: transformers and every registered engine
    (``serving.launch.kinds``: read from the engine registry, never listed in the CLI)."""
    from vlmpath.serving.launch import kinds

    return list(kinds())
