"""What does the PR flow leave in OUT, and how is it written?

The file names of what a flow writes (``comment.md``, ``comparison.json``, ``summary.txt``;
the artifact's own, ``run.json``, ``error.txt``, ``results/``, are ``pr.artifact``'s),
shared by ``vlmpath ci pr`` and ``vlmpath ci merge``; ``FlowResult`` (what was compared
and decided); the writers (all atomic) and the one chart step, ``draw_charts``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.comparison import EXIT_INCOMPLETE, ComparisonReport
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.artifact import ERROR_FILE, RESULTS_SUBDIR
from vlmpath.render.escape import log_text

RESULTS_ENV = "VLMPATH_RESULTS_DIR"
# Files written into OUT (and uploaded as one artifact per machine).
COMMENT_FILE = "comment.md"
COMPARISON_FILE = "comparison.json"
SUMMARY_FILE = "summary.txt"


# --- the PR flow -------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowResult:
    """What ``run_pr`` / ``merge_artifacts`` compared and decided."""

    base_sha: str  # the merge-base actually measured as the baseline
    head_sha: str
    machines: tuple[str, ...]
    out_dir: Path
    report: ComparisonReport | None  # None: no machine produced results (ci merge)
    exit_code: int
    reused_base: bool = False
    notes: tuple[str, ...] = ()


def write_outputs(out: Path, report, *, header: Sequence[str], fail: bool,
                   thresholds_note: str | None = None, profiles: Sequence = (),
                   incomplete_because: str | None = None) -> int:
    """comment.md, comparison.json and summary.txt for ``report`` into OUT; returns the exit
    code. ``profiles`` (regressed cases' profiles) are a section of the comment, in its fit.
    ``incomplete_because``: something the rows cannot show is missing (a shard that never
    arrived): without a regression the check is incomplete (exit 3), never green."""
    from vlmpath.core.atomic import write_text as write_text_atomic
    from vlmpath.render import comment as render

    write_text_atomic(out / COMMENT_FILE, render.render_markdown(report, profiles=profiles))
    write_text_atomic(out / COMPARISON_FILE, render.render_json(report))
    code = report.exit_code(fail_on_regression=fail)
    if report.regressions:
        verdict = f"{len(report.regressions)} regression(s): exit {code}"
    elif report.judged == 0:
        verdict = f"incomplete, nothing judged ({len(report.not_judged)} case(s) not judged): exit {code}"
    elif report.incomplete:
        verdict = f"incomplete, {len(report.not_judged)} of {len(report.all())} case(s) not judged: exit {code}"
    elif report.not_judged:
        verdict = f"no regressions among the judged cases, {len(report.not_judged)} not judged: exit {code}"
    else:
        verdict = f"no regressions: exit {code}"
    if incomplete_because and not report.regressions:
        code = EXIT_INCOMPLETE if fail else code
        verdict = f"incomplete ({incomplete_because}): exit {code}"
    if report.accepted:  # benchmarks/accepted.yaml: counted, not failing
        verdict += f" ({len(report.accepted)} accepted regression(s) not failing)"
    if report.awaiting_review:  # entries only this PR's own accepted.yaml holds: failing
        verdict += (f" ({len(report.awaiting_review)} regression(s) accepted by this PR's own change, "
                    "awaiting review: still failing)")
    text = "\n".join([*header, f"verdict: {verdict}", "", render.render_terminal(report)])
    write_text_atomic(out / SUMMARY_FILE, log_text(text))  # printed in the job log: no workflow commands
    return code


def draw_charts(out: Path, report, thresholds, head_run=None) -> list[str]:
    """PR charts into OUT/report/charts with ``vlmpath report``'s writer (the PR chart of
    base vs head per changed case alone when OUT holds no asv results: an engine PR's); a
    failure is a note, not fatal (the comparison is what gates the PR). ``report`` is the
    comparison the comment was written from and ``thresholds`` the ones it was judged
    with, passed as objects: the charts never re-read comparison.json nor judge with other
    thresholds."""
    if not (out / RESULTS_SUBDIR).is_dir():
        return _pr_chart(out, report, thresholds)
    try:
        from vlmpath.render.report import write_report

        rep = write_report(out / RESULTS_SUBDIR, out / "report", thresholds=thresholds,
                           head=report.head_commit, comparison=report, head_run=head_run)
    except (ImportError, VlmpathError) as exc:
        return [f"charts not drawn: {exc}"]
    return [f"chart warning: {w}" for w in rep.warnings]


def _pr_chart(out: Path, report, thresholds) -> list[str]:
    try:
        from vlmpath.render.report_figure import save_figure
        from vlmpath.render.report_history import pr_chart

        fig = pr_chart(report, thresholds=thresholds)
        for ext in ("png", "svg"):
            save_figure(fig, out / "report" / "charts" / f"pr.{ext}")
        fig.clear()
    except (ImportError, VlmpathError, OSError) as exc:
        return [f"charts not drawn: {exc}"]
    return []


def write_error(out_dir: str | os.PathLike[str], message: str) -> None:
    """Leave the failure in OUT so the comment workflow can report it (never silence)."""
    from vlmpath.core.atomic import write_text as write_text_atomic

    write_text_atomic(Path(out_dir) / ERROR_FILE, message.rstrip() + "\n")
