"""What does the front page of the published dashboard say about one commit on this box?

The HTML of the landing page ``render.dashboard.write_dashboard`` writes into
``<html_dir>/vlmpath/index.html`` when it is given the results: one tile per question
the suite answers (``render.landing_data``: batched vs per-request, masked_scatter vs
where, readbacks of the count, forwarded vs re-hashed, default vs legacy pipeline), each
a table of the recorded numbers with n and the spread, the better side marked, and the
path's chart under it; then the history charts once two commits have results (with one
commit a line says when they start, instead of a graph of lone dots). Every value is
escaped (benchmark names and messages come from results files).

``link_from_asv(html_dir)`` adds one marked link at the top of asv's own ``index.html``
pointing here, and ``show_single_points`` makes asv's grid draw a one-commit series as a
dot (a line of one point is nothing: every tile of a fresh store was empty). ``asv
publish`` rewrites both files, so ``vlmpath run`` calls them after every publish, as it
calls ``localize_assets``; idempotent.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from vlmpath.compare.records import MachineRun, RunResults
from vlmpath.core.atomic import write_text as write_text_atomic
from vlmpath.render.fmt import plural
from vlmpath.render.landing_data import Cell, Tile, better_text, measure_unit, reading, tiles

#: The chart of each tile's path (``render.report`` names them ``path-<path>``).
TILE_CHART = {"encode": "path-encode", "inject": "path-inject", "count": "path-inject",
              "hash": "path-hash", "embed": "path-embed"}
BANNER_MARK = "<!-- vlmpath-landing -->"
# Fixed at the bottom right: asv's navigation bar (benchmark name, search) is fixed at the
# top, and a plain line at the top would lie under it; over it, it hid asv's controls.
_BANNER = (f'{BANNER_MARK}<div id="vlmpath-landing" style="position:fixed;bottom:8px;right:10px;z-index:2000;'
           'font:15px system-ui,sans-serif;padding:6px 12px;background:#eef5fb;border:1px solid #7fb0d8;'
           'border-radius:6px"><a href="vlmpath/index.html"><strong>vlmpath: what this box found</strong></a> '
           '(strategy against strategy, latest commit)</div>')
_BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)

STYLE = """.tile{border:1px solid #ccd;border-radius:6px;padding:.6em 1em;margin:1.2em 0}
.tile h2{margin:.2em 0}.q{color:#444;margin:.2em 0 .6em}
.measures{display:flex;flex-wrap:wrap;gap:.4em 1.2em;align-items:flex-start}
.reading{color:#333;font-size:13px;margin:.2em 0 .6em;max-width:80em}
table.vs caption{font-weight:600;text-align:left;padding:2px 0}
table.vs{border-collapse:collapse;font-size:14px;max-width:100%}table.vs th,table.vs td{border:1px solid #ddd;padding:3px 8px}
table.vs td{text-align:right;white-space:nowrap}table.vs td.g{text-align:left;font-weight:600}
td.best{background:#e3f4ea;font-weight:700}td.failed{color:#b03000;font-weight:700}
td.skipped,td.notrun{color:#777}.n{color:#666;font-size:11px;font-weight:400;display:block}
.dir{font-weight:400;color:#555;font-size:12px}.meta{color:#555}"""


def _cell_html(c: Cell) -> str:
    cls = {"ok": "best" if c.best else "", "failed": "failed", "skipped": "skipped",
           "not run": "notrun"}[c.state]
    extra = ""
    if c.state == "ok":
        extra = f'<span class=n>n={c.n}{"; " + html.escape(c.spread) if c.spread else ""}</span>'
    title = f' title="{html.escape(c.title)}"' if c.title else ""
    mark = " ★" if c.best else ""
    return f'<td class="{cls}"{title}>{html.escape(c.text)}{mark}{extra}</td>'


def tile_html(t: Tile, machine: MachineRun, chart: str | None = None, suffix: str = "") -> str:
    spec = t.spec
    what, here = reading(spec.key, machine.backend)
    out = [f'<section class=tile id="tile-{spec.key}{html.escape(suffix)}"><h2>{html.escape(spec.title)}</h2>',
           f"<p class=q>{html.escape(spec.question)}</p>"]
    if what:
        out.append(f"<p class=reading><b>What the numbers measure:</b> {html.escape(what)}"
                   + (f" <b>Here ({html.escape(machine.backend)}):</b> {html.escape(here)}" if here else "") + "</p>")
    if not t.rows:
        out.append(f"<p class=empty-reason>{html.escape(t.note)}</p></section>")
        return "".join(out)
    # One small table per measure, wrapped side by side: a wide tile (three strategies,
    # three measures) fits its card at any width instead of being cut off.
    default = spec.sides[0]
    side_heads = "".join(f"<th>{html.escape(s)}{' (default)' if s == default else ''}</th>" for s in t.sides)
    out.append("<div class=measures>")
    for k, ms in enumerate(spec.measures):
        better = better_text(measure_unit(machine, ms.benchmark))
        out.append(f'<table class=vs><caption>{html.escape(ms.label)}'
                   f'{f" <span class=dir>({html.escape(better)})</span>" if better else ""}</caption>'
                   f"<thead><tr><th>{html.escape(spec.group_label)}</th>{side_heads}</tr></thead><tbody>")
        n = len(t.sides)
        for r in t.rows:
            out.append(f"<tr><td class=g>{html.escape(r.group)}</td>"
                       + "".join(_cell_html(c) for c in r.cells[k * n:(k + 1) * n]) + "</tr>")
        out.append("</tbody></table>")
    out.append("</div><p class=meta>★ the better side of a row (by the unit's direction); "
               "n: values behind the number (a quick run has one).</p>")
    if chart:
        out.append(chart)
    out.append("</section>")
    return "".join(out)


def _when(date_ms: int | None) -> str:
    if not date_ms:
        return ""
    return datetime.fromtimestamp(date_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def landing_html(run: RunResults | None, machine: str | None, commits: Sequence[str],
                 figure: dict[str, str], *, date_ms: int | None = None,
                 measured_ms: dict[str, int | None] | None = None) -> tuple[str, set[str]]:
    """The page's front part for ``run`` on ``machine`` (default its first machine), and
    the chart names it placed. ``figure``: chart name -> its ``<figure>`` HTML (charts
    that have data); ``commits``: every commit with results, oldest first; ``measured_ms``:
    machine -> when asv measured it (``report_data.measured_at``), the date shown;
    ``date_ms`` (the commit's date) is shown only when no measuring time is known."""
    used: set[str] = set()
    if run is None or not run.machines:
        return ("<p class=empty-reason>No results yet: run <code>vlmpath run --quick</code> on this machine; "
                "this page then shows what it found.</p>", used)
    chosen = run.machine(machine) if machine else None
    # `vlmpath run`: this box; a site of several machines (``vlmpath report --html``): each.
    machines = [chosen] if chosen is not None else list(run.machines)
    parts: list[str] = []
    for i, mrun in enumerate(machines):
        fp = mrun.fingerprint
        device = f"{fp.device_name} ({mrun.backend})" if fp is not None and fp.device_name else mrun.backend
        measured = (measured_ms or {}).get(mrun.machine)
        when = (f"; measured {_when(measured)}" if measured else
                f"; commit dated {_when(date_ms)} (no measuring time recorded)" if date_ms else "")
        parts += [f"<h2 id=found{i or ''}>What this box found: {html.escape(mrun.machine)} @ "
                  f"{html.escape(run.commit[:8])}</h2>",
                  f"<p class=meta>{html.escape(device)}{html.escape(when)}; "
                  f"{plural(len(commits), 'commit')} with results. Every number is read from asv's results of "
                  "this commit (never re-measured).</p>"]
        for t in tiles(mrun):
            name = TILE_CHART.get(t.spec.key)
            chart = figure.get(name) if name and name not in used else None  # every machine's panels
            if chart:
                used.add(name)
            parts.append(tile_html(t, mrun, chart, f"-{mrun.machine}" if i else ""))
    parts.append("<h2 id=history>History</h2>")
    history = sorted(n for n in figure if n.startswith("history"))
    if len(commits) < 2:
        parts.append(f"<p class=history-note>One commit has results so far ({html.escape(run.commit[:8])}): the "
                     "history charts start with the second commit <code>vlmpath run</code> records here.</p>")
        used.update(history)  # one dot per machine says nothing: not shown
    elif history:
        parts.extend(figure[n] for n in history)
        used.update(history)
    else:
        parts.append("<p class=history-note>No throughput benchmark has results over two commits yet.</p>")
    return "\n".join(parts), used


#: asv 0.6's grid tile options: a line only, so a one-commit series (one point) draws
#: nothing and every tile of a fresh store is empty. The edit adds the point itself.
GRID_JS = "summarygrid.js"
#: (asv's text, the edit): the point itself, and room above it (``min: 0`` and flot's 2%
#: margin put a lone point on the top border, half clipped).
_GRID_EDITS = (("                        shadowSize: 0\n",
                "                        shadowSize: 0,\n"
                "                        points: {show: data.length < 2, radius: 4}  // vlmpath: one commit\n"),
               ("                        min: 0\n",
                "                        min: 0,\n"
                "                        autoscaleMargin: 0.25  // vlmpath: room above a lone point\n"))


def show_single_points(html_dir: str | Path) -> bool:
    """Make asv's grid draw a lone point (one commit) as a dot; False when the page is
    not asv 0.6's (nothing changed) or already edited. Idempotent."""
    js = Path(html_dir) / GRID_JS
    if not js.is_file():
        return False
    text = js.read_text(encoding="utf-8")
    if any(new in text or text.count(old) != 1 for old, new in _GRID_EDITS):
        return False
    for old, new in _GRID_EDITS:
        text = text.replace(old, new)
    write_text_atomic(js, text)
    return True


def link_from_asv(html_dir: str | Path) -> bool:
    """One marked line at the top of asv's ``index.html`` linking the landing page;
    False when there is no such page or it links already."""
    index = Path(html_dir) / "index.html"
    if not index.is_file():
        return False
    text = index.read_text(encoding="utf-8")
    if BANNER_MARK in text:
        return False
    m = _BODY.search(text)
    if m is None:
        return False
    write_text_atomic(index, text[:m.end()] + _BANNER + text[m.end():])
    return True
