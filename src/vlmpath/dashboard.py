"""Where does a person find our charts and the latest summary next to asv's dashboard?

``write_dashboard(html_dir, reports_dir)`` adds one page, ``<html_dir>/vlmpath/index.html``,
to the site ``asv publish`` wrote: it links back to asv's own dashboard, shows the
latest summary (``reports/summary.md`` / ``.json`` when present) and every chart
``vlmpath report`` drew (copied into ``<html_dir>/vlmpath/charts/``). asv's own
``index.html`` is never touched: ``asv publish`` rewrites it on every run, so an edit
there would vanish, and asv's pages stay exactly as asv ships them. Link to
``vlmpath/`` from wherever the site is announced (README, the PR comment).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import VlmpathError
from .report import CHART_DIR, MANIFEST
from .results import write_text_atomic

PAGE_DIR = "vlmpath"
SUMMARY_FILES = ("summary.md", "summary.json")


def _copy_atomic(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _charts(reports: Path) -> list[dict]:
    """Charts from the manifest ``vlmpath report`` wrote; else every PNG found (no captions)."""
    manifest = reports / CHART_DIR / MANIFEST
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            charts = list(data["charts"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VlmpathError(f"corrupted chart manifest {manifest} ({type(exc).__name__}): "
                               "re-run `vlmpath report`") from None
        return [c for c in charts if all((reports / f).is_file() for f in c.get("files", ()))]
    return [{"name": p.stem, "title": p.stem, "files": [f"{CHART_DIR}/{p.name}"], "notes": []}
            for p in sorted((reports / CHART_DIR).glob("*.png"))]


def _figure_html(chart: dict) -> str:
    files = list(chart.get("files", ()))
    png = next((f for f in files if f.endswith(".png")), files[0])
    big = next((f for f in files if f.endswith(".svg")), png)
    title = html.escape(str(chart.get("title") or chart.get("name")))
    notes = "".join(f"<li>{html.escape(str(n))}</li>" for n in chart.get("notes", ()))
    return (f'<figure id="{html.escape(str(chart.get("name")))}">'
            f'<a href="{html.escape(big)}"><img src="{html.escape(png)}" alt="{title}"></a>'
            f"<figcaption>{title}{f'<ul class=notes>{notes}</ul>' if notes else ''}</figcaption>"
            "</figure>")


_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
figure{margin:1.5em 0;border-top:1px solid #ddd;padding-top:.5em}
img{max-width:100%;height:auto}figcaption{font-weight:600}.notes{font-weight:400;color:#555}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;white-space:pre-wrap}"""


def write_dashboard(html_dir: str | os.PathLike[str], reports_dir: str | os.PathLike[str]) -> Path:
    """Copy charts and summary into ``<html_dir>/vlmpath/`` and write its index page; returns it."""
    site, reports = Path(html_dir), Path(reports_dir)
    if not site.is_dir():
        raise VlmpathError(f"dashboard dir {site} does not exist: run `asv publish` (or "
                           "`vlmpath serve`) first, or pass the html_dir from asv.conf.json")
    if not reports.is_dir():
        raise VlmpathError(f"reports dir {reports} does not exist: run `vlmpath report --out "
                           f"{reports}` first")
    page_dir = site / PAGE_DIR
    charts = _charts(reports)
    for chart in charts:
        for f in chart["files"]:
            _copy_atomic(reports / f, page_dir / f)
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8>"
             f"<title>vlmpath benchmarks</title><style>{_STYLE}</style></head><body>",
             "<h1>vlmpath benchmarks</h1>"]
    if (site / "index.html").is_file():
        parts.append('<p><a href="../index.html">asv dashboard (every benchmark over commits)</a></p>')
    else:
        parts.append("<p>The asv dashboard has not been published here yet (<code>asv publish</code>).</p>")
    parts.append("<h2>Latest summary</h2>")
    found = [name for name in SUMMARY_FILES if (reports / name).is_file()]
    for name in found:
        _copy_atomic(reports / name, page_dir / name)
    if found:
        parts.append("<p>" + " · ".join(f'<a href="{n}">{n}</a>' for n in found) + "</p>")
        if "summary.md" in found:
            text = (reports / "summary.md").read_text(encoding="utf-8", errors="replace")
            # The verdict line up front; the whole markdown (tables) folded below it.
            first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("<!--")), "")
            parts.append(f'<p id="headline">{html.escape(first)}</p>')
            parts.append(f'<details><summary>full summary.md</summary><pre id="summary">'
                         f"{html.escape(text)}</pre></details>")
    else:
        parts.append(f"<p>No summary yet ({' / '.join(SUMMARY_FILES)} not found in the reports dir).</p>")
    parts.append("<h2>Charts</h2>")
    if charts:
        parts.extend(_figure_html(c) for c in charts)
    else:
        parts.append("<p>No charts yet: run <code>vlmpath report</code>.</p>")
    parts.append("</body></html>\n")
    index = page_dir / "index.html"
    write_text_atomic(index, "\n".join(parts))
    return index
