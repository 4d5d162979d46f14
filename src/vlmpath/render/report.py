"""What do the recorded results look like as charts a person can read at a glance?

Draws matplotlib figures from what ``report_data.py`` loads (asv results through
``compare.asv_results``) and the ``ComparisonReport`` it is given; it never measures or
judges a base-vs-head pair. Four kinds of chart:

- ``path_chart``: one path (encode / inject / hash / embed), strategies side by side per
  workload, throughput bars with the accuracy of the same case written on each bar, so a
  fast but wrong strategy cannot look good; a failed case is a red "FAILED" marker.
- ``vendor_chart``: every GPU backend's machines side by side for the same cases.
- ``history_chart``: a headline metric over commits (date order), one line per machine,
  regressions marked.
- ``pr_chart``: base vs head for every changed case, per machine (uploaded beside the PR
  comment).

Chart functions return a ``matplotlib.figure.Figure`` drawn on an explicit Agg canvas
(no pyplot, no display, no global rcParams change: style is applied with
``rc_context`` while the figure is built); ``save_figure`` writes it atomically (those
shared pieces live in ``report_figure.py``).
Anything a reader must know (no results yet, one vendor only, a case missing at base)
is drawn in the figure as a note (``figure_notes`` reads them back) and returned as a
warning by ``write_report``.

The charts live in ``report_charts.py`` / ``report_history.py``, loading in
``report_data.py``, the shared figure pieces in ``report_figure.py``: import each from there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.records import RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.atomic import write_text as write_text_atomic
from vlmpath.render.escape import file_name
from vlmpath.render.report_charts import path_chart, vendor_chart
from vlmpath.render.report_data import (
    DEFAULT_PATHS,
    consecutive_regressions,
    headline_benchmarks,
    load_history,
    path_of,
    primary_benchmarks,
)
from vlmpath.render.report_figure import figure_marks, figure_notes, save_figure
from vlmpath.render.report_history import history_chart, pr_chart


CHART_DIR = "charts"
MANIFEST = "charts.json"

# --- the whole report ---------------------------------------------------------------------


@dataclass(frozen=True)
class Chart:
    name: str  # file stem under <out>/charts/
    kind: str  # path | vendor | history | pr
    title: str
    files: tuple[str, ...]  # relative to <out>
    notes: tuple[str, ...]
    # What the chart judged and says (regression markers, verdict bars, "higher is better"
    # labels: ``report_figure.figure_marks``), for the manifest and the tests.
    marks: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportOutput:
    out_dir: Path
    charts: tuple[Chart, ...]
    warnings: tuple[str, ...]


def _safe_name(text: str) -> str:
    return file_name(text)  # a benchmark's name is untrusted: ASCII, bounded (render.escape)


def write_report(results_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 thresholds: Thresholds, comparison: ComparisonReport | None = None,
                 head: str | None = None, head_run: RunResults | None = None,
                 history_limit: int | None = 50) -> ReportOutput:
    """Draw every chart from ``results_dir`` into ``<out_dir>/charts/`` plus a manifest.

    ``comparison``: the judged base-vs-head report the PR chart draws (the charts never
    judge a pair again; ``vlmpath report --base/--head`` compares before calling this);
    ``thresholds``: the ones it was judged with, which the history marks and the
    direction labels use too. ``head`` (or ``head_run``, head's results already loaded:
    nothing is read back) is the commit the per-path charts show; default the
    comparison's head, else the newest results."""
    history = load_history(results_dir, history_limit)
    report = comparison
    shown = head_run
    if shown is None and head is not None:
        shown = load_asv(results_dir, head)
    elif report is not None:
        shown = history.find(report.head_commit)
    shown = shown or history.latest

    figures: list[tuple[str, str, Figure, tuple[str, ...]]] = []
    found = {path_of(b) for b in primary_benchmarks(shown.metrics())} if shown else set()
    paths = sorted(found | set(DEFAULT_PATHS))  # a path without results still gets its note
    for p in paths:
        figures.append((f"path-{_safe_name(p)}", "path", path_chart(shown, p, thresholds=thresholds), ("png",)))
    figures.append(("vendors", "vendor", vendor_chart(shown, thresholds=thresholds), ("png",)))
    regs = consecutive_regressions(history, thresholds, judged=report)
    benches = headline_benchmarks(m for r in history.runs for m in r.metrics())
    for b in benches:
        figures.append((f"history-{_safe_name(b)}", "history",
                        history_chart(history, b, regs, thresholds=thresholds), ("png", "svg")))
    if not benches:
        figures.append(("history", "history", history_chart(history, "throughput", thresholds=thresholds), ("png",)))
    if report is not None:
        figures.append(("pr", "pr", pr_chart(report, thresholds=thresholds), ("png", "svg")))

    out = Path(out_dir)
    charts: list[Chart] = []
    warnings: list[str] = []
    if not history.runs:
        warnings.append(f"no results yet in {history.results_dir}: charts carry a note instead of data")
    if report is None:
        warnings.append("no --comparison or --base/--head: the PR chart was not drawn")
    elif report.thresholds_source != thresholds.source:  # a comparison file judged elsewhere
        warnings.append(f"the comparison was judged with thresholds {report.thresholds_source}, the history "
                        f"marks and direction labels with {thresholds.source}: pass the same --config")
    for name, kind, fig, fmts in figures:
        files = tuple(f"{CHART_DIR}/{name}.{fmt}" for fmt in fmts)
        for f in files:
            save_figure(fig, out / f)
        notes = tuple(figure_notes(fig))
        title = fig.get_suptitle() or fig.axes[0].get_title(loc="left")
        charts.append(Chart(name, kind, title, files, notes, tuple(figure_marks(fig))))
        warnings.extend(f"{name}: {n}" for n in notes)
        fig.clear()  # figures hold large buffers; nothing references them after saving
    manifest = {"schema_version": 1, "commit": shown.commit if shown else None,
                "thresholds": thresholds.source,
                "charts": [c.__dict__ | {"files": list(c.files), "notes": list(c.notes), "marks": list(c.marks)}
                           for c in charts],
                "warnings": list(dict.fromkeys(warnings))}
    write_text_atomic(out / CHART_DIR / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return ReportOutput(out, tuple(charts), tuple(dict.fromkeys(warnings)))
