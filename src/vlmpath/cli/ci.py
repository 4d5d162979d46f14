"""Which arguments do the trusted-CI subcommands (``vlmpath bisect``, ``vlmpath ci alert``, ``vlmpath ci templates``) take?

One module of the ``cli`` package; ``vlmpath.cli`` registers them (``add_bisect`` into the
top-level subcommands, ``add_ci_commands`` into ``vlmpath ci``). Handlers import their library
lazily, as ``vlmpath.cli`` does, so ``vlmpath --help`` stays cheap.
"""

from __future__ import annotations

import argparse
import sys

from vlmpath.cli.options import scale_option
from vlmpath.core.machine_names import MachineName
from vlmpath.core.scales import DEFAULT_SCALE


def add_bisect(sub: argparse._SubParsersAction) -> None:
    """``vlmpath bisect``: the first commit in GOOD..BAD that regressed the selected cases."""
    p = sub.add_parser(
        "bisect", help="find the first commit between --good and --bad that regressed a benchmark",
        description="Binary search along the first-parent line. Each commit is measured like a side "
        "of `vlmpath ci pr` (a temporary worktree, the existing environment, --bad's suite), "
        "unless the results directory already has its selected cases. Prints the commit and the "
        "numbers on both sides. Exit 0 when found, 2 on bad input or when --bad did not regress.")
    p.add_argument("--good", required=True, help="a commit without the regression")
    p.add_argument("--bad", required=True, help="a later commit with it (first-parent descendant of --good)")
    p.add_argument("--bench", required=True, metavar="REGEX", help="the benchmark(s) that regressed")
    p.add_argument("--repo", default=".", help="git checkout (default: current directory)")
    p.add_argument("--machine", default=None, type=MachineName.parse,
                   help="asv machine name (default: VLMPATH_MACHINE or probed)")
    p.add_argument("--results-dir", default=None, help="asv results directory (reused; default .asv/results)")
    p.add_argument("--quick", action="store_true", help="one pass per benchmark")
    scale_option(p, default=None, help=f"workload scale (default {DEFAULT_SCALE})")
    p.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.pr import bisect
        from vlmpath.compare.thresholds import load_thresholds

        res = bisect.bisect(a.good, a.bad, a.bench, bisect.BisectOptions(
            repo=a.repo, machine=a.machine, results_dir=a.results_dir, quick=a.quick, scale=a.scale,
            thresholds=load_thresholds(a.config)))
        print(bisect.render(res), end="")
        return 0

    p.set_defaults(func=run)


def add_ci_commands(ci: argparse._SubParsersAction) -> None:
    """``vlmpath ci alert``: judge the newest main commit against history; sync the issues."""
    p = ci.add_parser(
        "alert", help="judge a main commit against a window of history; open/close regression issues",
        description="Compares COMMIT with the median of the previous --window commits with results "
        "on each machine (same thresholds as a PR). Each regressed case opens or updates one issue "
        "labelled benchmark-regression; a case back within the threshold of the issue's baseline "
        "closes it with a comment. Token from GITHUB_TOKEN; API root from GITHUB_API_URL.")
    p.add_argument("--results", required=True, help="asv results directory holding main's history")
    p.add_argument("--commit", required=True, help="the newest main commit (sha)")
    p.add_argument("--window", type=int, default=10, help="previous commits in the baseline (default 10)")
    p.add_argument("--repo", default=None, help="owner/name for the issues (omit: print only)")
    p.add_argument("--run-url", default="", help="link to the CI run")
    p.add_argument("--dashboard-url", default="", help="link to the dashboard")
    p.add_argument("--commit-url", default="", help="commit link template with {sha}")
    p.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    p.add_argument("--fail", action="store_true", help="exit 1 when the commit regressed a case")
    p.add_argument("--accepted", default="benchmarks/accepted.yaml", metavar="FILE",
                   help="accepted regressions: no issue for the commits it lists (default benchmarks/accepted.yaml; "
                   "pr entries never match on main)")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.compare import accepted
        from vlmpath.github import alert
        from vlmpath.compare.thresholds import load_thresholds
        from vlmpath.render.job_log import print_untrusted

        cfg = load_thresholds(a.config)
        entries = accepted.load(a.accepted)
        findings = alert.judge_latest(a.results, a.commit, window=a.window, thresholds=cfg)
        regs = [f for f in findings if f.regressed and alert.alert_hold.accepted_reason(f, entries) is None]
        unjudged = [f for f in findings if not f.judged]
        # This is the privileged job's log: every line quotes names from results, so each
        # block is printed fenced (render.job_log), each line through log_line.
        lines = [f"{a.commit[:8]}: {len(findings) - len(unjudged)} case(s) judged against history, "
                 f"{len(regs)} regressed, {len(unjudged)} not judged"]
        lines += [f"  not judged: {alert.clip(f.key, 160)}: {f.comparison.reason}" for f in unjudged[:20]]
        lines += [f"  {alert.issue_title(f)}: {alert.numbers_text(f.comparison)}" for f in regs]
        print_untrusted("\n".join(lines))
        if a.repo:
            links = alert.Links(a.run_url, a.dashboard_url, a.commit_url)
            res = alert.sync_issues(findings, a.repo, links, thresholds=cfg, accepted=entries)
            done = [f"  issue {word}: {alert.clip(k, 200)}"
                    for word, keys in (("opened", res.opened), ("updated", res.updated), ("closed", res.closed),
                                       ("held (accepted, or closed by a maintainer)", res.held)) for k in keys]
            if done:
                print_untrusted("\n".join(done))
        if len(findings) == len(unjudged):  # zero judged is never green
            print(f"{a.commit[:8]}: incomplete, nothing judged")
            return 3 if a.fail else 0
        return 1 if a.fail and regs else 0

    p.set_defaults(func=run)

    _add_label_grant(ci)
    _add_summary(ci)
    t = ci.add_parser("templates", help="render the engine CI workflow templates from their one source",
                      description="Fills ci/templates/source/*.yml.in for every engine into ci/templates/.")
    t.add_argument("--root", default=".", help="repository root (default .)")
    t.add_argument("--check", action="store_true", help="exit 1 if a rendered file is stale")
    t.add_argument("--write", action="store_true", help="write the rendered files")
    t.set_defaults(func=_templates)


def _add_summary(ci: argparse._SubParsersAction) -> None:
    """``vlmpath ci summary DIR``: the job summary of a ``ci pr`` output, escaped (pr.step_summary)."""
    p = ci.add_parser("summary", help="print the GitHub job summary of a `ci pr` output directory, escaped",
                      description="Prints comment.md (rendered, or escaped with --untrusted-comment) and "
                      "error.txt (always escaped) of DIR as Markdown for $GITHUB_STEP_SUMMARY.")
    p.add_argument("dir", help="the `ci pr --out` directory")
    p.add_argument("--untrusted-comment", action="store_true",
                   help="comment.md was written by another process (a container running PR code): escape it")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.pr.step_summary import step_summary

        print(step_summary(a.dir, comment_trusted=not a.untrusted_comment), end="")
        return 0

    p.set_defaults(func=run)


def _add_label_grant(ci: argparse._SubParsersAction) -> None:
    """``vlmpath ci label-grant``: did a maintainer accept the PR's own accepted.yaml entries?"""
    p = ci.add_parser(
        "label-grant", help="read who applied the acceptance label to a PR (privileged job; for ci merge --grant)",
        description="Asks the REST API whether a person with write, maintain or admin permission (not the "
        "PR's author) applied --label to the PR after --since, with the PR's head at --head-sha, and "
        "writes the answer to --out for `vlmpath ci merge --grant`. Token from GITHUB_TOKEN; API root "
        "from GITHUB_API_URL. Exit 0 whether or not it was granted (the file says), 2 on bad input.")
    p.add_argument("--repo", required=True, help="owner/name")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--pr", type=int, default=None, help="the pull request number")
    who.add_argument("--artifacts", default=None, metavar="DIR",
                     help="downloaded `ci pr` artifacts: the PR number they all name")
    p.add_argument("--head-sha", required=True, help="the measured head (the PR's head must still be it)")
    p.add_argument("--label", default=None, help="the acceptance label (default vlmpath-accept-regression)")
    p.add_argument("--since", default=None, metavar="TIME",
                   help="ISO 8601: a label applied before it (before the measured push) does not count")
    p.add_argument("--out", required=True, metavar="FILE", help="where the answer (JSON) goes")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.github import label_grant as lg
        from vlmpath.github.rest import make_client
        from vlmpath.render.escape import log_line

        from vlmpath.pr.merge import artifacts_pr

        pr = a.pr if a.artifacts is None else artifacts_pr(a.artifacts)
        since = lg.parse_time(a.since, "--since") if a.since else None
        g = lg.read_grant(make_client(None, None), a.repo, pr, head_sha=a.head_sha,
                          label=a.label or lg.ACCEPT_LABEL, since=since)
        lg.write_grant(a.out, g)
        print(log_line(f"PR #{pr}: {g.why}"))
        return 0

    p.set_defaults(func=run)


def _templates(a: argparse.Namespace) -> int:
    from pathlib import Path

    from vlmpath.render.ci_templates import OUT_DIR, render_all, stale

    root = Path(a.root)
    if a.write:
        for name, text in render_all(root).items():
            (root / OUT_DIR / name).write_text(text, encoding="utf-8")
    bad = stale(root)
    for name in bad:
        print(f"stale: {OUT_DIR / name} (run: vlmpath ci templates --write)", file=sys.stderr)
    return 1 if bad and a.check else 0


def engine_options(p: argparse.ArgumentParser, repeatable: bool = False) -> None:
    """``repeatable``: ``--engine`` may be given several times (``measure``: side by side)."""
    from vlmpath.engines import registry  # the help names every registered engine

    names = registry.names()
    p.add_argument("--engine", default=None, metavar="SPEC", action="append" if repeatable else "store",
                   help=f"reference (default) or NAME==X for an engine of {', '.join(names)} (after "
                   "`vlmpath engine install NAME==X`); with --engine-src, NAME says which engine the tree is"
                   + ("; repeatable: every engine's cases in one table (and --chart)" if repeatable else ""))
    p.add_argument("--engine-src", default=None, metavar="DIR",
                   help="an engine source tree put first on the path (the directory holding the engine's "
                   "package, e.g. an sglang checkout's python/)")
    p.add_argument("--engine-python", default=None, metavar="PY",
                   help="interpreter for --engine-src (default: newest complete env of that engine, else this python)")
    p.add_argument("--engine-home", default=None, metavar="DIR", help="engine envs dir (VLMPATH_ENGINE_HOME)")
