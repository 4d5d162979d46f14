"""Which typed values do the CLI's stringly options become, and where are they parsed?

Here, once, at the boundary: ``--scale`` is a ``core.scales.Scale`` (an argparse ``type``,
so a bad one is refused while the arguments are parsed, before any handler runs or torch
is imported), ``--engine``/``--engine-src`` one ``engines.base.EngineSpec`` (``engine_spec``:
two flags make one value, so after parsing), ``--shard`` a ``runner.shards.Shard``. The
handlers hand these values on; nothing below the CLI parses them again. (The other
boundaries: ``VLMPATH_SCALE`` in ``suite.bench_env``, an engine label crossing into a
benchmark or worker process, and records read back from files.)
"""

from __future__ import annotations

import argparse

from vlmpath.core.scales import DEFAULT_SCALE, Scale, scale_help


def scale_option(p: argparse.ArgumentParser, *, default: Scale | None = DEFAULT_SCALE,
                 help: str | None = None) -> None:
    """``--scale NAME`` as a ``Scale`` (``default`` None: the option is optional and the
    command's library decides). A wrong name is one line with a "did you mean"
    (``Scale.parse``; ``vlmpath.cli.main`` prints it)."""
    p.add_argument("--scale", default=default, type=Scale.parse, choices=list(Scale), metavar="{" + ",".join(Scale) + "}",
                   help=help or scale_help())


def engine_spec(a: argparse.Namespace):
    """The ``EngineSpec`` of ``--engine`` with ``--engine-src``; None when neither was given
    (the reference routine, by default). ``vlmpath measure``'s repeatable ``--engine`` parses
    each one the same way (``cli.engine``)."""
    from vlmpath.engines.base import EngineSpec  # the registry, torch-free

    if not a.engine and not a.engine_src:
        return None
    return EngineSpec.parse(a.engine, src=a.engine_src)
