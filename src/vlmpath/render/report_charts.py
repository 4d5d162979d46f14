"""How do one commit's results look per path and per vendor, as charts?

``path_chart``: one path (encode / inject / hash / embed), strategies side by side per
workload, throughput bars with the accuracy of the same case written on each bar, so a
fast but wrong strategy cannot look good; a failed case is a red "FAILED" marker.
``vendor_chart``: every GPU backend's machines side by side for the same cases (the
backend table's rows, the reference first; the ratio to the reference written over each
case). Also the verdict styles and axis wording the history and PR charts share.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from vlmpath.compare.comparison import Verdict
from vlmpath.compare.records import MachineRun, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.backends import BACKENDS, Backend, vendor_backends
from vlmpath.render.report_data import (
    accuracy_of,
    headline_benchmarks,
    leaf_of,
    path_of,
    primary_benchmarks,
    split_params,
)
from vlmpath.render.chart_axes import (
    axis_unit,
    draw_spread,
    group_label,
    measure_label,
    role_of,
    strategy_label,
    use_log,
)
from vlmpath.render.landing_data import value_count
from vlmpath.render.report_figure import (
    BASE_GREY,
    FAIL,
    HATCHES,
    PALETTE,
    add_note,
    direction_label,
    draw_empty,
    draw_failed_marker,
    draw_not_run,
    fail_handle,
    mark,
    new_figure,
    styled,
)

CHANGED = (Verdict.REGRESSION, Verdict.NEWLY_FAILING, Verdict.IMPROVEMENT,
            Verdict.FIXED, Verdict.NEW, Verdict.REMOVED)
VERDICT_STYLE = {  # colour, hatch
    Verdict.REGRESSION: (FAIL, "xx"), Verdict.NEWLY_FAILING: (FAIL, "xx"),
    Verdict.IMPROVEMENT: ("#009E73", ".."), Verdict.FIXED: ("#009E73", ".."),
    Verdict.NEW: ("#0072B2", "//"), Verdict.REMOVED: (BASE_GREY, ""),
}


def direction_text(thresholds: Thresholds, unit: str) -> str:
    """The "higher is better" of ``unit`` under the thresholds the caller judged with (a
    ``--config`` may flip a unit's direction: the charts must say what the comment says)."""
    rule = thresholds.unit_rule(unit)
    return f"{rule.direction} is better" if rule else "direction unknown"


def ylabel(ax, first: str, unit: str, thresholds: Thresholds) -> None:
    ax.set_ylabel(f"{first}\n{direction_label(ax, unit, direction_text(thresholds, unit))}")


# --- per-path chart -----------------------------------------------------------------------


@styled
def path_chart(run: RunResults | None, path: str, *, thresholds: Thresholds) -> Figure:
    """Throughput of every strategy per workload for one path, accuracy on each bar."""
    panels = []
    for machine in (run.machines if run else ()):
        for bench in primary_benchmarks(m for m in machine.metrics if path_of(m.benchmark) == path):
            # A panel whose every bar would read "not run" (skipped here, e.g. the serve
            # benchmarks without a model) is no chart: with no panel left the chart is empty.
            if any(not m.skipped for m in machine.metrics if m.benchmark == bench):
                panels.append((machine, bench))
    fig = new_figure(9.0, 0.8 + 3.0 * max(1, len(panels)))
    commit = f" @ {run.commit[:8]}" if run else ""
    fig.suptitle(f"{path} path: strategies side by side{commit}", fontweight="bold")
    if not panels:
        draw_empty(fig.add_subplot(), f"no throughput results for the {path} path")
        add_note(fig, f"no {path} results" + (f" for commit {run.commit[:8]}" if run else " yet")
                 + ": nothing to compare")
        return fig
    missing_acc = False
    for i, (machine, bench) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        missing_acc |= _draw_strategies(ax, machine, bench, thresholds)
    if missing_acc:
        add_note(fig, "some benchmarks or cases have no accuracy record (e.g. timings of one "
                      "stage): their bars carry no 'acc' label")
    return fig


def _draw_strategies(ax, machine: MachineRun, bench: str, thresholds: Thresholds) -> bool:
    metrics = [m for m in machine.metrics if m.benchmark == bench]
    acc = accuracy_of(machine, bench)
    unit = metrics[0].unit
    workloads = list(dict.fromkeys(split_params(m.params)[0] for m in metrics))
    strategies = sorted({split_params(m.params)[1] for m in metrics}, key=lambda s: (role_of(s) != "default", s))
    width = 0.8 / len(strategies)
    shown = [m.value for m in metrics if m.ok]
    factor, shown_unit = axis_unit(unit, shown)
    log = use_log(shown)
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
            value = m.value / factor
            ax.bar(x, value, width * 0.92, color=PALETTE[s_i % len(PALETTE)],
                   hatch=HATCHES[s_i % len(HATCHES)],
                   edgecolor=FAIL if wrong else "black", linewidth=2.0 if wrong else 0.6)
            top_y = draw_spread(ax, x, m, factor)
            label = f"n={value_count(m)}" if a is None else f"{acc_txt}, n={value_count(m)}"
            mark(ax.annotate(label, (x, top_y), xytext=(0, 2), textcoords="offset points",
                             rotation=90, ha="center", va="bottom", fontsize=7,
                             color=FAIL if wrong or (a is not None and not a.ok) else "black",
                             fontweight="bold" if wrong else "normal"),
                 f"bar {strategy} {workload}: {label}")
    if log:
        ax.set_yscale("log")
        lo, hi = min(shown) / factor, max(shown) / factor
        ax.set_ylim(lo / 3, hi * 12)  # a decade above for the labels
        mark(ax.yaxis, f"log scale {unit}")
    else:
        ax.set_ylim(0, (max(shown, default=1.0) / factor or 1.0) * 1.55)  # room for the labels above the bars
    ax.set_xlim(-0.5, len(workloads) - 0.5)  # markers and labels do not autoscale
    many = len(workloads) > 3  # long preset names would run into each other
    ax.set_xticks(range(len(workloads)), workloads or [""], rotation=20 if many else 0,
                  ha="right" if many else "center")
    ax.set_xlabel(group_label(metrics[0].params))
    scale_word = ", log scale" if log else ""
    ylabel(ax, f"{measure_label(bench, unit)} ({shown_unit}{scale_word})", unit, thresholds)
    ax.set_title(f"{bench} on {machine.machine} ({machine.backend})", loc="left")
    handles = [Patch(facecolor=PALETTE[i % len(PALETTE)], hatch=HATCHES[i % len(HATCHES)],
                     edgecolor="black", label=strategy_label(s)) for i, s in enumerate(strategies)]
    handles += [fail_handle(), Patch(facecolor="white", edgecolor=FAIL, linewidth=2,
                                      label="accuracy < 1 (wrong rows)"),
                Line2D([], [], color="black", marker="|", linestyle="none", markersize=9,
                       label="spread: sample range (n>1)")]
    ax.legend(handles=handles, title="strategy", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return missing_acc


# --- GPU vendors side by side ----------------------------------------------------------


@styled
def vendor_chart(run: RunResults | None, *, thresholds: Thresholds,
                 backends: Sequence[Backend] = BACKENDS) -> Figure:
    """Every GPU machine side by side for the same cases, one panel per headline benchmark;
    any number of GPU backends (``backends``' rows), the reference first."""
    sides = vendor_backends(backends) or tuple(b for b in backends if b.is_gpu)
    order = {b.name: i for i, b in enumerate(sides)}
    gpus = [m for m in (run.machines if run else ()) if m.backend in order]
    gpus.sort(key=lambda m: (order[m.backend], m.machine))
    benches = headline_benchmarks(x for m in gpus for x in m.metrics)
    fig = new_figure(10.0, 0.8 + 3.2 * max(1, len(benches)))
    fig.suptitle(" vs ".join(b.label for b in sides) + (f" @ {run.commit[:8]}" if run else ""), fontweight="bold")
    present = {m.backend for m in gpus}
    lacking = [b for b in sides if b.name not in present]
    if len(present) == 1:
        have = next(iter(present))
        add_note(fig, f"only {have.upper()} results ({', '.join(m.machine for m in gpus)}); "
                      f"no {' or '.join(b.name.upper() for b in lacking)} machine has results "
                      "for this commit, so there is nothing to set beside them")
    elif not present:
        others = ", ".join(m.machine for m in (run.machines if run else ()) if m not in gpus)
        add_note(fig, f"no {' or '.join(b.label for b in sides)} results"
                 + (f" for commit {run.commit[:8]}" if run else " yet")
                 + (f" (CPU machines only: {others})" if others else ""))
    if not benches:
        draw_empty(fig.add_subplot(), "no GPU throughput results to compare")
        return fig
    for i, bench in enumerate(benches):
        ax = fig.add_subplot(len(benches), 1, i + 1)
        _draw_vendors(ax, gpus, bench, thresholds, sides)
    return fig


def _draw_vendors(ax, gpus: Sequence[MachineRun], bench: str, thresholds: Thresholds,
                  sides: Sequence[Backend]) -> None:
    per = {g.machine: {m.params: m for m in g.metrics if m.benchmark == bench} for g in gpus}
    cases = sorted({p for d in per.values() for p in d})
    labels = [" ".join(v for _, v in p) or "(no params)" for p in cases]
    width = 0.8 / len(gpus)
    unit = next(m.unit for d in per.values() for m in d.values())
    top = max((m.value for d in per.values() for m in d.values() if m.ok), default=1.0) or 1.0
    hatch = {b.name: b.hatch for b in sides}
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
                   hatch=hatch[g.backend], edgecolor="black", linewidth=0.6)
    # One reference machine and one machine of another backend: write that backend's ratio
    # over each case group (one line per other backend, stacked).
    ref = sides[0]
    refs = [g for g in gpus if g.backend == ref.name]
    stacked = 0
    for other in sides[1:]:
        mine = [g for g in gpus if g.backend == other.name]
        if len(refs) != 1 or len(mine) != 1:
            continue
        for c_i, p in enumerate(cases):
            c, r = per[refs[0].machine].get(p), per[mine[0].machine].get(p)
            if c is not None and r is not None and c.ok and r.ok and c.value:
                text = f"{other.label}/{ref.label} {r.value / c.value:.2f}"
                y = max(d[p].value for d in per.values() if p in d and d[p].ok)  # above every bar
                mark(ax.annotate(text, (c_i, y), xytext=(0, 3 + 9 * stacked), textcoords="offset points",
                                 ha="center", fontsize=7), f"ratio {labels[c_i]}: {text}")
        stacked += 1
    ax.set_ylim(0, top * (1.2 + 0.06 * max(stacked - 1, 0)))
    ax.set_xlim(-0.5, len(cases) - 0.5)
    ax.set_xticks(range(len(cases)), labels, rotation=30, ha="right")
    ax.set_xlabel("case (parameters)")
    ylabel(ax, f"{leaf_of(bench)} ({unit})", unit, thresholds)
    ax.set_title(bench, loc="left")
    handles = [Patch(facecolor=PALETTE[i % len(PALETTE)], hatch=hatch[g.backend],
                     edgecolor="black", label=f"{g.machine} ({g.backend.upper()})")
               for i, g in enumerate(gpus)] + [fail_handle()]
    ax.legend(handles=handles, title="machine", loc="upper left", bbox_to_anchor=(1.01, 1.0))
