"""How does ``vlmpath --help`` show the names a user may pass, and an unknown option its fix?

``parse(parser, argv)``: argparse hands an option no subcommand knows up to the top
parser, which printed all 19 subcommands' usage and no hint. Here the subcommand that was
being parsed answers instead: its own usage, and the closest of its options ("did you
mean --quick?"), as names already get one.

``HelpParser`` adds the preset, strategy and pipeline names (``suite.inputs.names_for_help``)
to the help of ``vlmpath`` and ``vlmpath measure``, read from the registries only when
help is shown: they import torch, which other commands may not need.
"""

from __future__ import annotations

import argparse


class HelpParser(argparse.ArgumentParser):
    def format_help(self) -> str:
        if self.epilog is None and self.prog.split()[-1] in ("vlmpath", "measure"):
            from vlmpath.suite.inputs import names_for_help

            self.formatter_class = argparse.RawDescriptionHelpFormatter  # keep the name lines
            self.epilog = names_for_help()
        return super().format_help()


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The deepest subcommand parser ``args`` went through (``vlmpath engine install``)."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, sub.dest, None) if sub is not None and sub.dest else None
        if sub is None or name not in sub.choices:
            return parser
        parser = sub.choices[name]


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]


def unknown_text(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """One line for what ``parser`` did not take: each option with its closest match."""
    import difflib

    said = []
    for i, x in enumerate(extras):
        if not x.startswith("-") and i and extras[i - 1].startswith("-") and "=" not in extras[i - 1]:
            continue  # the unknown option's value, most likely: the option is the mistake
        if x.startswith("-"):
            name = x.split("=", 1)[0]
            near = difflib.get_close_matches(name, _options(parser), n=1, cutoff=0.6)
            said.append(f"unknown option {name}" + (f" (did you mean {near[0]}?)" if near else ""))
        else:
            said.append(f"unexpected argument {x!r}")
    return "; ".join(said) + f": `{parser.prog} --help` lists what it takes"


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with an unknown option answered by its subcommand."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        _chosen(parser, args).error(unknown_text(_chosen(parser, args), extras))
    return args


def not_set_up(exc: ModuleNotFoundError) -> str:
    """The one line for a third-party package ci/setup.sh installs that is missing; a
    module of vlmpath's own missing is a bug: re-raised as it is."""
    import sys

    if not exc.name or exc.name.startswith("vlmpath"):
        raise exc
    return (f"{exc.name} is not installed in this Python ({sys.executable}): run ci/setup.sh first "
            "(it makes ./.venv), then use .venv/bin/vlmpath")
