"""What can a person or CI ask vlmpath to do from the shell?

The only module that parses arguments. Each subcommand has one ``_add_<name>`` function
that declares its arguments and sets ``func`` to a handler; handlers translate the
parsed namespace into a call of a library function and return the exit status.
``VlmpathError`` (bad input, also from a typed option's parse: ``cli.options``) is
printed as one line and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from vlmpath.cli.ci import add_bisect, engine_options
from vlmpath.cli.compare import add_compare
from vlmpath.cli.help import not_set_up, parse
from vlmpath.cli.instructions import add_command as add_instructions
from vlmpath.cli.run import add_ci, add_run, add_serve
from vlmpath.cli.serve_bench import add_serve_bench, add_serve_compare, add_serve_pair
from vlmpath.cli.shards import add_plan, add_shards
from vlmpath.cli.smoke import add_smoke
from vlmpath.cli.options import engine_option_flags, scale_option
from vlmpath.core.console import tolerate
from vlmpath.core.errors import VlmpathError
from vlmpath.core.option_enums import Counter, Tower

# Each entry adds one subcommand to the parser (see the _add_* functions below).
# Filled in the order of ``vlmpath --help``; ci, run, serve and bisect (and ci alert) are
# declared in vlmpath.cli.run / cli.ci and appended below.
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
        from vlmpath.measure.platform import probe
        plat = probe().to_dict()
        print(json.dumps(plat, indent=2, sort_keys=True) if a.json
              else "\n".join(f"{k:>20}: {v}" for k, v in sorted(plat.items())))
        return 0

    p.set_defaults(func=run)


# --- comment ---------------------------------------------------------------------------
@_command
def _add_comment(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("comment", help="create or update the one sticky benchmark comment on a pull request",
                       description="Token from GITHUB_TOKEN (never a flag: flags show in process lists); "
                       "API root from GITHUB_API_URL (default https://api.github.com).")
    p.add_argument("--repo", required=True, help="owner/name, e.g. octo-org/engine")
    p.add_argument("--pr", required=True, type=int, help="pull request number")
    p.add_argument("--body-file", required=True, help="markdown file to post ('-' = stdin)")
    p.add_argument("--marker", default=None, help="hidden marker that identifies our comment")
    p.add_argument("--dry-run", action="store_true", help="validate and print; no token, no request")
    p.add_argument("--author", default=None, help="login whose comment is ours (default: the token's user)")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.github import comment as github
        from vlmpath.github.rest import resolve_api_url
        from vlmpath.render.escape import log_line
        from vlmpath.render.job_log import print_untrusted

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
                    "pass the markdown written by `vlmpath compare --markdown FILE` "
                    "(or comment.md in the --out folder of `vlmpath ci pr` / `vlmpath ci merge`)"
                ) from None
        if a.dry_run:
            github.parse_repo(a.repo)
            if a.pr <= 0:
                raise VlmpathError(f"--pr {a.pr} is not a positive pull request number")
            body = github.prepare_body(text, marker)
            print_untrusted(f"dry run: would create or update the comment marked {marker} on "
                            f"{a.repo}#{a.pr} via {resolve_api_url()} ({len(body)} characters):\n{body}")
            return 0
        res = github.upsert_comment(a.repo, a.pr, text, marker=marker, author=a.author)
        print(log_line(f"{res.action} comment {res.html_url}"))  # GitHub's own answer
        return 0

    p.set_defaults(func=run)


# --- compare (cli.compare) -------------------------------------------------------------
_command(add_compare)


# --- measure, engine ---------------------------------------------------------------------
@_command
def _add_engine(sub: argparse._SubParsersAction) -> None:
    from vlmpath.engines import registry  # the help names every registered engine

    names = registry.names()
    p = sub.add_parser("engine", help=f"install, list or sweep engine environments ({', '.join(names)} releases)")
    esub = p.add_subparsers(dest="engine_command", required=True)
    inst = esub.add_parser("install", help="build (or reuse, or repair) the engine environment of a release")
    inst.add_argument("spec", help=f"a release NAME==X of {', '.join(names)}, e.g. {registry.get(names[0]).example}")
    lst = esub.add_parser("list", help="installed engine environments")
    for q in (inst, lst):
        q.add_argument("--home", default=None, metavar="DIR", help="engine envs dir (default VLMPATH_ENGINE_HOME "
                       "or ~/.cache/vlmpath/engines)")
    from vlmpath.cli.engine import add_sweep_args, run_engine

    add_sweep_args(esub, names)

    p.set_defaults(func=run_engine)


@_command
def _add_measure(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("measure", help="run embedding-routine cases and print tok/s, accuracy, syncs")
    p.add_argument("--workload", action="append", metavar="NAME",
                   help="preset name or trace:PATH.jsonl (repeatable; default: every preset)")
    p.add_argument("--encode", action="append", metavar="NAME", help="encode strategy (repeatable)")
    p.add_argument("--inject", action="append", metavar="NAME", help="inject strategy (repeatable)")
    p.add_argument("--count", action="append", metavar="NAME", help="token-count strategy (repeatable)")
    p.add_argument("--hash", action="append", metavar="NAME", help="hash path (repeatable)")
    from vlmpath.engines.pipelines import NAMED_PIPELINES  # torch-free: the registry itself

    p.add_argument("--pipeline", action="append", choices=list(NAMED_PIPELINES),
                   help="a named pipeline instead of per-stage choices (repeatable)")
    scale_option(p)
    p.add_argument("--allow-cpu", action="store_true", help="run a GPU scale on a CPU anyway (refused otherwise)")
    p.add_argument("--repeat", type=int, default=3, help="timed passes per case (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="torch device (default: cuda:0 if available, else cpu)")
    p.add_argument("--weights", default=None, metavar="DIR", help="local Qwen2.5-VL safetensors directory")
    p.add_argument("--no-syncs", action="store_true", help="skip the sync-counting pass")
    p.add_argument("--json", metavar="FILE", help="write one JSON record per case (JSON Lines)")
    p.add_argument("--chart", metavar="FILE", help="draw every engine's cases side by side (.png or .svg)")
    p.add_argument("--tower", default=Tower.OURS, type=Tower.parse, choices=list(Tower),
                   help="with --engine: the vision tower: ours (seeded transformers, default) or the engine's "
                   "own (its adapter's engine_tower)")
    engine_option_flags(p, scope="with --engine NAME==X: ")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads (default: OMP_NUM_THREADS, else 1 on CPU, as `vlmpath run`)")
    engine_options(p, repeatable=True)

    from vlmpath.cli.engine import run_measure

    p.set_defaults(func=run_measure)


# --- profile ---------------------------------------------------------------------------
@_command
def _add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="re-run one routine case under torch.profiler: Chrome trace + top operators")
    p.add_argument("case", help="PATH:VARIANT/PRESET, e.g. embed:default/many_small_images, encode:batched/video")
    p.add_argument("--engine", default="reference", help="routine to profile (default: reference)")
    scale_option(p)
    p.add_argument("--passes", type=int, default=2, help="profiled passes after one warm-up (default 2)")
    p.add_argument("--top", type=int, default=15, help="operators to print (default 15)")
    p.add_argument("--out", default="reports/profile", help="trace and ops JSON dir (default reports/profile)")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.suite.profile import check_options, run_command  # the module is torch-free

        # Every value judged before the profiler's imports load torch (seconds).
        check_options(a.engine, a.passes, a.top, a.out)
        _check_case(a.case)
        print(run_command(a.case, engine=a.engine, scale=a.scale, passes=a.passes, out_dir=a.out, top=a.top))
        return 0

    p.set_defaults(func=run)


def _check_case(text: str) -> None:
    """``PATH:VARIANT/PRESET``: its form (``suite.profile.case_parts``) and its names
    (the registries: ``suite.inputs.check_choices``), all torch-free."""
    from vlmpath.core.errors import UnknownNameError
    from vlmpath.engines.pipelines import NAMED_PIPELINES
    from vlmpath.suite.inputs import check_choices
    from vlmpath.suite.profile import case_parts

    path, variant, preset = case_parts(text)
    if path == "encode":
        check_choices({"encode": [variant]}, None)
    elif path == "embed" and variant not in NAMED_PIPELINES:
        raise UnknownNameError("pipeline", variant, NAMED_PIPELINES)
    check_choices({}, [preset])


# --- trust -----------------------------------------------------------------------------
@_command
def _add_trust(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trust", help="measure the measuring: A/A false regressions and planted slowdowns caught")
    p.add_argument("--preset", default="video", help="workload preset of the routine case (default video)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--samples", type=int, default=16, help="timed passes per side and round (default 16)")
    p.add_argument("--band", type=float, action="append", help="CPU band(s) to judge with (repeatable; default: the CPU band in thresholds.yaml)")
    p.add_argument("--threads", type=int, default=None, metavar="N")
    p.add_argument("--instructions", "--counts", dest="instructions", type=int, default=0, metavar="ROUNDS",
                   help="rounds of the PR job's count gates (the routine with its tower replayed, the tower)")
    p.add_argument("--counter", default=Counter.OPS, type=Counter.parse, choices=list(Counter),
                   help="with --instructions: ops (default; native bytecodes and aten elements) or callgrind")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.selfcheck.trust import main_cli

        return main_cli(a)

    p.set_defaults(func=run)


# --- report ----------------------------------------------------------------------------
@_command
def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="draw the charts (per path, GPU vendors side by side, history, PR) from recorded results",
                       description="Reads asv results only (never measures). Charts go to OUT/charts/ as PNG "
                       "(history and PR also as SVG) with a charts.json manifest; anything a reader must know "
                       "is written in the chart and printed here as a warning.")
    p.add_argument("--results", default=".asv/results", help="asv results dir (default .asv/results)")
    p.add_argument("--out", default="reports", help="output dir (default reports/)")
    p.add_argument("--base", default=None,
                   help="base for the PR chart (with --head): a sha (7+ digits) or any git revision (HEAD~1, main)")
    p.add_argument("--head", default=None,
                   help="head: the commit the per-path charts show; a sha or any git revision (HEAD)")
    p.add_argument("--repo", default=".", help="git checkout that resolves revisions (default .)")
    p.add_argument("--comparison", default=None, metavar="FILE.json",
                   help="a `vlmpath compare --json` file: PR chart and regression marks")
    p.add_argument("--history", type=int, default=50, metavar="N",
                   help="commits shown in the history charts (default 50, newest)")
    p.add_argument("--config", default=None, help="thresholds YAML (as given to compare): history marks, directions")
    p.add_argument("--html", default=None, metavar="DIR",
                   help="also add the landing page (what the shown commit found, the charts) to this "
                   "published asv html dir, linked from asv's index")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.core.git import sha_or_revision

        if a.history < 1:
            raise VlmpathError(f"--history must be at least 1, got {a.history}")
        if (a.base is None) != (a.head is None):
            raise VlmpathError("pass both --base and --head (or neither)")
        if a.base is not None:  # revisions as `vlmpath compare` takes them, before the chart imports
            a.base, a.head = sha_or_revision(a.repo, a.base), sha_or_revision(a.repo, a.head)
        elif a.head is not None:
            a.head = sha_or_revision(a.repo, a.head)
        from vlmpath.compare.asv_results import load_asv
        from vlmpath.compare.thresholds import load_thresholds
        from vlmpath.compare.verdict import compare
        from vlmpath.render.report import write_report
        from vlmpath.render.report_data import check_results_dir, load_comparison

        thresholds = load_thresholds(a.config)
        report = load_comparison(a.comparison) if a.comparison else None
        if report is None and a.base is not None:  # judged here, as `vlmpath compare` judges: the charts never do
            check_results_dir(a.results)
            report = compare(load_asv(a.results, a.base), load_asv(a.results, a.head), thresholds)
        out = write_report(a.results, a.out, thresholds=thresholds, comparison=report, head=a.head,
                           history_limit=a.history)
        for w in out.warnings:
            print(f"vlmpath report: warning: {w}", file=sys.stderr)
        for c in out.charts:
            print("  ".join(str(out.out_dir / f) for f in c.files))
        if a.html:
            from vlmpath.render.dashboard import write_dashboard

            from vlmpath.render.landing import link_from_asv, show_single_points

            # The landing page of the shown commit (every machine), in front of asv's pages.
            print(write_dashboard(a.html, a.out, results_dir=a.results, commit=a.head))
            link_from_asv(a.html)
            show_single_points(a.html)
        return 0

    p.set_defaults(func=run)


# --- ci --------------------------------------------------------------------------------
_COMMANDS += [add_run, add_serve, add_ci, add_bisect, add_instructions, add_smoke, add_plan, add_shards,
              add_serve_bench, add_serve_pair, add_serve_compare]


def build_parser() -> argparse.ArgumentParser:
    from vlmpath import __version__
    from vlmpath.cli.help import HelpParser

    parser = HelpParser(prog="vlmpath",
                        description="Benchmarks for the multimodal embedding path of LLM inference engines.")
    parser.add_argument("--version", action="version", version=f"vlmpath {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=HelpParser)
    for add in _COMMANDS:
        add(sub)
    return parser


def _privileged(args: argparse.Namespace) -> bool:
    """The commands the write-token jobs run (bench-comment.yml, bench-main.yml): their
    logs are read by the Actions runner, so untrusted text is printed fenced."""
    return args.command == "comment" or (args.command == "ci" and getattr(args, "ci_command", None)
                                         in ("merge", "alert"))


def _say(args: argparse.Namespace, line: str) -> None:
    from vlmpath.render.escape import log_line  # a message can quote an artifact's names
    from vlmpath.render.job_log import print_untrusted

    if _privileged(args):
        print_untrusted(log_line(line), file=sys.stderr)  # one line, and fenced
    else:
        print(log_line(line), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    tolerate()  # an ASCII terminal prints "?" for "±", never a traceback (core.console)
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse(build_parser(), argv)
    except VlmpathError as exc:  # a typed option's own parse (cli.options): one line, exit 2
        from vlmpath.render.escape import log_line

        command = next((t for t in argv if not t.startswith("-")), "")
        print(log_line(f"vlmpath {command}: error: {exc}"), file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except VlmpathError as exc:
        _say(args, f"vlmpath {args.command}: error: {exc}")
        return 2
    except ModuleNotFoundError as exc:  # without set-up: one line (cli.help.not_set_up)
        _say(args, f"vlmpath {args.command}: error: {not_set_up(exc)}")
        return 2
    except KeyboardInterrupt as exc:  # core.interrupt.Interrupted carries SIGTERM's 143
        print(f"vlmpath {args.command}: interrupted", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    except OSError as exc:  # a full disk, a quota, a read-only output: one line, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        _say(args, f"vlmpath {args.command}: error: {exc.strerror or exc}{where}; free space or fix the "
             "permissions, then run again")
        return 2
    except Exception:  # a bug: in a privileged job its traceback can quote untrusted text
        if not _privileged(args):
            raise
        import traceback

        from vlmpath.render.job_log import print_untrusted

        print_untrusted(f"vlmpath {args.command}: internal error\n{traceback.format_exc()}", file=sys.stderr)
        return 2
