"""How does a served model's throughput rise with concurrency, base against head, as one chart?

``serve_chart(base_docs, head_docs, path)`` draws two sides' serve runs (checked documents,
``serving.run_file.load_run``; one per round): one panel per workload, x the concurrency
level (requests in flight), y output tok/s (higher is better; the metric table's direction
for tok/s). Each side is a line through the median of every sample of that level over the
rounds (each repeat of each round one sample), the min-max of those samples as its error
bar and ``n=`` their count written at the point, so a lone value never looks like a
measured spread. A level with failed requests is the red FAILED marker at its x, never a
point (a server that fails fast must not look fast). The note says how the verdict judges
the same numbers (pairs of interleaved rounds, not this pooled view).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path

from vlmpath.core.metrics import METRIC_BY_NAME
from vlmpath.render.escape import log_line
from vlmpath.render.report_figure import (
    BASE_GREY,
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

SIDES = (("base", BASE_GREY, "o", "--"), ("head", PALETTE[0], "s", "-"))
#: Workloads drawn at most (one panel each); the rest are named in a note.
MAX_PANELS = 8


def _levels(docs: Sequence[dict], workload: str) -> dict[int, tuple[list[float], bool]]:
    """concurrency -> (every output tok/s sample over the rounds, any request failed)."""
    out: dict[int, tuple[list[float], bool]] = {}
    for doc in docs:
        for c in doc["cases"]:
            if c["workload"] != workload:
                continue
            vals, failed = out.setdefault(c["concurrency"], ([], False))
            samples = c["samples"].get("output_tok_per_s") or (
                [c["output_tok_per_s"]] if c["output_tok_per_s"] is not None else [])
            vals.extend(samples)
            out[c["concurrency"]] = (vals, failed or bool(c["errors"]) or c["error"] is not None)
    return out


@styled
def serve_figure(base_docs: Sequence[dict], head_docs: Sequence[dict], title: str | None = None):
    """The figure (not saved): see the module docstring."""
    unit = METRIC_BY_NAME["serve_output_tok_per_s"].unit
    direction = METRIC_BY_NAME["serve_output_tok_per_s"].direction
    workloads = list(dict.fromkeys(c["workload"] for d in (*base_docs, *head_docs) for c in d["cases"]))
    shown = workloads[:MAX_PANELS]
    fig = new_figure(max(4.5, 3.4 * len(shown)), 4.0)
    axes = fig.subplots(1, max(1, len(shown)), squeeze=False)[0]
    any_failed = False
    for ax, wl in zip(axes, shown):
        levels = sorted({c for docs in (base_docs, head_docs) for c in _levels(docs, wl)})
        for side, docs, (name, colour, marker, style) in ((s[0], d, s) for s, d in zip(SIDES, (base_docs, head_docs))):
            got = _levels(docs, wl)
            xs, ys, lo, hi = [], [], [], []
            for c in levels:
                if c not in got:
                    continue
                vals, failed = got[c]
                if failed or not vals:
                    draw_failed_marker(ax, c)
                    mark(ax.lines[-1], f"{side} {wl} c={c}: failed")
                    any_failed = True
                    continue
                med = statistics.median(vals)
                xs.append(c)
                ys.append(med)
                lo.append(med - min(vals))
                hi.append(max(vals) - med)
                ax.annotate(f"n={len(vals)}", (c, med), xytext=(4, -10 if side == "base" else 4),
                            textcoords="offset points", fontsize=7, color=colour)
            if xs:
                line = ax.errorbar(xs, ys, yerr=[lo, hi], color=colour, marker=marker, linestyle=style,
                                   capsize=3, label=name)
                mark(line.lines[0], f"{side} {wl}: " + ", ".join(f"c={x} {y:.3g}" for x, y in zip(xs, ys)))
        ax.set_title(log_line(wl)[:40])
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels or [1], [str(c) for c in levels] or ["1"])
        ax.minorticks_off()
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylim(bottom=0)
    axes[0].set_ylabel(direction_label(axes[0], unit, f"output {unit} ({direction} is better)"))
    handles, labels = axes[0].get_legend_handles_labels()
    if any_failed:
        handles.append(fail_handle("failed level"))
    fig.legend(handles=handles, loc="outside upper right", frameon=False)
    fig.suptitle(title or "served throughput vs concurrency: base against head")
    add_note(fig, "each point: median of every sample over the rounds (n written); bars: min to max; the verdict "
             "judges the interleaved rounds in pairs, not this pooled view")
    if len(workloads) > len(shown):
        add_note(fig, f"{len(workloads) - len(shown)} more workloads not drawn")
    return fig


def serve_chart(base_docs: Sequence[dict], head_docs: Sequence[dict], path: str | os.PathLike[str],
                title: str | None = None) -> Path:
    """Draw ``serve_figure`` and write it (PNG or SVG by the suffix) atomically."""
    if not any(d["cases"] for d in (*base_docs, *head_docs)):
        raise ValueError("no serve cases to draw")
    return save_figure(serve_figure(base_docs, head_docs, title), path)
