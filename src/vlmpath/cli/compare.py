"""``vlmpath compare BASE HEAD``: what changed between two commits' results on this machine?

The user's own comparison (asv results and/or pytest-benchmark JSON), judged by
``compare.verdict`` with the thresholds and accepted regressions given; the PR check's
verdict is ``pr.judge``'s, not this command's.
"""

from __future__ import annotations

import argparse
import os


def add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="compare base and head results; exit 1 on a regression, 3 if incomplete",
        description="Reads asv results (and/or pytest-benchmark JSON) for two commits, prints "
        "a table, optionally writes the PR-comment markdown and a JSON report.",
    )
    p.add_argument("base", help="base: a sha (7+ digit prefix) or any git revision (HEAD~1, main)")
    p.add_argument("head", help="head: a sha (7+ digit prefix) or any git revision (HEAD)")
    p.add_argument("--repo", default=".", help="git checkout that resolves revisions (default .)")
    p.add_argument("--results", default=None, help="asv results dir (default .asv/results)")
    p.add_argument("--pytest-json", nargs=2, metavar=("BASE_JSON", "HEAD_JSON"),
                   help="pytest-benchmark --benchmark-json files for base and head")
    p.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    p.add_argument("--markdown", default=None, help="write the PR comment body here")
    p.add_argument("--json", default=None, help="write the full comparison as JSON here")
    p.add_argument("--chart-url", default=None, help="link to a chart artifact in the comment")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even with regressions")
    p.add_argument("--accepted", default=None, metavar="FILE",
                   help="accepted regressions (default: REPO/benchmarks/accepted.yaml when it exists; "
                   "its commit entries only: a compare knows no PR, so pr entries never match)")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.core.git import sha_or_revision
        from vlmpath.core.validate import check_output_files

        check_output_files(("--markdown", a.markdown), ("--json", a.json))  # before any reading
        # asv results are read unless only pytest-benchmark JSON was asked for.
        use_asv = a.pytest_json is None or a.results is not None
        # Revisions resolved before the comparison's imports: a wrong name is refused at once.
        revs = [sha_or_revision(a.repo, r) for r in (a.base, a.head)] if use_asv else [a.base, a.head]
        from vlmpath.compare import accepted
        from vlmpath.compare.asv_results import load_asv
        from vlmpath.compare.pytest_results import load_pytest_benchmark
        from vlmpath.compare.records import merge_runs
        from vlmpath.compare.thresholds import load_thresholds
        from vlmpath.compare.verdict import compare
        from vlmpath.core.atomic import write_text as write_text_atomic
        from vlmpath.render import comment as render

        cfg = load_thresholds(a.config)
        runs = []
        for i, commit in enumerate(revs):
            run_ = load_asv(a.results or ".asv/results", commit) if use_asv else None
            if a.pytest_json is not None:
                pb = load_pytest_benchmark(a.pytest_json[i])
                run_ = pb if run_ is None else merge_runs(run_, pb)
            runs.append(run_)
        # The user's own results: their run-info files may say quick (speaks only for plain
        # tracks with no samples; compare.spread.indicative). ci merge never reads it so.
        report = compare(runs[0], runs[1], cfg, quick=any(m.quick for r in runs if r for m in r.machines))
        report = accepted.apply(report, accepted.load(a.accepted or os.path.join(a.repo, accepted.ACCEPTED_FILE)))
        print(render.render_terminal(report), end="")
        if a.markdown:
            write_text_atomic(a.markdown, render.render_markdown(report, chart_url=a.chart_url))
        if a.json:
            write_text_atomic(a.json, render.render_json(report))
        return report.exit_code(fail_on_regression=not a.no_fail)

    p.set_defaults(func=run)
