"""Which typed values do the CLI's stringly options become, and where are they parsed?

At the boundary, once. ``--scale`` becomes a ``core.scales.Scale`` (``scale_option``: an
argparse ``type``, so a bad one is refused while the arguments are parsed, before any handler
runs or torch is imported; ``--tower``, ``--counter`` and ``--machine`` are declared the same
way beside their commands, as ``core.option_enums.Tower``/``Counter`` and
``core.machine_names.MachineName``); ``--engine``/``--engine-src`` one
``engines.base.EngineSpec`` (``engine_spec``: two flags make one value, so in the handler);
``--shard`` a ``runner.shards.Shard`` (in the handler); ``--engine-option NAME=VALUE`` and an
engine option's own flag one mapping (``engine_option_flags``, ``given_engine_options``: built
from the registry's entries, checked against the chosen engine where it is known). The handlers
hand these values on in one options record (``runner.options.RunOptions``,
``pr.options.PrOptions``); nothing below parses them again. The other boundaries are where a
value crosses into a process as text: ``VLMPATH_SCALE`` (``suite.bench_env``),
``VLMPATH_MACHINE`` (``measure.platform``), an engine label handed to a benchmark or worker
process (``suite.engine_run``, ``suite.worker``).
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


class _OwnFlag(argparse.Action):
    """An engine option's flag of its own (``--ENGINE-NAME VALUE``): the same pair as
    ``--engine-option NAME=VALUE``, appended to the one list."""

    def __init__(self, option_strings, dest, option_name: str = "", **kw):
        super().__init__(option_strings, dest, **kw)
        self.option_name = option_name

    def __call__(self, parser, namespace, values, option_string=None):
        pairs = list(getattr(namespace, "engine_option", None) or [])
        setattr(namespace, "engine_option", pairs + [(self.option_name, values)])


def _choice(flag: str, choices: tuple[str, ...]):
    def parse(text: str) -> str:
        from vlmpath.core.errors import VlmpathError, did_you_mean

        if text not in choices:
            raise VlmpathError(f"{flag} {text!r}{did_you_mean(text, choices)}: choose one of {', '.join(choices)}")
        return text

    return parse


def engine_option_flags(p: argparse.ArgumentParser, scope: str = "") -> None:
    """``--engine-option NAME=VALUE`` (repeatable) and every registered engine's options that
    have a flag of their own (``--ENGINE-NAME VALUE``), all read from the registry: the
    values land in one list (``given_engine_options`` makes it a mapping); which engine's
    options they are is checked once the engine is known (``engines.engine_options.resolve``)."""
    from vlmpath.core.errors import VlmpathError
    from vlmpath.engines import registry
    from vlmpath.engines.engine_options import FLAG, own_flag, parse_assignment

    declared = []
    for name in registry.names():
        try:
            entry = registry.get(name)
        except VlmpathError:  # a broken plug-in says so where it is named, not in every command's parser
            continue
        declared += [(entry, o) for o in entry.options]
    listed = "; ".join(f"{e.name}: {o.name}={'|'.join(o.choices)}" for e, o in declared) or "none registered"
    p.add_argument(FLAG, dest="engine_option", action="append", default=[], metavar="NAME=VALUE",
                   type=parse_assignment, help=f"{scope}an option of the engine's own entry, handed to its adapter "
                   f"(repeatable; {listed})")
    for entry, o in declared:
        if o.own_flag:
            flag = own_flag(entry.name, o.name)
            p.add_argument(flag, action=_OwnFlag, option_name=o.name, dest=f"own_option_{entry.name}_{o.name}",
                           default=argparse.SUPPRESS, metavar=o.name.upper(), type=_choice(flag, o.choices),
                           help=f"{scope}the same as {FLAG} {o.name}=VALUE of engine {entry.name}: {o.help}")


def given_engine_options(a: argparse.Namespace) -> dict[str, str]:
    """The engine options the command line gave, as one mapping (``--engine-option``)."""
    from vlmpath.engines.engine_options import given

    return given(getattr(a, "engine_option", None))
