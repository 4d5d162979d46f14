"""How is a report figure built, annotated and saved, whatever it shows?

The pieces every chart in ``report.py`` shares: the colour-blind safe palette with
hatches and markers (charts survive greyscale printing), the per-figure style (applied
with ``rc_context`` only while a figure is built: no global rcParams change), a figure on
an explicit Agg canvas (no pyplot, no display), notes drawn under the axes that
``figure_notes`` reads back, marks on the drawn artists that ``figure_marks`` reads back
(what a chart judged: regression markers, verdict bars, "higher is better" labels, so a
test or the manifest can check them without pixels), the failed / not-run markers, and
``save_figure``, which writes atomically.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import offset_copy

from vlmpath.core import atomic

# Okabe-Ito (colour-blind safe); vermillion is kept for failures only. Each series also
# gets a hatch or a marker so that the charts survive greyscale printing.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
FAIL = "#D55E00"
BASE_GREY = "#9A9A9A"
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++")
MARKERS = ("o", "s", "^", "D", "v", "P", "*", "h")
NOTE_GID = "vlmpath-note"
# Per-figure style, applied only while a figure is built (rc_context restores it).
STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.titleweight": "bold", "axes.grid": True,
    "axes.axisbelow": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "hatch.linewidth": 0.8, "legend.fontsize": 8,
}
# Read when a figure is *saved*, so it is applied around savefig, not while building.
SAVE_STYLE = {"svg.hashsalt": "vlmpath"}  # stable SVG ids: reruns give identical files


def styled(fn):
    """Decorator: build the figure under ``STYLE`` (restored when the function returns)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return fn(*args, **kwargs)
    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """An empty figure (inches) with constrained layout on its own Agg canvas."""
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


MARK_GID = "vlmpath-mark:"


def mark(artist, text: str):
    """Tag a drawn artist with what it says (read back by ``figure_marks``); returns it."""
    artist.set_gid(MARK_GID + text)
    return artist


def figure_marks(fig: Figure) -> list[str]:
    """The marks of every tagged artist in ``fig``, in drawing order, each once."""
    found = fig.findobj(lambda a: (a.get_gid() or "").startswith(MARK_GID))
    return list(dict.fromkeys(a.get_gid()[len(MARK_GID):] for a in found))


def direction_label(ax, unit: str, text: str) -> str:
    """Tag the y label of ``ax`` with the direction it states for ``unit``; returns ``text``."""
    mark(ax.yaxis.label, f"direction {unit}: {text}")
    return text


#: The mark of a chart drawn without data (only its message): pages leave it out.
EMPTY_MARK = "no data"


def draw_empty(ax, message: str) -> None:
    mark(ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center",
                 fontsize=11, color="#444444", wrap=True), EMPTY_MARK)
    ax.set_xticks([])
    ax.set_yticks([])


def draw_failed_marker(ax, x: float, label: str = "FAILED") -> None:
    ax.plot([x], [0], marker="X", markersize=11, color=FAIL, markeredgecolor="black",
            linestyle="none", clip_on=False, zorder=5)
    ax.annotate(label, (x, 0), xytext=(0, 9), textcoords="offset points", rotation=90,
                ha="center", va="bottom", color=FAIL, fontweight="bold", fontsize=8)


def draw_not_run(ax, x: float) -> None:
    ax.annotate("not run", (x, 0), xytext=(0, 3), textcoords="offset points", rotation=90,
                ha="center", va="bottom", fontsize=7, color="#666666")


def fail_handle(label: str = "failed case") -> Line2D:
    return Line2D([], [], marker="X", color=FAIL, markeredgecolor="black", linestyle="none",
                  markersize=9, label=label)


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix) so readers never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fmt = target.suffix.lstrip(".").lower() or "png"
    with atomic.replacing(target, suffix=f".{fmt}") as tmp, matplotlib.rc_context(SAVE_STYLE):
        fig.savefig(tmp, format=fmt, dpi=110, bbox_inches="tight", facecolor="white",
                    metadata={"Date": None} if fmt == "svg" else None)
    return target
