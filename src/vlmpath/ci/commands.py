"""Which arguments do the trusted-CI subcommands (``vlmpath bisect``, ``vlmpath ci alert``) take?

Declared here rather than in ``vlmpath.cli`` only because that module is at its size
limit; ``vlmpath.cli`` registers them like its own (``add_bisect`` into the top-level
subcommands, ``add_ci_commands`` into ``vlmpath ci``). Handlers import their library
lazily, as ``vlmpath.cli`` does, so ``vlmpath --help`` stays cheap.
"""

from __future__ import annotations

import argparse


def add_bisect(sub: argparse._SubParsersAction) -> None:
    """``vlmpath bisect`` (added with the bisect flow)."""


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

    def run(a: argparse.Namespace) -> int:
        from vlmpath.ci import alert
        from vlmpath.compare.verdict import load_thresholds

        cfg = load_thresholds(a.config)
        findings = alert.judge_latest(a.results, a.commit, window=a.window, thresholds=cfg)
        regs = [f for f in findings if f.regressed]
        print(f"{a.commit[:8]}: {len(findings)} case(s) judged against history, {len(regs)} regressed")
        for f in regs:
            print(f"  {alert.issue_title(f)}: {alert._numbers(f.comparison)}")
        if a.repo:
            links = alert.Links(a.run_url, a.dashboard_url, a.commit_url)
            res = alert.sync_issues(findings, a.repo, links, thresholds=cfg)
            for word, keys in (("opened", res.opened), ("updated", res.updated), ("closed", res.closed)):
                for k in keys:
                    print(f"  issue {word}: {k}")
        return 1 if a.fail and regs else 0

    p.set_defaults(func=run)
