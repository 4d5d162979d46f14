"""How do several engines and releases look side by side on the same workloads, as one chart?

``engines_chart`` draws what ``vlmpath measure --engine A --engine B ... --chart FILE``
measured: per workload one bar per engine label (in the order given: e.g. ``reference``,
then one engine's releases, then another's), in two panels over the same x axis:

- tok/s (higher is better), with each case's accuracy written on its bar, so a fast but
  wrong release cannot look good; a failed case is the red "FAILED" marker;
- host-device syncs outside the vision tower (lower is better; a sync an engine's merge
  gained or lost in a release is one bar per release here), with the encoder calls written
  on the bar.

Marks (``report_figure.mark``) say what each bar showed, for tests and the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.patches import Patch

from vlmpath.render.chart_axes import use_log
from vlmpath.render.fmt import fmt_value
from vlmpath.render.report_figure import (
    HATCHES,
    PALETTE,
    add_note,
    direction_label,
    draw_failed_marker,
    fail_handle,
    mark,
    new_figure,
    save_figure,
    styled,
)
from vlmpath.suite.record import CaseRecord


def _label(r: CaseRecord, several: bool) -> str:
    """The bar's series: the engine label; the reference's encode strategy too when it ran
    several (``measure`` plans every default strategy for it)."""
    return f"{r.engine}/{r.pipeline.get('encode', '?')}" if several and r.engine == "reference" else r.engine


def _order(records: Sequence[CaseRecord]) -> tuple[list[str], list[str], dict]:
    several = len({r.pipeline.get("encode") for r in records if r.engine == "reference"}) > 1
    by = {(_label(r, several), r.workload): r for r in records}
    engines = list(dict.fromkeys(e for e, _ in by))
    workloads = list(dict.fromkeys(r.workload for r in records))
    return engines, workloads, by


@styled
def engines_figure(records: Sequence[CaseRecord], title: str | None = None):
    """The figure (not saved): see the module docstring."""
    engines, workloads, by = _order(records)
    fig = new_figure(max(6.0, 1.2 + 0.55 * len(engines) * len(workloads)), 6.2)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    width = 0.8 / max(1, len(engines))
    for i, eng in enumerate(engines):
        colour, hatch = PALETTE[i % len(PALETTE)], HATCHES[i % len(HATCHES)]
        for j, wl in enumerate(workloads):
            x = j - 0.4 + width * (i + 0.5)
            r = by.get((eng, wl))
            if r is None:
                continue
            if r.error or r.tok_per_s is None:
                draw_failed_marker(top, x)
                mark(top.lines[-1], f"{eng} {wl}: failed")  # the marker just drawn
                continue
            bar = top.bar(x, r.tok_per_s, width, color=colour, hatch=hatch, edgecolor="black", linewidth=0.4)[0]
            acc = "-" if r.accuracy is None else f"{r.accuracy:.2f}"
            mark(bar, f"{eng} {wl}: tok/s {r.tok_per_s:.0f}, accuracy {acc}")
            n = len(r.samples) or 1  # timed passes behind the median
            top.annotate(f"acc {acc}, n={n}", (x, r.tok_per_s), xytext=(0, 2), textcoords="offset points",
                         rotation=90, ha="center", va="bottom", fontsize=7,
                         color="black" if r.accuracy in (None, 1.0) else "#D55E00")
            if r.syncs is not None:
                sb = bottom.bar(x, r.syncs, width, color=colour, hatch=hatch, edgecolor="black", linewidth=0.4)[0]
                mark(sb, f"{eng} {wl}: syncs {r.syncs}")
                calls = "-" if r.encoder_calls is None else fmt_value(r.encoder_calls, "calls")
                bottom.annotate(f"{calls} calls", (x, r.syncs), xytext=(0, 2), textcoords="offset points",
                                rotation=90, ha="center", va="bottom", fontsize=7)
    rates = [r.tok_per_s for r in records if r.tok_per_s and not r.error]
    if use_log(rates):  # one workload (cache_reuse) would flatten the rest
        top.set_yscale("log")
        top.set_ylim(min(rates) / 3, max(rates) * 12)
        mark(top.yaxis, "log scale tok/s")
    top.set_ylabel(direction_label(top, "tok/s", "tok/s (higher is better)" + (", log scale" if use_log(rates) else "")))
    bottom.set_xlabel("workload")
    bottom.set_ylabel(direction_label(bottom, "syncs", "syncs outside the tower\n(lower is better)"))
    bottom.set_xticks(range(len(workloads)), workloads, rotation=20, ha="right")
    top.set_title(title or "engines side by side: " + ", ".join(engines))
    handles = [Patch(facecolor=PALETTE[i % len(PALETTE)], hatch=HATCHES[i % len(HATCHES)], edgecolor="black",
                     label=e) for i, e in enumerate(engines)]
    if any(r.error for r in records):
        handles.append(fail_handle())
    top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    scales = sorted({r.scale for r in records})
    devices = sorted({r.device for r in records})
    add_note(fig, f"scale {', '.join(scales)} on {', '.join(devices)}; tok/s is the median of the timed passes "
             "(timings: compare releases in one run on one machine); accuracy and syncs are exact")
    return fig


def engines_chart(records: Sequence[CaseRecord], path: str | os.PathLike[str], title: str | None = None) -> Path:
    """Draw ``engines_figure`` and write it (PNG or SVG by the suffix) atomically."""
    if not records:
        raise ValueError("no records to draw")
    return save_figure(engines_figure(records, title), path)
