"""How did the results move over commits, and what changed in this PR, as charts?

``history_chart``: a headline metric over commits (date order), one line per machine,
regressions marked. ``pr_chart``: base vs head for every changed case, per machine
(uploaded beside the PR comment).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from vlmpath.compare.comparison import Comparison, ComparisonReport, Verdict
from vlmpath.compare.thresholds import Thresholds
from vlmpath.render.fmt import fmt_value
from vlmpath.render.report_charts import CHANGED, VERDICT_STYLE, direction_text, ylabel
from vlmpath.render.report_data import History, geomean, leaf_of
from vlmpath.render.report_figure import (
    BASE_GREY,
    FAIL,
    MARKERS,
    PALETTE,
    add_note,
    draw_empty,
    fail_handle,
    mark,
    new_figure,
    styled,
)

# --- history ------------------------------------------------------------------------------


@styled
def history_chart(history: History, benchmark: str,
                  regressions: Mapping[tuple[str, str, str], Sequence[Comparison]] | None = None,
                  *, thresholds: Thresholds) -> Figure:
    """Geometric mean of ``benchmark`` over its cases, per machine, over commits.
    ``regressions``: the marks, judged by the caller with ``thresholds`` (which also say
    the direction on the axis)."""
    regressions = regressions or {}
    fig = new_figure(10.0, 4.6)
    ax = fig.add_subplot()
    unit = next((m.unit for r in history.runs for m in r.metrics() if m.benchmark == benchmark), "")
    ax.set_title(f"{benchmark}: history over commits", loc="left")
    ax.set_xlabel("commit (commit-date order)")
    ylabel(ax, f"geometric mean over cases ({unit or 'no unit'})", unit, thresholds)
    # A machine whose every case of it was skipped (the opt-in serve benchmarks) has no line.
    machines = sorted({m.machine for r in history.runs for m in r.machines
                       if any(x.benchmark == benchmark and not x.skipped for x in m.metrics)})
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
                line, = ax.plot([x], [g], marker="v", markersize=15, markerfacecolor="none",
                                markeredgecolor=FAIL, markeredgewidth=2, linestyle="none", zorder=6)
                mark(line, f"regression {run.commit[:8]} {name} {len(regs)}")
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
def pr_chart(report: ComparisonReport, max_cases: int = 30, *, thresholds: Thresholds) -> Figure:
    """Base vs head for every changed case, per machine; head drawn relative to base = 1.
    The verdicts are the report's own (never judged again); ``thresholds`` are the ones it
    was judged with, for the direction each case's label states."""
    panels = [(m, [c for c in m.comparisons if c.verdict in CHANGED]) for m in report.machines]
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
        # Gating moves first; indicative ones (too few samples) after them, however large.
        cs = sorted(cs, key=lambda c: (c.indicative, list(CHANGED).index(c.verdict), -abs(c.change or 0)))
        if len(cs) > max_cases:
            add_note(fig, f"{m.machine}: {len(cs) - max_cases} more changed cases not drawn "
                          "(see the comment's table)")
        _draw_pr(ax, m.machine, cs[:max_cases], thresholds)
        if any(c.verdict is Verdict.NEW for c in cs):
            add_note(fig, f"{m.machine}: some cases exist at head but not at base (marked 'new'); "
                          "they have no base to compare with")
    return fig


def _draw_pr(ax, machine: str, cs: Sequence[Comparison], thresholds: Thresholds) -> None:
    labels = []
    top = 1.0
    for i, c in enumerate(cs):
        y = len(cs) - 1 - i
        direction = direction_text(thresholds, c.unit)
        case = f"{leaf_of(c.benchmark)} {' '.join(v for _, v in c.params)}"
        labels.append(f"{case}\n[{c.unit}, {direction}]")
        color, hatch = VERDICT_STYLE[c.verdict]
        if c.indicative:  # too few samples: drawn faint, never as news
            color, hatch = "#f2f2f2", "..."
        ratio = c.ratio
        absolute = c.base == 0 and c.head is not None  # no ratio to base 0: said in numbers, no bar
        if absolute:
            drawn, = ax.plot([0], [y], marker="D", color=color, markeredgecolor="black", markersize=7,
                             linestyle="none", clip_on=False)
        elif c.base is not None:
            ax.barh(y + 0.2, 1.0, 0.38, color=BASE_GREY, edgecolor="black", linewidth=0.5)
        elif c.verdict is Verdict.FIXED:
            ax.plot([0], [y + 0.2], marker="X", color=FAIL, markeredgecolor="black",
                    markersize=9, linestyle="none", clip_on=False)
        if absolute:
            pass
        elif c.head is None:
            drawn, = ax.plot([0], [y - 0.2], marker="X", color=FAIL, markeredgecolor="black",
                             markersize=9, linestyle="none", clip_on=False)
        else:
            h = ratio if ratio is not None else 1.0
            top = max(top, h)
            drawn = ax.barh(y - 0.2, h, 0.38, color=color, hatch=hatch, edgecolor="black", linewidth=0.5)[0]
        how = " (indicative)" if c.indicative else " (base 0: absolute)" if absolute else ""
        mark(drawn, f"{c.verdict.value} {machine} {case} [{c.unit}, {direction}]{how}")
        verdict = f"indicative {c.verdict.value} (too few samples, not gating)" if c.indicative else c.verdict.value
        text = f"{verdict}: {fmt_value(c.base, c.unit)} -> {fmt_value(c.head, c.unit)}"
        if absolute:
            text += " (base 0: absolute values)"
        elif c.change is not None:
            text += f" ({c.change * 100:+.1f}%)"
        elif c.verdict is Verdict.NEW:
            text += " (not in base)"
        ax.annotate(text, (0, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=7, color=FAIL if c.verdict in (Verdict.REGRESSION, Verdict.NEWLY_FAILING)
                    and not c.indicative else "black", xycoords=("axes fraction", "data"),
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xlim(0, top * 1.15)
    ax.set_ylim(-0.7, len(cs) - 0.3)
    ax.set_yticks(range(len(cs)), labels[::-1], fontsize=7)
    ax.set_xlabel("value relative to base (base = 1.0)")
    ax.set_title(f"{machine}", loc="left")
    handles = [Patch(facecolor=BASE_GREY, edgecolor="black", label="base")]
    for v in CHANGED:
        if any(c.verdict is v for c in cs):
            color, hatch = VERDICT_STYLE[v]
            handles.append(Patch(facecolor=color, hatch=hatch, edgecolor="black", label=f"head: {v.value}"))
    if any(c.indicative for c in cs):
        handles.append(Patch(facecolor="#f2f2f2", hatch="...", edgecolor="black",
                             label="head: indicative (too few samples)"))
    if any(c.base == 0 and c.head is not None for c in cs):
        handles.append(Line2D([], [], marker="D", color="white", markeredgecolor="black", linestyle="none",
                              label="base 0: absolute, no bar"))
    handles.append(fail_handle("failed (no value)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))

