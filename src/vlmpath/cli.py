"""What can a person or CI ask vlmpath to do from the shell?

The only module that parses arguments. Each subcommand has one ``_add_<name>`` function
that declares its arguments and sets ``func`` to a handler; handlers translate the
parsed namespace into a call of a library function and return the exit status.
``VlmpathError`` (bad input) is printed as one line and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .errors import VlmpathError

# Each entry adds one subcommand to the parser (see the _add_* functions below).
_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _command(add: Callable[[argparse._SubParsersAction], None]):
    _COMMANDS.append(add)
    return add


# --- info ------------------------------------------------------------------------------
@_command
def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print the platform fingerprint and machine name")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")

    def run(a: argparse.Namespace) -> int:
        import json

        from .platform import probe

        plat = probe()
        if a.json:
            print(json.dumps(plat.to_dict(), indent=2, sort_keys=True))
        else:
            for k, v in sorted(plat.to_dict().items()):
                print(f"{k:>20}: {v}")
        return 0

    p.set_defaults(func=run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vlmpath",
        description="Benchmarks for the multimodal embedding path of LLM inference engines.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except VlmpathError as exc:
        print(f"vlmpath {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"vlmpath {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
