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


# --- comment ---------------------------------------------------------------------------
@_command
def _add_comment(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "comment",
        help="create or update the one sticky benchmark comment on a pull request",
        description="Token from GITHUB_TOKEN (never a flag: flags show in process lists); "
        "API root from GITHUB_API_URL (default https://api.github.com).",
    )
    p.add_argument("--repo", required=True, help="owner/name, e.g. sgl-project/sglang")
    p.add_argument("--pr", required=True, type=int, help="pull request number")
    p.add_argument("--body-file", required=True, help="markdown file to post ('-' = stdin)")
    p.add_argument("--marker", default=None, help="hidden marker that identifies our comment")
    p.add_argument(
        "--dry-run", action="store_true", help="validate and print; no token, no request"
    )

    def run(a: argparse.Namespace) -> int:
        from . import github

        marker = a.marker or github.DEFAULT_MARKER
        if a.body_file == "-":
            text = sys.stdin.read()
        else:
            try:
                with open(a.body_file, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise VlmpathError(
                    f"cannot read --body-file {a.body_file!r} ({exc.__class__.__name__}): "
                    "pass the markdown report written by `vlmpath report`"
                ) from None
        if a.dry_run:
            github.parse_repo(a.repo)
            if a.pr <= 0:
                raise VlmpathError(f"--pr {a.pr} is not a positive pull request number")
            body = github.prepare_body(text, marker)
            print(
                f"dry run: would create or update the comment marked {marker} on "
                f"{a.repo}#{a.pr} via {github.resolve_api_url()} ({len(body)} characters):"
            )
            print(body)
            return 0
        res = github.upsert_comment(a.repo, a.pr, text, marker=marker)
        print(f"{res.action} comment {res.html_url}")
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
