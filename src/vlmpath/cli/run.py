"""Which arguments do ``vlmpath ci``, ``vlmpath run`` and ``vlmpath serve`` take?

One module of the ``cli`` package (the only place that parses arguments); ``vlmpath.cli``
registers these commands like its own.
Handlers import their library lazily, as ``vlmpath.cli`` does, so ``vlmpath --help``
stays cheap. ``VlmpathError`` from a handler is printed by ``vlmpath.cli.main``.
"""

from __future__ import annotations

import argparse
import os
import sys

from vlmpath.cli.ci import add_ci_commands, engine_options
from vlmpath.core.errors import VlmpathError
from vlmpath.core.machine_names import MachineName
from vlmpath.cli.options import engine_option_flags, engine_spec, given_engine_options, launch_kinds, scale_option
from vlmpath.core.scales import DEFAULT_SCALE
from vlmpath.core.option_enums import Counter, Tower
from vlmpath.selfcheck.ir_cases import DEFAULT_COUNTER


def add_ci(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ci", help="pull-request checks: benchmark base vs head, merge machines")
    ci = p.add_subparsers(dest="ci_command", required=True)

    pr = ci.add_parser(
        "pr", help="benchmark merge-base(BASE, HEAD) and HEAD on this machine and compare",
        description="Checks both commits out into temporary git worktrees, runs the suite for "
        "each (base's benchmark files and thresholds, each side's src/ via ASV_PYTHONPATH), and writes "
        "comment.md, comparison.json, summary.txt, run.json and results/ into --out. "
        "Exit 1 on a regression (unless --no-fail), 2 on bad input, 3 if most cases were not judged.",
    )
    pr.add_argument("--base", required=True, help="base ref or sha (its merge-base with HEAD is measured)")
    pr.add_argument("--head", required=True, help="head ref or sha")
    pr.add_argument("--repo", default=".", help="git checkout (default: current directory)")
    pr.add_argument("--machine", default=None, help="asv machine name (default: VLMPATH_MACHINE or probed)")
    pr.add_argument("--bench", default=None, metavar="REGEX", help="only benchmarks matching REGEX")
    pr.add_argument("--quick", action="store_true", help="one pass per benchmark (smoke test)")
    pr.add_argument("--interleave", type=int, default=0, metavar="N",
                    help="run base and head alternately, N rounds (fresh process each), judge timings on pairs")
    pr.add_argument("--counts", "--instructions", dest="instructions", action="store_true",
                    help="also count one pass of each routine case (tower replayed) and each tower on both "
                    "sides, exactly, and gate the counts (CPU runners only; --counter says how)")
    pr.add_argument("--counter", default=DEFAULT_COUNTER, type=Counter.parse, choices=list(Counter),
                    help="with --counts: ops (default): Python bytecodes and aten elements, natively, seconds "
                    "per side; callgrind: CPU instructions under Valgrind, ~7 CPU-minutes per side")
    pr.add_argument("--instructions-bench", default=None, metavar="REGEX",
                    help="with --instructions: count only the routine cases matching REGEX (default: --bench's)")
    scale_option(pr, default=None,
                 help=f"workload scale passed to `vlmpath run` (default: its default, {DEFAULT_SCALE})")
    pr.add_argument("--no-charts", action="store_true", help="skip drawing the PR charts")
    pr.add_argument("--out", default="bench-out", help="output directory (default bench-out)")
    pr.add_argument("--results-dir", default=None,
                    help="asv results directory kept across runs (default VLMPATH_RESULTS_DIR or .asv/results)")
    pr.add_argument("--rerun-base", action="store_true", help="measure the base even if results exist")
    pr.add_argument("--trusted-results", default=None, help="trusted results store (read-only) to reuse a base from")
    pr.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    pr.add_argument("--no-fail", action="store_true", help="exit 0 even with regressions")
    pr.add_argument("--pr", type=int, default=None, metavar="N",
                    help="the pull request's number: accepted.yaml entries scoped to pr N apply (no other PR's)")
    pr.add_argument("--shard", default=None, metavar="K/N",
                    help="measure only shard K of N of the cases, on both sides (ci merge joins the shards)")
    pr.add_argument("--serve", default=None, metavar="MODEL_DIR",
                    help="also serve each side's tree with a real server of this model (interleaved rounds) "
                    "and judge its throughput and output agreement in the same comment (vlmpath.pr.serve)")
    pr.add_argument("--serve-launch", default="transformers", choices=launch_kinds(),
                    help="with --serve: the server (default transformers serve; an engine's own on a GPU box)")
    pr.add_argument("--serve-rounds", type=int, default=6, metavar="N",
                    help="with --serve: interleaved rounds per side (default 6: a full paired verdict)")
    pr.add_argument("--serve-python", default=None, metavar="PY",
                    help="with --serve: the server's interpreter (an engine env's for an engine's server)")
    pr.add_argument("--serve-device", default="cpu", help="with --serve: transformers serve's device (default cpu)")
    from vlmpath.pr import flow as ci_flow
    from vlmpath.pr import outputs as pr_outputs
    _engine_src_arguments(pr)  # --engine-src REPO: two commits of an engine instead

    def run_pr(a: argparse.Namespace) -> int:
        from vlmpath.core.interrupt import interruptible

        try:
            with interruptible():  # SIGTERM/SIGINT: children ended, worktrees and temp dirs removed
                return _run_pr(a)
        except KeyboardInterrupt as exc:
            from pathlib import Path

            Path(a.out).mkdir(parents=True, exist_ok=True)
            pr_outputs.write_error(a.out, f"vlmpath ci pr: interrupted ({exc or 'SIGINT'}) before it finished: "
                                   "its children were ended and its worktrees removed; nothing was compared")
            raise

    def _run_pr(a: argparse.Namespace) -> int:
        from vlmpath.pr.engine import run_engine_pr
        from vlmpath.pr.options import PrOptions
        from vlmpath.runner.shards import Shard

        try:  # inside: a bad --shard is written into --out's error file, as any refusal of ci pr
            serve = None
            if a.serve and a.engine_src:
                raise VlmpathError("--serve serves vlmpath's own sides: leave it out with --engine-src (serve an "
                                   "engine's two trees with `vlmpath serve-pair --base-pythonpath A "
                                   "--head-pythonpath B`)")
            if a.serve:
                from vlmpath.pr.serve import ServeOptions

                serve = ServeOptions(a.serve, a.serve_launch, a.serve_rounds, a.serve_python, a.serve_device)
            opts = PrOptions(
                a.base, a.head, out_dir=a.out, repo=a.repo, bench=a.bench, quick=a.quick,
                machine=MachineName.parse(a.machine) if a.machine else None,
                results_dir=a.results_dir, rerun_base=a.rerun_base, fail_on_regression=not a.no_fail,
                thresholds=a.config, scale=a.scale, charts=not a.no_charts, interleave=a.interleave,
                trusted_results=a.trusted_results, instructions=a.instructions,
                instructions_bench=a.instructions_bench, counter=a.counter,
                shard=Shard.parse(a.shard) if a.shard else None, pr=a.pr, engine_src=a.engine_src,
                engine=a.engine, engine_subdir=a.engine_subdir, engine_python=a.engine_python,
                workloads=a.workload, repeat=a.repeat, tower=a.tower, engine_options=given_engine_options(a),
                serve=serve)
            res = run_engine_pr(opts) if opts.engine_src else ci_flow.run_pr(opts)
        except VlmpathError as exc:
            pr_outputs.write_error(a.out, f"vlmpath ci pr: {exc}")
            raise
        print((res.out_dir / pr_outputs.SUMMARY_FILE).read_text(encoding="utf-8"), end="")
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
    merge.add_argument("--accepted", default=None, metavar="FILE",
                       help="the PR head's benchmarks/accepted.yaml (its proposal: see --base-accepted)")
    merge.add_argument("--base-accepted", default=None, metavar="FILE",
                       help="the base branch's benchmarks/accepted.yaml: only --accepted entries also here "
                       "accept; the PR's own await review and fail (without it: none of --accepted is trusted)")
    merge.add_argument("--grant", default=None, metavar="FILE",
                       help="`vlmpath ci label-grant`'s answer: a maintainer's label accepts the PR's own entries")

    def run_merge(a: argparse.Namespace) -> int:
        from vlmpath.pr import merge as ci_merge

        res = ci_merge.merge_artifacts(a.artifacts, a.out, head_sha=a.head_sha,
                                       fail_on_regression=a.fail, thresholds=a.config, accepted=a.accepted,
                                       base_accepted=a.base_accepted, grant=a.grant)
        from vlmpath.render.job_log import print_untrusted  # the privileged comment job's log

        print_untrusted((res.out_dir / pr_outputs.SUMMARY_FILE).read_text(encoding="utf-8"))
        return res.exit_code

    merge.set_defaults(func=run_merge)
    add_ci_commands(ci)  # ci alert (vlmpath.cli.ci: this module is at its size limit)


def _serve_model(model: str | None) -> str | None:
    """``--serve DIR`` as an absolute model directory (the benchmarks run elsewhere); one line if not one."""
    if model is None:
        return None
    from pathlib import Path

    if not (Path(model) / "config.json").is_file():
        raise VlmpathError(f"--serve {model}: not a model directory (no config.json); write one with "
                           "`vlmpath serve-bench --write-tiny-model DIR` or pass a local checkpoint")
    return str(Path(model).resolve())


# --- run -------------------------------------------------------------------------------
def add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the asv suite for one commit, publish the dashboard, write a summary",
        description="Runs asv in the existing environment for HEAD (or --set-commit-hash) on this "
        "machine; see vlmpath/runner/run.py for how the benchmarks import the commit under test.",
    )
    p.add_argument("--quick", action="store_true", help="each benchmark once (smoke run; results saved)")
    p.add_argument("--bench", "-b", default=None, metavar="REGEX",
                   help="only benchmarks whose 'module.Class.method(params)' matches")
    scale_option(p)
    p.add_argument("--machine", default=None, type=MachineName.parse,
                   help="asv machine name (default: VLMPATH_MACHINE or probed)")
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
    from vlmpath.runner.launch import LAUNCH_METHODS

    p.add_argument("--launch-method", default="auto", choices=LAUNCH_METHODS,
                   help="auto: forkserver on CPU, spawn on GPU")
    p.add_argument("--no-publish", action="store_true", help="skip `asv publish`")
    p.add_argument("--strict", action="store_true", help="exit 1 unless every selected benchmark succeeded")
    p.add_argument("--table", action="store_true",
                   help="also print every case's row (the summary files always have them)")
    p.add_argument("--trusted", action="store_true", help="mark the results a trusted baseline (main workflow only)")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="run only shard K of N of the selection (balanced by the last trusted run's costs)")
    p.add_argument("--serve", default=None, metavar="MODEL_DIR",
                   help="also run the opt-in serve benchmarks (bench_serve.Serve: a real server of this model; "
                   "else skipped unless the machine sets VLMPATH_SERVE_MODEL)")
    engine_options(p)

    def run(a: argparse.Namespace) -> int:
        from vlmpath.runner.options import RunInterrupted, RunOptions  # noqa: I001
        from vlmpath.runner.run import run as run_suite
        from vlmpath.runner.shards import Shard

        extra = {}
        for kv in a.env:
            key, sep, value = kv.partition("=")
            if not sep or not key:
                raise VlmpathError(f"--env {kv!r} is not KEY=VALUE")
            extra[key] = value
        if a.engine_home:
            extra["VLMPATH_ENGINE_HOME"] = a.engine_home
        opts = RunOptions(repo=a.repo, quick=a.quick, bench=a.bench, scale=a.scale, machine=a.machine,
                          engine=engine_spec(a), engine_python=a.engine_python, results_dir=a.results_dir,
                          html_dir=a.html_dir, reports_dir=a.reports_dir,
                          set_commit_hash=a.set_commit_hash, allow_dirty=a.allow_dirty, python=a.python,
                          package_src=a.package_src, launch_method=a.launch_method,
                          publish=not a.no_publish, extra_env=extra, trusted=a.trusted,
                          shard=Shard.parse(a.shard) if a.shard else None, serve_model=_serve_model(a.serve))
        from vlmpath.core.interrupt import interruptible

        try:
            with interruptible():  # SIGTERM/SIGINT end asv and its benchmark processes too
                outcome = run_suite(opts)
        except RunInterrupted as exc:
            print(f"vlmpath run: interrupted; nothing it measured was kept (asv keeps a commit's results when its "
                  f"run ends); earlier results stay as they were; note: {exc.outcome.summary_paths[0]}",
                  file=sys.stderr)
            return exc.outcome.asv_returncode if exc.outcome.asv_returncode > 128 else 130
        _where_to_look(outcome, a.table)
        failed = outcome.status in ("failed", "interrupted")
        return 1 if failed or (a.strict and outcome.status != "complete") else 0

    p.set_defaults(func=run)


def _where_to_look(outcome, table: bool) -> None:
    """The last lines of ``vlmpath run``: the full table (with ``--table``, else where it
    is), then the landing page and how to open it."""
    from pathlib import Path

    from vlmpath.render.summary import load_summary, render_table

    md = next((p for p in outcome.summary_paths if Path(p).suffix == ".md"), outcome.summary_paths[-1])
    if table:
        print(render_table(load_summary(outcome.summary_paths[0])).rstrip())
        print(f"full table: above, and in {md}")
    else:
        print(f"full table: {md} (or vlmpath run --table)")
    if outcome.html_dir is None:
        return
    page = Path(outcome.html_dir) / "vlmpath" / "index.html"
    serve = "vlmpath serve" + ("" if Path(outcome.html_dir).resolve() == Path(".asv/html").resolve()
                               else f" --html-dir {outcome.html_dir}")
    if page.is_file():
        print(f"look here: {page}  ({serve}, then open http://127.0.0.1:8080/)")
    else:
        print(f"look here: {outcome.html_dir}/index.html  ({serve}, then open http://127.0.0.1:8080/)")


# --- serve -----------------------------------------------------------------------------
def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the published asv dashboard over HTTP")
    # The images set VLMPATH_HTML_DIR (the results volume), as `vlmpath run` there publishes to it.
    p.add_argument("--html-dir", default=os.environ.get("VLMPATH_HTML_DIR") or ".asv/html",
                   help="dashboard dir (default VLMPATH_HTML_DIR or .asv/html)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.core.validate import check_int
        from vlmpath.runner.serve import make_server

        check_int(a.port, "--port", lo=0, hi=65535, fix="pick a free TCP port, e.g. --port 8080 (0: any free one)")

        server = make_server(a.html_dir, a.port, a.bind)
        host, port = server.server_address[:2]
        print(f"serving {a.html_dir} at http://{host}:{port}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        finally:
            server.server_close()
        return 0

    p.set_defaults(func=run)


def _engine_src_arguments(pr) -> None:
    """The ``--engine-src`` flags of ``vlmpath ci pr`` (``pr`` is its argparse parser)."""
    from vlmpath.pr.engine import DEFAULT_WORKLOADS

    pr.add_argument("--engine-src", default=None, metavar="REPO",
                    help="a git repository of an ENGINE (a clone of one the registry knows): measure its BASE and "
                    "HEAD commits with this vlmpath instead of vlmpath's own commits")
    pr.add_argument("--engine", default=None, metavar="NAME",
                    help="--engine-src: which engine the repository is (default: the one whose package layout "
                    "it fits)")
    pr.add_argument("--engine-subdir", default=None, metavar="DIR",
                    help="--engine-src: directory of the checkout put first on the path "
                    "(default: where the engine's entry says it keeps its package)")
    pr.add_argument("--engine-python", default=None, metavar="PY",
                    help="--engine-src: interpreter of the engine environment that measures")
    pr.add_argument("--workload", action="append", metavar="NAME",
                    help=f"--engine-src: workload preset (repeatable; default {', '.join(DEFAULT_WORKLOADS)})")
    pr.add_argument("--repeat", type=int, default=3, help="--engine-src: timed passes per case (default 3)")
    pr.add_argument("--tower", default=Tower.OURS, type=Tower.parse, choices=list(Tower),
                    help="--engine-src: the vision tower: ours (seeded transformers, default) or the engine's own "
                    "(its adapter's engine_tower: a PR to it is measured too)")
    engine_option_flags(pr, scope="--engine-src, both sides: ")

