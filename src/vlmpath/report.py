"""What do the recorded results look like as charts a person can read at a glance?

Reads asv results (through ``results.py``) and comparisons (``compare.py``) and draws
matplotlib figures; it never measures. Four kinds of chart:

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
``rc_context`` while the figure is built); ``save_figure`` writes it atomically.
Anything a reader must know (no results yet, one vendor only, a case missing at base)
is drawn in the figure as a note (``figure_notes`` reads them back) and returned as a
warning by ``write_report``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import offset_copy

from .compare import Comparison, ComparisonReport, Thresholds, Verdict, compare
from .errors import VlmpathError
from .render import fmt_value
from .results import MachineRun, Metric, RunResults, existing_commits, load_asv, write_text_atomic

# Okabe-Ito (colour-blind safe); vermillion is kept for failures only. Each series also
# gets a hatch or a marker so that the charts survive greyscale printing.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
FAIL = "#D55E00"
BASE_GREY = "#9A9A9A"
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++")
MARKERS = ("o", "s", "^", "D", "v", "P", "*", "h")
THROUGHPUT_UNITS = ("tok/s", "GB/s")
DEFAULT_PATHS = ("encode", "inject", "hash", "embed")
WORKLOAD_PARAMS = ("workload", "preset")  # the parameter that names the workload
NOTE_GID = "vlmpath-note"
CHART_DIR = "charts"
MANIFEST = "charts.json"
# Per-figure style, applied only while a figure is built (rc_context restores it).
STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.titleweight": "bold", "axes.grid": True,
    "axes.axisbelow": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "hatch.linewidth": 0.8, "legend.fontsize": 8,
    "svg.hashsalt": "vlmpath",  # stable SVG ids: reruns give identical files
}
_CHANGED = (Verdict.REGRESSION, Verdict.NEWLY_FAILING, Verdict.IMPROVEMENT,
            Verdict.FIXED, Verdict.NEW, Verdict.REMOVED)
_VERDICT_STYLE = {  # colour, hatch
    Verdict.REGRESSION: (FAIL, "xx"), Verdict.NEWLY_FAILING: (FAIL, "xx"),
    Verdict.IMPROVEMENT: ("#009E73", ".."), Verdict.FIXED: ("#009E73", ".."),
    Verdict.NEW: ("#0072B2", "//"), Verdict.REMOVED: (BASE_GREY, ""),
}


# --- naming -------------------------------------------------------------------------------


def path_of(benchmark: str) -> str:
    """``bench_embed.Embed.track_tok_per_s`` -> ``embed``."""
    head = benchmark.split(".", 1)[0]
    return head[len("bench_"):] if head.startswith("bench_") else head


def leaf_of(benchmark: str) -> str:
    leaf = benchmark.rsplit(".", 1)[-1]
    for prefix in ("track_", "time_", "peakmem_", "mem_"):
        if leaf.startswith(prefix):
            return leaf[len(prefix):]
    return leaf


def _split_params(params: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(workload, strategy) labels: the workload/preset parameter groups, the rest is the strategy."""
    d = dict(params)
    key = next((k for k in WORKLOAD_PARAMS if k in d), None)
    if key is not None:
        wl = d.pop(key)
    elif len(params) >= 2:
        wl = d.pop(params[-1][0])
    else:
        wl = ""
    return wl, " / ".join(d.values()) or "(default)"


def _direction(unit: str) -> str:
    rule = _thresholds().unit_rule(unit)
    return f"{rule.direction} is better" if rule else "direction unknown"


@functools.lru_cache(maxsize=1)
def _thresholds() -> Thresholds:
    return Thresholds.default()


def _headline(metrics: Iterable[Metric]) -> list[str]:
    """Benchmarks whose unit is a throughput, sorted."""
    return sorted({m.benchmark for m in metrics if m.unit in THROUGHPUT_UNITS})


def _primary(metrics: Iterable[Metric]) -> list[str]:
    """Per benchmark class its throughput benchmarks, else its timings (``time_*``), sorted."""
    by_class: dict[str, dict[str, set[str]]] = {}
    for m in metrics:
        by_class.setdefault(m.benchmark.rsplit(".", 1)[0], {}).setdefault(m.unit, set()).add(m.benchmark)
    out: set[str] = set()
    for units in by_class.values():
        fast = set().union(*(units.get(u, set()) for u in THROUGHPUT_UNITS))
        out |= fast or units.get("seconds", set())
    return sorted(out)


def _accuracy_of(machine: MachineRun, benchmark: str) -> dict[tuple, Metric]:
    """Accuracy metrics of the same benchmark class, keyed by params."""
    cls = benchmark.rsplit(".", 1)[0]
    return {m.params: m for m in machine.metrics
            if m.unit == "fraction" and m.benchmark.rsplit(".", 1)[0] == cls
            and "accuracy" in m.benchmark.rsplit(".", 1)[-1]}


# --- figures ------------------------------------------------------------------------------


def _styled(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return fn(*args, **kwargs)
    return wrapper


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # explicit Agg canvas: no pyplot, no display needed
    return fig


def add_note(fig: Figure, text: str) -> None:
    """A note under the axes (kept by ``bbox_inches="tight"``), readable by ``figure_notes``."""
    n = len(figure_notes(fig))
    # Stacked below the figure in points, so the spacing is the same on any figure size.
    where = offset_copy(fig.transFigure, fig=fig, x=0, y=-4 - 12 * n, units="points")
    fig.text(0.01, 0.0, f"Note: {text}", ha="left", va="top", fontsize=8, color="#444444",
             gid=NOTE_GID, transform=where)


def figure_notes(fig: Figure) -> list[str]:
    return [t.get_text().removeprefix("Note: ") for t in fig.texts if t.get_gid() == NOTE_GID]


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center",
            fontsize=11, color="#444444", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _failed_marker(ax, x: float, label: str = "FAILED") -> None:
    ax.plot([x], [0], marker="X", markersize=11, color=FAIL, markeredgecolor="black",
            linestyle="none", clip_on=False, zorder=5)
    ax.annotate(label, (x, 0), xytext=(0, 9), textcoords="offset points", rotation=90,
                ha="center", va="bottom", color=FAIL, fontweight="bold", fontsize=8)


def _not_run(ax, x: float) -> None:
    ax.annotate("not run", (x, 0), xytext=(0, 3), textcoords="offset points", rotation=90,
                ha="center", va="bottom", fontsize=7, color="#666666")


def _fail_handle(label: str = "failed case") -> Line2D:
    return Line2D([], [], marker="X", color=FAIL, markeredgecolor="black", linestyle="none",
                  markersize=9, label=label)


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix) so readers never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fmt = target.suffix.lstrip(".").lower() or "png"
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=f".{fmt}")
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt, dpi=110, bbox_inches="tight", facecolor="white",
                    metadata={"Date": None} if fmt == "svg" else None)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


# --- per-path chart -----------------------------------------------------------------------


@_styled
def path_chart(run: RunResults | None, path: str) -> Figure:
    """Throughput of every strategy per workload for one path, accuracy on each bar."""
    panels = []
    for machine in (run.machines if run else ()):
        for bench in _primary(m for m in machine.metrics if path_of(m.benchmark) == path):
            panels.append((machine, bench))
    fig = _figure(9.0, 0.8 + 3.0 * max(1, len(panels)))
    commit = f" @ {run.commit[:8]}" if run else ""
    fig.suptitle(f"{path} path: strategies per workload{commit}", fontweight="bold")
    if not panels:
        _empty(fig.add_subplot(), f"no throughput results for the {path} path")
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
    acc = _accuracy_of(machine, bench)
    unit = metrics[0].unit
    workloads = list(dict.fromkeys(_split_params(m.params)[0] for m in metrics))
    strategies = sorted({_split_params(m.params)[1] for m in metrics})
    width = 0.8 / len(strategies)
    top = max((m.value for m in metrics if m.ok), default=1.0) or 1.0
    missing_acc = False
    for s_i, strategy in enumerate(strategies):
        for w_i, workload in enumerate(workloads):
            m = next((x for x in metrics if _split_params(x.params) == (workload, strategy)), None)
            x = w_i - 0.4 + width * (s_i + 0.5)
            if m is None or m.skipped:  # not selected (asv -b) or not supported here
                _not_run(ax, x)
                continue
            a = acc.get(m.params)
            wrong = a is not None and a.ok and a.value < 1.0
            acc_txt = ("acc ?" if a is None else "acc failed" if not a.ok
                       else f"acc {a.value:.2f}" + (" WRONG" if wrong else ""))
            missing_acc |= a is None
            if not m.ok:
                _failed_marker(ax, x, f"FAILED, {acc_txt}" if a is not None else "FAILED")
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
    handles += [_fail_handle(), Patch(facecolor="white", edgecolor=FAIL, linewidth=2,
                                      label="accuracy < 1 (wrong rows)")]
    ax.legend(handles=handles, title="strategy", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return missing_acc


# --- CUDA vs ROCm -------------------------------------------------------------------------


@_styled
def vendor_chart(run: RunResults | None) -> Figure:
    """Every GPU machine side by side for the same cases, one panel per headline benchmark."""
    gpus = [m for m in (run.machines if run else ()) if m.backend in ("cuda", "rocm")]
    gpus.sort(key=lambda m: (m.backend, m.machine))
    benches = _headline(x for m in gpus for x in m.metrics)
    fig = _figure(10.0, 0.8 + 3.2 * max(1, len(benches)))
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
        _empty(fig.add_subplot(), "no GPU throughput results to compare")
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
                _not_run(ax, x)
                continue
            if not m.ok:
                _failed_marker(ax, x)
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
               for i, g in enumerate(gpus)] + [_fail_handle()]
    ax.legend(handles=handles, title="machine", loc="upper left", bbox_to_anchor=(1.01, 1.0))


# --- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    """Every recorded commit's results, oldest first, with the commit dates (ms since epoch)."""

    runs: tuple[RunResults, ...]
    dates: tuple[int, ...]
    results_dir: str = ""

    @property
    def latest(self) -> RunResults | None:
        return self.runs[-1] if self.runs else None

    def find(self, commit: str) -> RunResults | None:
        return next((r for r in self.runs if r.commit.startswith(commit.lower())), None)


def check_results_dir(results_dir: str | os.PathLike[str]) -> Path:
    """The results dir as a Path; a clear error if it is missing or cannot be read."""
    root = Path(results_dir)
    if not root.exists():
        raise VlmpathError(f"results directory {root} does not exist: run `vlmpath run` first "
                           "or pass --results DIR")
    if not root.is_dir():
        raise VlmpathError(f"results path {root} is not a directory: pass the asv results dir "
                           "(the one holding <machine>/machine.json)")
    try:
        os.listdir(root)
    except OSError as exc:
        raise VlmpathError(f"cannot read results directory {root}: {exc.strerror}; "
                           "fix its permissions or pass another --results DIR") from None
    return root


def _commit_date(root: Path, sha8: str) -> int:
    for f in sorted(root.glob(f"*/{sha8}-*.json")):
        try:
            date = json.loads(f.read_text(encoding="utf-8")).get("date")
        except (OSError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            raise VlmpathError(f"corrupted results file {f} ({type(exc).__name__}): "
                               "delete it or re-run") from None
        if isinstance(date, (int, float)):
            return int(date)
    return 0


def load_history(results_dir: str | os.PathLike[str], limit: int | None = 50) -> History:
    """The last ``limit`` commits with results, in commit-date order (empty if none yet)."""
    root = check_results_dir(results_dir)
    dated = sorted((_commit_date(root, sha8), sha8) for sha8 in existing_commits(root))
    if limit is not None:
        dated = dated[-limit:]
    runs = tuple(load_asv(root, sha8) for _, sha8 in dated)
    return History(runs=runs, dates=tuple(d for d, _ in dated), results_dir=str(root))


def _geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def consecutive_regressions(history: History, config: Thresholds | None = None,
                            ) -> dict[tuple[str, str, str], list[Comparison]]:
    """(head commit, machine, benchmark) -> failing comparisons vs the previous commit."""
    out: dict[tuple[str, str, str], list[Comparison]] = {}
    for prev, cur in zip(history.runs, history.runs[1:]):
        add_regressions(out, compare(prev, cur, config))
    return out


def add_regressions(into: dict[tuple[str, str, str], list[Comparison]],
                    report: ComparisonReport) -> None:
    for c in report.regressions:
        into.setdefault((report.head_commit, c.machine, c.benchmark), []).append(c)


@_styled
def history_chart(history: History, benchmark: str,
                  regressions: Mapping[tuple[str, str, str], Sequence[Comparison]] | None = None,
                  ) -> Figure:
    """Geometric mean of ``benchmark`` over its cases, per machine, over commits."""
    regressions = regressions or {}
    fig = _figure(10.0, 4.6)
    ax = fig.add_subplot()
    unit = next((m.unit for r in history.runs for m in r.metrics() if m.benchmark == benchmark), "")
    ax.set_title(f"{benchmark}: history over commits", loc="left")
    ax.set_xlabel("commit (commit-date order)")
    ax.set_ylabel(f"geometric mean over cases ({unit or 'no unit'})\n{_direction(unit)}")
    machines = sorted({m.machine for r in history.runs for m in r.machines
                       if any(x.benchmark == benchmark for x in m.metrics)})
    if not machines:
        _empty(ax, f"no results for {benchmark} yet")
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
            g = _geomean([m.value for m in ms if m.ok])
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
    handles += [_fail_handle("failed cases at this commit"),
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


@_styled
def pr_chart(report: ComparisonReport, max_cases: int = 30) -> Figure:
    """Base vs head for every changed case, per machine; head drawn relative to base = 1."""
    panels = [(m, [c for c in m.comparisons if c.verdict in _CHANGED]) for m in report.machines]
    shown = [(m, cs) for m, cs in panels if cs]
    rows = sum(min(len(cs), max_cases) for _, cs in shown)
    fig = _figure(11.0, 1.2 + 0.55 * max(rows, 2) + 0.9 * len(shown))
    fig.suptitle(f"base {report.base_commit[:8]} vs head {report.head_commit[:8]}: changed cases",
                 fontweight="bold")
    for m in report.machines:
        if m.status != "both":
            add_note(fig, f"{m.machine}: {m.status.replace('-', ' ')} results; nothing compared there")
    if not shown:
        _empty(fig.add_subplot(), "no changed cases between base and head")
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
    handles.append(_fail_handle("failed (no value)"))
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


def load_comparison(source: str | os.PathLike[str] | ComparisonReport) -> ComparisonReport:
    if isinstance(source, ComparisonReport):
        return source
    p = Path(source)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        return ComparisonReport.from_dict(data)
    except OSError as exc:
        raise VlmpathError(f"cannot read comparison {p}: {exc.strerror}; pass the file "
                           "`vlmpath compare --json` wrote") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise VlmpathError(f"{p} is not a vlmpath comparison JSON ({type(exc).__name__}: {exc}); "
                           "pass the file `vlmpath compare --json` wrote") from None


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
    found = {path_of(b) for b in _primary(shown.metrics())} if shown else set()
    paths = sorted(found | set(DEFAULT_PATHS))  # a path without results still gets its note
    for p in paths:
        figures.append((f"path-{_safe_name(p)}", "path", path_chart(shown, p), ("png",)))
    figures.append(("vendors", "vendor", vendor_chart(shown), ("png",)))
    regs = consecutive_regressions(history)
    if report is not None:
        add_regressions(regs, report)
    benches = _headline(m for r in history.runs for m in r.metrics())
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
