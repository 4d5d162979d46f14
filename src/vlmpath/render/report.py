"""What do the recorded results look like as charts a person can read at a glance?

Draws matplotlib figures from what ``report_data.py`` loads (asv results through
``results.py``, comparisons from ``compare.py``); it never measures. Four kinds of chart:

- ``path_chart``: one path (encode / inject / hash / embed), strategies side by side per
  workload, throughput bars with the accuracy of the same case written on each bar, so a
  fast but wrong strategy cannot look good; a failed case is a red "FAILED" marker.
- ``vendor_chart``: CUDA and ROCm machines side by side for the same cases.
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

Every name callers used from here before the split (``load_history``, ``History``,
``load_comparison``, ``save_figure``, ...) is still importable from ``vlmpath.render.report``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from vlmpath.compare.results import MachineRun, RunResults, load_asv, write_text_atomic
from vlmpath.compare.verdict import (
    Comparison,
    ComparisonReport,
    Thresholds,
    Verdict,
    compare,
)
from vlmpath.core.errors import VlmpathError
from vlmpath.render.comment import fmt_value
from vlmpath.render.report_data import (
    DEFAULT_PATHS,
    THROUGHPUT_UNITS,
    WORKLOAD_PARAMS,
    History,
    accuracy_of,
    add_regressions,
    check_results_dir,
    consecutive_regressions,
    geomean,
    headline_benchmarks,
    leaf_of,
    load_comparison,
    load_history,
    path_of,
    primary_benchmarks,
    split_params,
)
from vlmpath.render.report_figure import (
    BASE_GREY,
    FAIL,
    HATCHES,
    MARKERS,
    NOTE_GID,
    PALETTE,
    STYLE,
    add_note,
    draw_empty,
    draw_failed_marker,
    draw_not_run,
    fail_handle,
    figure_notes,
    new_figure,
    save_figure,
    styled,
)

__all__ = [  # the charts and write_report, plus the loading and figure names re-exported
    "BASE_GREY", "CHART_DIR", "DEFAULT_PATHS", "FAIL", "HATCHES", "MANIFEST", "MARKERS",
    "NOTE_GID", "PALETTE", "STYLE", "THROUGHPUT_UNITS", "WORKLOAD_PARAMS", "Chart", "History",
    "ReportOutput", "add_note", "add_regressions", "check_results_dir", "consecutive_regressions",
    "figure_notes", "history_chart", "leaf_of", "load_comparison", "load_history", "path_chart",
    "path_of", "pr_chart", "save_figure", "vendor_chart", "write_report",
]


CHART_DIR = "charts"
MANIFEST = "charts.json"
_CHANGED = (Verdict.REGRESSION, Verdict.NEWLY_FAILING, Verdict.IMPROVEMENT,
            Verdict.FIXED, Verdict.NEW, Verdict.REMOVED)
_VERDICT_STYLE = {  # colour, hatch
    Verdict.REGRESSION: (FAIL, "xx"), Verdict.NEWLY_FAILING: (FAIL, "xx"),
    Verdict.IMPROVEMENT: ("#009E73", ".."), Verdict.FIXED: ("#009E73", ".."),
    Verdict.NEW: ("#0072B2", "//"), Verdict.REMOVED: (BASE_GREY, ""),
}


def _direction(unit: str) -> str:
    rule = _thresholds().unit_rule(unit)
    return f"{rule.direction} is better" if rule else "direction unknown"


@functools.lru_cache(maxsize=1)
def _thresholds() -> Thresholds:
    return Thresholds.default()


# --- per-path chart -----------------------------------------------------------------------


@styled
def path_chart(run: RunResults | None, path: str) -> Figure:
    """Throughput of every strategy per workload for one path, accuracy on each bar."""
    panels = []
    for machine in (run.machines if run else ()):
        for bench in primary_benchmarks(m for m in machine.metrics if path_of(m.benchmark) == path):
            panels.append((machine, bench))
    fig = new_figure(9.0, 0.8 + 3.0 * max(1, len(panels)))
    commit = f" @ {run.commit[:8]}" if run else ""
    fig.suptitle(f"{path} path: strategies per workload{commit}", fontweight="bold")
    if not panels:
        draw_empty(fig.add_subplot(), f"no throughput results for the {path} path")
        add_note(fig, f"no {path} results" + (f" for commit {run.commit[:8]}" if run else " yet")
                 + ": nothing to compare")
        return fig
    missing_acc = False
    for i, (machine, bench) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        missing_acc |= _draw_strategies(ax, machine, bench)
    if missing_acc:
        add_note(fig, "some benchmarks or cases have no accuracy record (e.g. timings of one "
                      "stage): their bars carry no 'acc' label")
    return fig


def _draw_strategies(ax, machine: MachineRun, bench: str) -> bool:
    metrics = [m for m in machine.metrics if m.benchmark == bench]
    acc = accuracy_of(machine, bench)
    unit = metrics[0].unit
    workloads = list(dict.fromkeys(split_params(m.params)[0] for m in metrics))
    strategies = sorted({split_params(m.params)[1] for m in metrics})
    width = 0.8 / len(strategies)
    top = max((m.value for m in metrics if m.ok), default=1.0) or 1.0
    missing_acc = False
    for s_i, strategy in enumerate(strategies):
        for w_i, workload in enumerate(workloads):
            m = next((x for x in metrics if split_params(x.params) == (workload, strategy)), None)
            x = w_i - 0.4 + width * (s_i + 0.5)
            if m is None or m.skipped:  # not selected (asv -b) or not supported here
                draw_not_run(ax, x)
                continue
            a = acc.get(m.params)
            wrong = a is not None and a.ok and a.value < 1.0
            acc_txt = ("acc ?" if a is None else "acc failed" if not a.ok
                       else f"acc {a.value:.2f}" + (" WRONG" if wrong else ""))
            missing_acc |= a is None
            if not m.ok:
                draw_failed_marker(ax, x, f"FAILED, {acc_txt}" if a is not None else "FAILED")
                continue
            ax.bar(x, m.value, width * 0.92, color=PALETTE[s_i % len(PALETTE)],
                   hatch=HATCHES[s_i % len(HATCHES)],
                   edgecolor=FAIL if wrong else "black", linewidth=2.0 if wrong else 0.6)
            if a is not None:
                ax.annotate(acc_txt, (x, m.value), xytext=(0, 2), textcoords="offset points",
                            rotation=90, ha="center", va="bottom", fontsize=7,
                            color=FAIL if wrong or not a.ok else "black",
                            fontweight="bold" if wrong else "normal")
    ax.set_ylim(0, top * 1.45)  # room for the accuracy labels above the bars
    ax.set_xlim(-0.5, len(workloads) - 0.5)  # markers and labels do not autoscale
    many = len(workloads) > 3  # long preset names would run into each other
    ax.set_xticks(range(len(workloads)), workloads or [""], rotation=20 if many else 0,
                  ha="right" if many else "center")
    ax.set_xlabel("workload")
    ax.set_ylabel(f"{leaf_of(bench)} ({unit})\n{_direction(unit)}")
    ax.set_title(f"{bench} on {machine.machine} ({machine.backend})", loc="left")
    handles = [Patch(facecolor=PALETTE[i % len(PALETTE)], hatch=HATCHES[i % len(HATCHES)],
                     edgecolor="black", label=s) for i, s in enumerate(strategies)]
    handles += [fail_handle(), Patch(facecolor="white", edgecolor=FAIL, linewidth=2,
                                      label="accuracy < 1 (wrong rows)")]
    ax.legend(handles=handles, title="strategy", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return missing_acc


# --- CUDA vs ROCm -------------------------------------------------------------------------


@styled
def vendor_chart(run: RunResults | None) -> Figure:
    """Every GPU machine side by side for the same cases, one panel per headline benchmark."""
    gpus = [m for m in (run.machines if run else ()) if m.backend in ("cuda", "rocm")]
    gpus.sort(key=lambda m: (m.backend, m.machine))
    benches = headline_benchmarks(x for m in gpus for x in m.metrics)
    fig = new_figure(10.0, 0.8 + 3.2 * max(1, len(benches)))
    fig.suptitle("CUDA vs ROCm" + (f" @ {run.commit[:8]}" if run else ""), fontweight="bold")
    vendors = {m.backend for m in gpus}
    if vendors != {"cuda", "rocm"}:
        others = ", ".join(m.machine for m in (run.machines if run else ()) if m not in gpus)
        if vendors:
            have = next(iter(vendors))
            lack = ({"cuda", "rocm"} - vendors).pop()
            add_note(fig, f"only {have.upper()} results ({', '.join(m.machine for m in gpus)}); "
                          f"no {lack.upper() if lack == 'rocm' else 'CUDA'} machine has results "
                          "for this commit, so there is nothing to set beside them")
        else:
            add_note(fig, "no CUDA or ROCm results" + (f" for commit {run.commit[:8]}" if run else " yet")
                     + (f" (CPU machines only: {others})" if others else ""))
    if not benches:
        draw_empty(fig.add_subplot(), "no GPU throughput results to compare")
        return fig
    for i, bench in enumerate(benches):
        ax = fig.add_subplot(len(benches), 1, i + 1)
        _draw_vendors(ax, gpus, bench)
    return fig


def _draw_vendors(ax, gpus: Sequence[MachineRun], bench: str) -> None:
    per = {g.machine: {m.params: m for m in g.metrics if m.benchmark == bench} for g in gpus}
    cases = sorted({p for d in per.values() for p in d})
    labels = [" ".join(v for _, v in p) or "(no params)" for p in cases]
    width = 0.8 / len(gpus)
    unit = next(m.unit for d in per.values() for m in d.values())
    top = max((m.value for d in per.values() for m in d.values() if m.ok), default=1.0) or 1.0
    for g_i, g in enumerate(gpus):
        for c_i, p in enumerate(cases):
            m = per[g.machine].get(p)
            x = c_i - 0.4 + width * (g_i + 0.5)
            if m is None or m.skipped:
                draw_not_run(ax, x)
                continue
            if not m.ok:
                draw_failed_marker(ax, x)
                continue
            ax.bar(x, m.value, width * 0.92, color=PALETTE[g_i % len(PALETTE)],
                   hatch="" if g.backend == "cuda" else "//", edgecolor="black", linewidth=0.6)
    cuda = [g for g in gpus if g.backend == "cuda"]
    rocm = [g for g in gpus if g.backend == "rocm"]
    if len(cuda) == 1 and len(rocm) == 1:  # one pair: write the ratio over each group
        for c_i, p in enumerate(cases):
            c, r = per[cuda[0].machine].get(p), per[rocm[0].machine].get(p)
            if c is not None and r is not None and c.ok and r.ok and c.value:
                ax.annotate(f"ROCm/CUDA {r.value / c.value:.2f}", (c_i, max(c.value, r.value)),
                            xytext=(0, 3), textcoords="offset points", ha="center", fontsize=7)
    ax.set_ylim(0, top * 1.2)
    ax.set_xlim(-0.5, len(cases) - 0.5)
    ax.set_xticks(range(len(cases)), labels, rotation=30, ha="right")
    ax.set_xlabel("case (parameters)")
    ax.set_ylabel(f"{leaf_of(bench)} ({unit})\n{_direction(unit)}")
    ax.set_title(bench, loc="left")
    handles = [Patch(facecolor=PALETTE[i % len(PALETTE)], hatch="" if g.backend == "cuda" else "//",
                     edgecolor="black", label=f"{g.machine} ({g.backend.upper()})")
               for i, g in enumerate(gpus)] + [fail_handle()]
    ax.legend(handles=handles, title="machine", loc="upper left", bbox_to_anchor=(1.01, 1.0))


# --- history ------------------------------------------------------------------------------


@styled
def history_chart(history: History, benchmark: str,
                  regressions: Mapping[tuple[str, str, str], Sequence[Comparison]] | None = None,
                  ) -> Figure:
    """Geometric mean of ``benchmark`` over its cases, per machine, over commits."""
    regressions = regressions or {}
    fig = new_figure(10.0, 4.6)
    ax = fig.add_subplot()
    unit = next((m.unit for r in history.runs for m in r.metrics() if m.benchmark == benchmark), "")
    ax.set_title(f"{benchmark}: history over commits", loc="left")
    ax.set_xlabel("commit (commit-date order)")
    ax.set_ylabel(f"geometric mean over cases ({unit or 'no unit'})\n{_direction(unit)}")
    machines = sorted({m.machine for r in history.runs for m in r.machines
                       if any(x.benchmark == benchmark for x in m.metrics)})
    if not machines:
        draw_empty(ax, f"no results for {benchmark} yet")
        add_note(fig, f"no recorded results for {benchmark}: run the benchmarks first")
        return fig
    ticks = [f"{r.commit[:8]}\n{_day(d)}" for r, d in zip(history.runs, history.dates)]
    marked = False
    for i, name in enumerate(machines):
        xs, ys = [], []
        for x, run in enumerate(history.runs):
            mrun = run.machine(name)
            ms = [m for m in (mrun.metrics if mrun else ()) if m.benchmark == benchmark]
            failed = [m for m in ms if not m.ok and not m.skipped]
            g = geomean([m.value for m in ms if m.ok])
            if g is not None:
                xs.append(x)
                ys.append(g)
            if failed:
                ax.plot([x], [0.02], marker="X", color=FAIL, markeredgecolor="black", markersize=10,
                        linestyle="none", transform=ax.get_xaxis_transform(), clip_on=False)
                ax.annotate(f"{len(failed)} failed", (x, 0.06), xycoords=ax.get_xaxis_transform(),
                            ha="center", fontsize=7, color=FAIL)
            regs = regressions.get((run.commit, name, benchmark), ())
            if regs and g is not None:
                marked = True
                ax.plot([x], [g], marker="v", markersize=15, markerfacecolor="none",
                        markeredgecolor=FAIL, markeredgewidth=2, linestyle="none", zorder=6)
                ax.annotate(f"regression ({len(regs)} case{'s' if len(regs) > 1 else ''})", (x, g),
                            xytext=(0, -20), textcoords="offset points", ha="center",
                            fontsize=7, color=FAIL, fontweight="bold")
        ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=PALETTE[i % len(PALETTE)],
                linestyle=("-", "--", "-.", ":")[i % 4], label=name)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=7)
    ax.set_xlim(-0.5, max(len(ticks) - 0.5, 0.5))
    ax.set_ylim(bottom=0)
    handles, _ = ax.get_legend_handles_labels()
    handles += [fail_handle("failed cases at this commit"),
                Line2D([], [], marker="v", markerfacecolor="none", markeredgecolor=FAIL,
                       markeredgewidth=2, linestyle="none", markersize=11, label="regression found")]
    ax.legend(handles=handles, title="machine", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if len(history.runs) < 2:
        add_note(fig, "only one commit has results: no history yet")
    if not marked and len(history.runs) >= 2:
        add_note(fig, "no regression found between consecutive commits or in the given comparison")
    return fig


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d") if ms else "?"


# --- PR chart -----------------------------------------------------------------------------


@styled
def pr_chart(report: ComparisonReport, max_cases: int = 30) -> Figure:
    """Base vs head for every changed case, per machine; head drawn relative to base = 1."""
    panels = [(m, [c for c in m.comparisons if c.verdict in _CHANGED]) for m in report.machines]
    shown = [(m, cs) for m, cs in panels if cs]
    rows = sum(min(len(cs), max_cases) for _, cs in shown)
    fig = new_figure(11.0, 1.2 + 0.55 * max(rows, 2) + 0.9 * len(shown))
    fig.suptitle(f"base {report.base_commit[:8]} vs head {report.head_commit[:8]}: changed cases",
                 fontweight="bold")
    for m in report.machines:
        if m.status != "both":
            add_note(fig, f"{m.machine}: {m.status.replace('-', ' ')} results; nothing compared there")
    if not shown:
        draw_empty(fig.add_subplot(), "no changed cases between base and head")
        add_note(fig, "every case is unchanged within its noise band (or not comparable)")
        return fig
    heights = [min(len(cs), max_cases) + 1 for _, cs in shown]
    axes = fig.subplots(len(shown), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, (m, cs) in zip(axes, shown):
        cs = sorted(cs, key=lambda c: (list(_CHANGED).index(c.verdict), -abs(c.change or 0)))
        if len(cs) > max_cases:
            add_note(fig, f"{m.machine}: {len(cs) - max_cases} more changed cases not drawn "
                          "(see the comment's table)")
        _draw_pr(ax, m.machine, cs[:max_cases])
        if any(c.verdict is Verdict.NEW for c in cs):
            add_note(fig, f"{m.machine}: some cases exist at head but not at base (marked 'new'); "
                          "they have no base to compare with")
    return fig


def _draw_pr(ax, machine: str, cs: Sequence[Comparison]) -> None:
    labels = []
    top = 1.0
    for i, c in enumerate(cs):
        y = len(cs) - 1 - i
        labels.append(f"{leaf_of(c.benchmark)} {' '.join(v for _, v in c.params)}\n"
                      f"[{c.unit}, {_direction(c.unit)}]")
        color, hatch = _VERDICT_STYLE[c.verdict]
        ratio = c.ratio
        if c.base is not None:
            ax.barh(y + 0.2, 1.0, 0.38, color=BASE_GREY, edgecolor="black", linewidth=0.5)
        elif c.verdict is Verdict.FIXED:
            ax.plot([0], [y + 0.2], marker="X", color=FAIL, markeredgecolor="black",
                    markersize=9, linestyle="none", clip_on=False)
        if c.head is None:
            ax.plot([0], [y - 0.2], marker="X", color=FAIL, markeredgecolor="black",
                    markersize=9, linestyle="none", clip_on=False)
        else:
            h = ratio if ratio is not None else 1.0
            top = max(top, h)
            ax.barh(y - 0.2, h, 0.38, color=color, hatch=hatch, edgecolor="black", linewidth=0.5)
        text = f"{c.verdict.value}: {fmt_value(c.base, c.unit)} -> {fmt_value(c.head, c.unit)}"
        if c.change is not None:
            text += f" ({c.change * 100:+.1f}%)"
        elif c.verdict is Verdict.NEW:
            text += " (not in base)"
        ax.annotate(text, (0, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=7, color=FAIL if c.verdict in (Verdict.REGRESSION, Verdict.NEWLY_FAILING)
                    else "black", xycoords=("axes fraction", "data"),
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xlim(0, top * 1.15)
    ax.set_ylim(-0.7, len(cs) - 0.3)
    ax.set_yticks(range(len(cs)), labels[::-1], fontsize=7)
    ax.set_xlabel("value relative to base (base = 1.0)")
    ax.set_title(f"{machine}", loc="left")
    handles = [Patch(facecolor=BASE_GREY, edgecolor="black", label="base")]
    for v in _CHANGED:
        if any(c.verdict is v for c in cs):
            color, hatch = _VERDICT_STYLE[v]
            handles.append(Patch(facecolor=color, hatch=hatch, edgecolor="black", label=f"head: {v.value}"))
    handles.append(fail_handle("failed (no value)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))


# --- the whole report ---------------------------------------------------------------------


@dataclass(frozen=True)
class Chart:
    name: str  # file stem under <out>/charts/
    kind: str  # path | vendor | history | pr
    title: str
    files: tuple[str, ...]  # relative to <out>
    notes: tuple[str, ...]


@dataclass(frozen=True)
class ReportOutput:
    out_dir: Path
    charts: tuple[Chart, ...]
    warnings: tuple[str, ...]


def _safe_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def write_report(results_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 base: str | None = None, head: str | None = None,
                 comparison: str | os.PathLike[str] | ComparisonReport | None = None,
                 history_limit: int | None = 50) -> ReportOutput:
    """Draw every chart from ``results_dir`` into ``<out_dir>/charts/`` plus a manifest."""
    if (base is None) != (head is None):
        raise VlmpathError("pass both --base and --head (or neither)")
    history = load_history(results_dir, history_limit)
    report = load_comparison(comparison) if comparison is not None else None
    if report is None and base is not None and head is not None:
        report = compare(load_asv(results_dir, base), load_asv(results_dir, head))
    shown = None
    if head is not None:
        shown = load_asv(results_dir, head)
    elif report is not None:
        shown = history.find(report.head_commit)
    shown = shown or history.latest

    figures: list[tuple[str, str, Figure, tuple[str, ...]]] = []
    found = {path_of(b) for b in primary_benchmarks(shown.metrics())} if shown else set()
    paths = sorted(found | set(DEFAULT_PATHS))  # a path without results still gets its note
    for p in paths:
        figures.append((f"path-{_safe_name(p)}", "path", path_chart(shown, p), ("png",)))
    figures.append(("vendors", "vendor", vendor_chart(shown), ("png",)))
    regs = consecutive_regressions(history)
    if report is not None:
        add_regressions(regs, report)
    benches = headline_benchmarks(m for r in history.runs for m in r.metrics())
    for b in benches:
        figures.append((f"history-{_safe_name(b)}", "history", history_chart(history, b, regs), ("png", "svg")))
    if not benches:
        figures.append(("history", "history", history_chart(history, "throughput"), ("png",)))
    if report is not None:
        figures.append(("pr", "pr", pr_chart(report), ("png", "svg")))

    out = Path(out_dir)
    charts: list[Chart] = []
    warnings: list[str] = []
    if not history.runs:
        warnings.append(f"no results yet in {history.results_dir}: charts carry a note instead of data")
    if report is None:
        warnings.append("no --comparison or --base/--head: the PR chart was not drawn")
    for name, kind, fig, fmts in figures:
        files = tuple(f"{CHART_DIR}/{name}.{fmt}" for fmt in fmts)
        for f in files:
            save_figure(fig, out / f)
        notes = tuple(figure_notes(fig))
        title = fig.get_suptitle() or fig.axes[0].get_title(loc="left")
        charts.append(Chart(name, kind, title, files, notes))
        warnings.extend(f"{name}: {n}" for n in notes)
        fig.clear()  # figures hold large buffers; nothing references them after saving
    manifest = {"schema_version": 1, "commit": shown.commit if shown else None,
                "charts": [c.__dict__ | {"files": list(c.files), "notes": list(c.notes)} for c in charts],
                "warnings": list(dict.fromkeys(warnings))}
    write_text_atomic(out / CHART_DIR / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return ReportOutput(out, tuple(charts), tuple(dict.fromkeys(warnings)))
