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

from vlmpath.core.errors import VlmpathError

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
        from vlmpath.measure.platform import probe
        plat = probe().to_dict()
        print(json.dumps(plat, indent=2, sort_keys=True) if a.json
              else "\n".join(f"{k:>20}: {v}" for k, v in sorted(plat.items())))
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
    p.add_argument("--dry-run", action="store_true", help="validate and print; no token, no request")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.ci import github

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
            print(f"dry run: would create or update the comment marked {marker} on "
                  f"{a.repo}#{a.pr} via {github.resolve_api_url()} ({len(body)} characters):")
            print(body)
            return 0
        res = github.upsert_comment(a.repo, a.pr, text, marker=marker)
        print(f"{res.action} comment {res.html_url}")
        return 0

    p.set_defaults(func=run)


# --- compare ---------------------------------------------------------------------------
@_command
def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="compare base and head results; exit 1 on a regression",
        description="Reads asv results (and/or pytest-benchmark JSON) for two commits, prints "
        "a table, optionally writes the PR-comment markdown and a JSON report.",
    )
    p.add_argument("base", help="base commit (full sha or unique 7+ digit prefix)")
    p.add_argument("head", help="head commit (full sha or unique 7+ digit prefix)")
    p.add_argument("--results", default=None, help="asv results dir (default .asv/results)")
    p.add_argument("--pytest-json", nargs=2, metavar=("BASE_JSON", "HEAD_JSON"),
                   help="pytest-benchmark --benchmark-json files for base and head")
    p.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    p.add_argument("--markdown", default=None, help="write the PR comment body here")
    p.add_argument("--json", default=None, help="write the full comparison as JSON here")
    p.add_argument("--chart-url", default=None, help="link to a chart artifact in the comment")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even with regressions")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.compare import results
        from vlmpath.compare import verdict as compare
        from vlmpath.render import comment as render

        cfg = compare.load_thresholds(a.config)
        # asv results are read unless only pytest-benchmark JSON was asked for.
        use_asv = a.pytest_json is None or a.results is not None
        runs = []
        for i, commit in enumerate((a.base, a.head)):
            run_ = results.load_asv(a.results or ".asv/results", commit) if use_asv else None
            if a.pytest_json is not None:
                pb = results.load_pytest_benchmark(a.pytest_json[i])
                run_ = pb if run_ is None else results.merge_runs(run_, pb)
            runs.append(run_)
        report = compare.compare(runs[0], runs[1], cfg)
        print(render.render_terminal(report), end="")
        if a.markdown:
            results.write_text_atomic(a.markdown, render.render_markdown(report, chart_url=a.chart_url))
        if a.json:
            results.write_text_atomic(a.json, render.render_json(report))
        return report.exit_code(fail_on_regression=not a.no_fail)

    p.set_defaults(func=run)

# --- measure, engine ---------------------------------------------------------------------
def _engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default=None, metavar="SPEC",
                   help="reference (default) or sglang==X (after `vlmpath engine install sglang==X`)")
    p.add_argument("--engine-src", default=None, metavar="DIR",
                   help="an engine source tree put first on the path (an sglang checkout's python/)")
    p.add_argument("--engine-python", default=None, metavar="PY",
                   help="interpreter for --engine-src (default: newest engine env, else this python)")
    p.add_argument("--engine-home", default=None, metavar="DIR", help="engine envs dir (VLMPATH_ENGINE_HOME)")


@_command
def _add_engine(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("engine", help="install or list cached engine environments (sglang releases)")
    esub = p.add_subparsers(dest="engine_command", required=True)
    inst = esub.add_parser("install", help="build (or reuse) the engine environment of a release")
    inst.add_argument("spec", help="a release, e.g. sglang==0.5.23")
    lst = esub.add_parser("list", help="installed engine environments")
    for q in (inst, lst):
        q.add_argument("--home", default=None, metavar="DIR", help="engine envs dir (default VLMPATH_ENGINE_HOME "
                       "or ~/.cache/vlmpath/engines)")
    from vlmpath.ci.engine_cmd import run_engine

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
    p.add_argument("--pipeline", action="append", choices=["default", "legacy"],
                   help="a named pipeline instead of per-stage choices (repeatable)")
    p.add_argument("--scale", default="tiny", choices=["tiny", "full"])
    p.add_argument("--repeat", type=int, default=3, help="timed passes per case (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="torch device (default: cuda:0 if available, else cpu)")
    p.add_argument("--weights", default=None, metavar="DIR", help="local Qwen2.5-VL safetensors directory")
    p.add_argument("--no-syncs", action="store_true", help="skip the sync-counting pass")
    p.add_argument("--json", metavar="FILE", help="write one JSON record per case (JSON Lines)")
    _engine_options(p)

    from vlmpath.ci.engine_cmd import run_measure

    p.set_defaults(func=run_measure)


# --- profile ---------------------------------------------------------------------------
@_command
def _add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="re-run one routine case under torch.profiler: Chrome trace + top operators")
    p.add_argument("case", help="PATH:VARIANT/PRESET, e.g. embed:default/many_small_images, encode:batched/video")
    p.add_argument("--engine", default="reference", help="routine to profile (default: reference)")
    p.add_argument("--scale", default="tiny", choices=["tiny", "full"])
    p.add_argument("--passes", type=int, default=2, help="profiled passes after one warm-up (default 2)")
    p.add_argument("--top", type=int, default=15, help="operators to print (default 15)")
    p.add_argument("--out", default="profile-out", help="directory for the trace and ops JSON")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.suite.profile import run_command
        print(run_command(a.case, engine=a.engine, scale=a.scale, passes=a.passes, out_dir=a.out, top=a.top))
        return 0

    p.set_defaults(func=run)


# --- report ----------------------------------------------------------------------------
@_command
def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="draw the charts (per path, CUDA vs ROCm, history, PR) from recorded results",
        description="Reads asv results only (never measures). Charts go to OUT/charts/ as PNG "
        "(history and PR also as SVG) with a charts.json manifest; anything a reader must know "
        "is written in the chart and printed here as a warning.",
    )
    p.add_argument("--results", default=".asv/results", help="asv results dir (default .asv/results)")
    p.add_argument("--out", default="reports", help="output dir (default reports/)")
    p.add_argument("--base", default=None, help="base commit for the PR chart (with --head)")
    p.add_argument("--head", default=None, help="head commit: the commit the per-path charts show")
    p.add_argument("--comparison", default=None, metavar="FILE.json",
                   help="a `vlmpath compare --json` file: PR chart and regression marks")
    p.add_argument("--history", type=int, default=50, metavar="N",
                   help="commits shown in the history charts (default 50, newest)")
    p.add_argument("--html", default=None, metavar="DIR",
                   help="also add the charts page to this published asv html dir")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.render.report import write_report

        if a.history < 1:
            raise VlmpathError(f"--history must be at least 1, got {a.history}")
        out = write_report(a.results, a.out, base=a.base, head=a.head,
                           comparison=a.comparison, history_limit=a.history)
        for w in out.warnings:
            print(f"vlmpath report: warning: {w}", file=sys.stderr)
        for c in out.charts:
            print("  ".join(str(out.out_dir / f) for f in c.files))
        if a.html:
            from vlmpath.render.dashboard import write_dashboard

            print(write_dashboard(a.html, a.out))
        return 0

    p.set_defaults(func=run)


# --- ci --------------------------------------------------------------------------------
@_command
def _add_ci(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ci", help="pull-request checks: benchmark base vs head, merge machines")
    ci = p.add_subparsers(dest="ci_command", required=True)

    pr = ci.add_parser(
        "pr", help="benchmark merge-base(BASE, HEAD) and HEAD on this machine and compare",
        description="Checks both commits out into temporary git worktrees, runs the suite for "
        "each (head's benchmark files, each side's src/ via ASV_PYTHONPATH), and writes "
        "comment.md, comparison.json, summary.txt, run.json and results/ into --out. "
        "Exit 1 on a regression (unless --no-fail), 2 on bad input.",
    )
    pr.add_argument("--base", required=True, help="base ref or sha (its merge-base with HEAD is measured)")
    pr.add_argument("--head", required=True, help="head ref or sha")
    pr.add_argument("--repo", default=".", help="git checkout (default: current directory)")
    pr.add_argument("--machine", default=None, help="asv machine name (default: VLMPATH_MACHINE or probed)")
    pr.add_argument("--bench", default=None, metavar="REGEX", help="only benchmarks matching REGEX")
    pr.add_argument("--quick", action="store_true", help="one pass per benchmark (smoke test)")
    pr.add_argument("--scale", default=None, choices=["tiny", "full"],
                    help="workload scale passed to `vlmpath run` (default: its default, tiny)")
    pr.add_argument("--no-charts", action="store_true", help="skip drawing the PR charts")
    pr.add_argument("--out", default="bench-out", help="output directory (default bench-out)")
    pr.add_argument("--results-dir", default=None,
                    help="asv results directory kept across runs (default VLMPATH_RESULTS_DIR or .asv/results)")
    pr.add_argument("--rerun-base", action="store_true", help="measure the base even if results exist")
    pr.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    pr.add_argument("--no-fail", action="store_true", help="exit 0 even with regressions")
    from vlmpath.ci import engine_pr  # --engine-src REPO: two commits of an engine (sglang) instead
    from vlmpath.ci import pr as ci_flow
    engine_pr.add_arguments(pr)  # its flags are declared beside the flow they feed

    def run_pr(a: argparse.Namespace) -> int:
        try:
            res = engine_pr.run_from_args(a) if a.engine_src else ci_flow.run_pr(
                a.base, a.head, out_dir=a.out, repo=a.repo, machine=a.machine, bench=a.bench, quick=a.quick,
                results_dir=a.results_dir, rerun_base=a.rerun_base, fail_on_regression=not a.no_fail,
                thresholds=a.config, scale=a.scale, charts=not a.no_charts)
        except VlmpathError as exc:
            ci_flow.write_error(a.out, f"vlmpath ci pr: {exc}")
            raise
        print((res.out_dir / ci_flow.SUMMARY_FILE).read_text(encoding="utf-8"), end="")
        return res.exit_code

    pr.set_defaults(func=run_pr)

    merge = ci.add_parser(
        "merge", help="merge every machine's `ci pr` artifact into one comparison and comment",
        description="ARTIFACTS holds one directory per machine (as actions/download-artifact "
        "writes them). Writes comment.md, comparison.json, summary.txt, pr-number and the "
        "merged results/ into --out. Artifact contents are validated (untrusted).",
    )
    merge.add_argument("artifacts", help="directory of downloaded artifacts")
    merge.add_argument("--out", default="bench-merged", help="output directory (default bench-merged)")
    merge.add_argument("--head-sha", default=None, help="fail unless the artifacts measured this head")
    merge.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    merge.add_argument("--fail", action="store_true", help="exit 1 on a regression (default: report only)")

    def run_merge(a: argparse.Namespace) -> int:
        from vlmpath.ci import merge as ci_merge
        from vlmpath.ci import pr as ci_flow

        res = ci_merge.merge_artifacts(a.artifacts, a.out, head_sha=a.head_sha,
                                       fail_on_regression=a.fail, thresholds=a.config)
        print((res.out_dir / ci_flow.SUMMARY_FILE).read_text(encoding="utf-8"), end="")
        return res.exit_code

    merge.set_defaults(func=run_merge)


# --- run -------------------------------------------------------------------------------
@_command
def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the asv suite for one commit, publish the dashboard, write a summary",
        description="Runs asv in the existing environment for HEAD (or --set-commit-hash) on this "
        "machine; see vlmpath/run.py for how the benchmarks import the commit under test.",
    )
    p.add_argument("--quick", action="store_true", help="each benchmark once (smoke run; results saved)")
    p.add_argument("--bench", "-b", default=None, metavar="REGEX",
                   help="only benchmarks whose 'module.Class.method(params)' matches")
    p.add_argument("--scale", default="tiny", choices=["tiny", "full"], help="full needs a GPU")
    p.add_argument("--machine", default=None, help="asv machine name (default: VLMPATH_MACHINE or probed)")
    p.add_argument("--results-dir", default=None, help="asv results dir (default .asv/results)")
    p.add_argument("--html-dir", default=None, help="published dashboard dir (default .asv/html)")
    p.add_argument("--reports-dir", default=None, help="summary dir (default reports/out)")
    p.add_argument("--set-commit-hash", default=None, metavar="SHA", help="commit to file results under (default HEAD)")
    p.add_argument("--allow-dirty", action="store_true", help="run even with uncommitted changes")
    p.add_argument("--repo", default=".", help="the checkout with asv.conf.json and benchmarks/ (default .)")
    p.add_argument("--python", default=None, help="interpreter the benchmarks run in (default: this one)")
    p.add_argument("--package-src", default=None, metavar="DIR",
                   help="directory put first on the benchmarks' path (default <repo>/src; '' = installed vlmpath)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra variable for the benchmarks")
    p.add_argument("--launch-method", default="auto", choices=["auto", "spawn", "forkserver"],
                   help="auto: forkserver on CPU, spawn on GPU")
    p.add_argument("--no-publish", action="store_true", help="skip `asv publish`")
    p.add_argument("--strict", action="store_true", help="exit 1 unless every selected benchmark succeeded")
    _engine_options(p)

    def run(a: argparse.Namespace) -> int:
        from vlmpath.ci.run import RunInterrupted, RunOptions, run as run_suite  # noqa: I001

        extra = {}
        for kv in a.env:
            key, sep, value = kv.partition("=")
            if not sep or not key:
                raise VlmpathError(f"--env {kv!r} is not KEY=VALUE")
            extra[key] = value
        if a.engine_home:
            extra["VLMPATH_ENGINE_HOME"] = a.engine_home
        engine = f"sglang@src:{a.engine_src}" if a.engine_src else a.engine
        opts = RunOptions(repo=a.repo, quick=a.quick, bench=a.bench, scale=a.scale, machine=a.machine,
                          engine=engine, engine_python=a.engine_python, results_dir=a.results_dir,
                          html_dir=a.html_dir, reports_dir=a.reports_dir,
                          set_commit_hash=a.set_commit_hash, allow_dirty=a.allow_dirty, python=a.python,
                          package_src=a.package_src, launch_method=a.launch_method,
                          publish=not a.no_publish, extra_env=extra)
        try:
            outcome = run_suite(opts)
        except RunInterrupted as exc:
            print(f"vlmpath run: interrupted; summary (marked interrupted): {exc.outcome.summary_paths[0]}",
                  file=sys.stderr)
            return 130
        print(f"summary: {', '.join(str(x) for x in outcome.summary_paths)}")
        if outcome.html_dir is not None:
            print(f"dashboard: {outcome.html_dir}/index.html (vlmpath serve --html-dir {outcome.html_dir})")
        failed = outcome.status in ("failed", "interrupted")
        return 1 if failed or (a.strict and outcome.status != "complete") else 0

    p.set_defaults(func=run)


# --- serve -----------------------------------------------------------------------------
@_command
def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the published asv dashboard over HTTP")
    p.add_argument("--html-dir", default=".asv/html", help="dashboard dir (default .asv/html)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.ci.serve import make_server

        server = make_server(a.html_dir, a.port, a.bind)
        host, port = server.server_address[:2]
        print(f"serving {a.html_dir} at http://{host}:{port}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        finally:
            server.server_close()
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
