"""What did every release of an engine do, on one chart with the releases in date order?

``sweep_chart(state, records_by_version, path)`` draws a sweep (``vlmpath.suite.sweep``):
one panel per metric over one x axis, the releases placed at their upload dates and labelled with
their versions, one line per workload:

- placement accuracy (1.00 is right; a release that misplaces rows drops);
- encoder calls per case (cross-request batching shows as fewer calls);
- host-device syncs outside the vision tower (lower is better);
- the routine's Python bytecodes (the deterministic count of the engine's own code);
- tok/s (higher is better; timing, so read it as a trend);
- the embedding path's counts (``measure.path_ledger``): re-encodes, off-chunk encodes,
  cache evictions, the storage the cache retains and what it keeps beyond its payload.

A release the adapter could not drive is a red cross on every panel's floor and its
reason is listed under the chart (the finding, not a gap); a partial sweep says so in
the title. Marks (``report_figure.mark``) name what each point showed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.dates as mdates
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from vlmpath.render.report_figure import FAIL, MARKERS, PALETTE, add_note, mark, new_figure, save_figure, styled
from vlmpath.suite.record import CaseRecord
from vlmpath.suite.sweep import SweepState

PANELS = (("accuracy", "accuracy (1.00 = right)"), ("encoder_calls", "encoder calls"),
          ("syncs", "syncs outside tower (lower is better)"), ("routine_bytecodes", "routine bytecodes"),
          ("tok_per_s", "tok/s (higher is better)"),
          # The embedding path's counts (issue 38): one panel each, so that a release boundary
          # where a cache or chunking change landed reads as a step.
          ("reencodes", "re-encodes (lower is better)"), ("off_chunk_encodes", "off-chunk encodes"),
          ("cache_evictions", "cache evictions"), ("cache_retained_bytes", "cache retained bytes"),
          ("cache_unaccounted_bytes", "cache bytes beyond its payload"))
MAX_REASONS = 12


def _value(rec: CaseRecord | None, name: str) -> float | None:
    v = None if rec is None else getattr(rec, name, None)
    return float(v) if isinstance(v, (int, float)) else None


def sweep_chart(state: SweepState, records: Mapping[str, Sequence[CaseRecord]], path: str | os.PathLike) -> Path:
    """Draw ``state``'s releases (``records``: version -> its measured records) to ``path``."""
    return save_figure(draw_sweep(state, records), path)


@styled
def draw_sweep(state: SweepState, records: Mapping[str, Sequence[CaseRecord]]) -> Figure:
    """The chart's figure (see the module docstring)."""
    points = state.ordered()
    workloads = list(state.workloads) or sorted({r.workload for rs in records.values() for r in rs})
    fig = new_figure(max(8.0, 0.7 * len(points) + 4.0), 2.5 * len(PANELS))
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    xs = [p.when for p in points]
    for ax, (name, title) in zip(axes, PANELS):
        ax.set_ylabel(title, fontsize=8)
        noise = False
        for i, w in enumerate(workloads):
            ys, lone = [], False
            for p in points:
                rec = next((r for r in records.get(p.version, ()) if r.workload == w), None)
                ys.append(_value(rec, name) if rec is not None and not rec.error else None)
                # A timing of one pass per release: each measured at its own load, noise.
                lone |= name == "tok_per_s" and ys[-1] is not None and len(rec.samples) < 2
            line_x = [x for x, y in zip(xs, ys) if y is not None]
            line_y = [y for y in ys if y is not None]
            if line_x:
                (ln,) = ax.plot(line_x, line_y, marker=MARKERS[i % len(MARKERS)], color=PALETTE[i % len(PALETTE)],
                                label=w, linewidth=1.2, markersize=5, linestyle=":" if lone else "-",
                                markerfacecolor="none" if lone else PALETTE[i % len(PALETTE)])
                mark(ln, f"{name} {w}{' (n=1: noise)' if lone else ''}: " + ", ".join(f"{y:g}" for y in line_y))
                noise |= lone
        if name == "accuracy":
            ax.set_ylim(-0.05, 1.08)
        elif ax.has_data():
            top = max(1.0, ax.get_ylim()[1]) * 1.1
            ax.set_ylim(bottom=-0.06 * top, top=top)  # a line at 0 (no syncs) stays visible above the floor
            ax.yaxis.set_major_locator(MaxNLocator(nbins=5, integer=name != "tok_per_s"))
        if noise:  # dotted, hollow: said on the panel, not left to be read as a trend
            mark(ax.text(0.01, 0.97, "one timed pass per release (n=1): noise between releases measured at "
                         "different loads, not a trend; judge the counts above", transform=ax.transAxes,
                         fontsize=7, va="top", color="#444444"), f"{name}: noise n=1")
        failed = [p for p in points if p.state == "failed"]
        if failed:  # on the panel's floor whatever its scale: x in data, y in axes units
            (fx,) = ax.plot([p.when for p in failed], [0.04] * len(failed), linestyle="none", marker="x",
                            color=FAIL, markersize=9, markeredgewidth=2, label="adapter cannot drive it",
                            transform=ax.get_xaxis_transform())
            mark(fx, f"{name} FAILED: " + ", ".join(p.version for p in failed))
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7, loc="best")
    axes[-1].set_xticks(xs)
    axes[-1].set_xticklabels([f"{p.version}\n{p.when:%Y-%m-%d}" for p in points], rotation=60, fontsize=7,
                             ha="right")
    axes[-1].xaxis.set_minor_locator(mdates.MonthLocator())
    done = len(state.points)
    whole = len(state.requested) or done
    title = f"{state.engine}: {done} releases by upload date ({state.scale} scale)"
    if state.partial:
        title += f" - PARTIAL: {done} of {whole} requested releases measured"
    mark(fig.suptitle(title, fontsize=11), title)
    reasons = [f"{p.version}: {p.reason}" for p in points if p.state == "failed"]
    if reasons:
        extra = f" (+{len(reasons) - MAX_REASONS} more)" if len(reasons) > MAX_REASONS else ""
        text = "not driven by the adapter:\n" + "\n".join(r[:140] for r in reasons[:MAX_REASONS]) + extra
        add_note(fig, text)
    return fig
