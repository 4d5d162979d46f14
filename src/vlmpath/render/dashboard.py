"""Where does a person find our charts and the latest summary next to asv's dashboard?

``write_dashboard(html_dir, reports_dir)`` adds one page, ``<html_dir>/vlmpath/index.html``,
to the site ``asv publish`` wrote: it links back to asv's own dashboard, shows the
latest summary (``summary.md`` / ``.json``: ``vlmpath run`` writes them into its reports
dir, ``reports/out`` by default; one in the reports dir itself counts too, the newer wins)
and every chart
``vlmpath report`` drew (copied into ``<html_dir>/vlmpath/charts/``). It does not touch
asv's own ``index.html`` (``asv publish`` rewrites it on every run, so a link added
there would vanish). Link to ``vlmpath/`` from wherever the site is announced (README,
the PR comment).

``localize_assets(html_dir)`` makes the site work offline (GPU boxes and CI runners often
cannot reach the public CDNs asv's pages load jQuery, flot and bootstrap from): it copies
the vendored releases shipped in ``vlmpath/www_vendor/`` into ``<html_dir>/vendor/`` and
points the CDN ``<script src>`` / ``<link href>`` of every published page at them. That
is the only edit vlmpath makes to asv's pages, and it must follow every ``asv publish``
(which deletes html_dir and copies asv's pages afresh).
"""

from __future__ import annotations

import html
import json
import os
import re
import warnings
from importlib import resources
from pathlib import Path

from vlmpath.core import atomic
from vlmpath.core.atomic import write_text as write_text_atomic
from vlmpath.core.errors import VlmpathError
from vlmpath.render import md_html
from vlmpath.render.landing import STYLE as LANDING_STYLE
from vlmpath.render.report import CHART_DIR, MANIFEST
from vlmpath.render.report_figure import EMPTY_MARK
from vlmpath.render.summary import LATEST_JSON, LATEST_MD

PAGE_DIR = "vlmpath"
SUMMARY_FILES = (LATEST_MD, LATEST_JSON)
#: Where ``vlmpath run`` writes its summaries by default, below the reports dir.
RUN_REPORTS_SUBDIR = "out"
VENDOR_DIR = "vendor"  # under html_dir
VENDOR_PACKAGE_DIR = "www_vendor"  # package data, see its README for provenance
#: Exact CDN address in asv 0.6's pages -> vendored file. Exact, not by file name: a
#: newer asv asking for another release must not silently get this one.
CDN_ASSETS = {
    "https://code.jquery.com/jquery-3.3.1.min.js": "jquery-3.3.1.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": "jquery.flot.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": "jquery.flot.time.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js":
        "jquery.flot.selection.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js":
        "jquery.flot.categories.min.js",
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": "jquery.flot.orderBars.js",
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": "stupidtable.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": "md5.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": "bootstrap.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": "bootstrap.min.css",
}
_TAG = re.compile(r"<(script|link)\b[^>]*>", re.IGNORECASE)
_ATTR = r"""\s{name}\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)"""
_SRC = re.compile(_ATTR.format(name="src"), re.IGNORECASE)
_HREF = re.compile(_ATTR.format(name="href"), re.IGNORECASE)
_REL = re.compile(_ATTR.format(name="rel"), re.IGNORECASE)
# integrity no longer matches (some copies are unminified); crossorigin may be bare.
_SRI = re.compile(r"""\s(?:integrity|crossorigin)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?(?=[\s/>])""",
                  re.IGNORECASE)
_EXTERNAL = re.compile(r"^(?:https?:)?//", re.IGNORECASE)
_LOADED_RELS = {"stylesheet", "preload", "modulepreload"}  # a <link> the page needs to render


class UnvendoredAssetWarning(UserWarning):
    """A page loads a CDN address ``CDN_ASSETS`` has no copy of; it stays a network load."""


def _copy_atomic(src: Path, dst: Path) -> None:
    atomic.copy_file(src, dst)


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
    """A chart as a figure. Its title and notes are drawn inside the picture
    (``report_figure``), so they are its alt text, not a caption repeating them."""
    files = list(chart.get("files", ()))
    png = next((f for f in files if f.endswith(".png")), files[0])
    big = next((f for f in files if f.endswith(".svg")), png)
    alt = " ".join([str(chart.get("title") or chart.get("name")), *(str(n) for n in chart.get("notes", ()))])
    return (f'<figure id="{html.escape(str(chart.get("name")))}">'
            f'<a href="{html.escape(big)}"><img src="{html.escape(png)}" alt="{html.escape(alt)}"></a>'
            "</figure>")


_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
figure{margin:1.5em 0;border-top:1px solid #ddd;padding-top:.5em}
img{max-width:100%;height:auto}figcaption{font-weight:600}.notes{font-weight:400;color:#555}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;white-space:pre-wrap}
table.md{border-collapse:collapse;font-size:13px;width:100%;table-layout:fixed;overflow-wrap:anywhere}
table.md th,table.md td{border:1px solid #ddd;padding:2px 6px;text-align:left}"""


def write_dashboard(html_dir: str | os.PathLike[str], reports_dir: str | os.PathLike[str], *,
                    results_dir: str | os.PathLike[str] | None = None, commit: str | None = None,
                    machine: str | None = None) -> Path:
    """Copy charts and summary into ``<html_dir>/vlmpath/`` and write its index page; returns it.

    With ``results_dir`` the page leads with what ``commit`` (default the newest with
    results) found on ``machine`` (``render.landing``: one tile per question, each with its
    path's chart), then the history, then the summary and every other chart with data."""
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
             f"<title>vlmpath benchmarks</title><style>{_STYLE}\n{LANDING_STYLE}</style></head><body>",
             "<h1>vlmpath benchmarks</h1>"]
    if (site / "index.html").is_file():
        parts.append('<p><a href="../index.html">asv dashboard (every benchmark over commits)</a></p>')
    else:
        parts.append("<p>The asv dashboard has not been published here yet (<code>asv publish</code>).</p>")
    used: set[str] = set()
    if results_dir is not None:
        front, used = _front(results_dir, commit, machine, charts)
        parts.append(front)
    parts.append("<h2>Latest summary</h2>")
    where = latest_summary_dir(reports)
    found = [name for name in SUMMARY_FILES if (where / name).is_file()]
    for name in found:
        _copy_atomic(where / name, page_dir / name)
    if found:
        parts.append("<p>" + " · ".join(f'<a href="{n}">{n}</a>' for n in found) + "</p>")
        if LATEST_MD in found:
            text = (where / LATEST_MD).read_text(encoding="utf-8", errors="replace")
            # The verdict line up front (a heading's words, not its #), the whole summary
            # rendered (render.md_html: tables as tables) and folded below it.
            first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("<!--")), "")
            headline = _inline_markdown(re.sub(r"^#+\s*", "", first))
            parts.append(f'<p id="headline">{headline}</p>')
            parts.append(f'<details><summary>the whole summary</summary><div id="summary" class=md>'
                         f"{md_html.to_html(text)}</div></details>")
    else:
        parts.append(f"<p>No summary yet ({' / '.join(SUMMARY_FILES)} not found in the reports dir).</p>")
    rest = [c for c in charts if c.get("name") not in used and not (results_dir is not None and _empty(c))]
    parts.append("<h2>Charts</h2>" if results_dir is None else "<h2>More charts</h2>")
    if rest:
        parts.extend(_figure_html(c) for c in rest)
    elif results_dir is None:
        parts.append("<p>No charts yet: run <code>vlmpath report</code>.</p>")
    elif not used:
        parts.append("<p>No chart has data yet.</p>")
    skipped = [c for c in charts if c.get("name") not in used and results_dir is not None and _empty(c)]
    if skipped:  # drawn as a note only (no GPU results on a CPU box): named, not shown empty
        parts.append("<p class=meta>Not shown (nothing to draw here): " + "; ".join(
            html.escape(f"{c.get('name')}: {(c.get('notes') or ['no data'])[0]}") for c in skipped) + "</p>")
    parts.append("</body></html>\n")
    index = page_dir / "index.html"
    write_text_atomic(index, "\n".join(parts))
    return index


def _empty(chart: dict) -> bool:
    """A chart drawn without data (only its note): ``report_figure.draw_empty`` marks it."""
    return EMPTY_MARK in chart.get("marks", ())


def _front(results_dir, commit, machine, charts) -> tuple[str, set[str]]:
    from vlmpath.render.landing import landing_html
    from vlmpath.render.report_data import load_history, measured_at

    history = load_history(results_dir, None)
    run = history.find(commit) if commit else history.latest
    date = next((d for r, d in zip(history.runs, history.dates) if run is not None and r.commit == run.commit), None)
    figures = {str(c.get("name")): _figure_html(c) for c in charts if not _empty(c)}
    measured = {m.machine: measured_at(results_dir, run.commit, m.machine) for m in run.machines} if run else {}
    return landing_html(run, machine, [r.commit for r in history.runs], figures, date_ms=date,
                        measured_ms=measured)


def _inline_markdown(line: str) -> str:
    """One markdown line as safe HTML (``render.md_html.inline``): escapes undone, code
    spans and ``**bold**`` (the verdict words) kept, everything else text."""
    return md_html.inline(line)


def latest_summary_dir(reports: Path) -> Path:
    """The reports dir or its ``out/`` (``vlmpath run``'s default), whichever holds the newer
    ``summary.md``; the reports dir when neither has one."""
    have = [d for d in (reports, reports / RUN_REPORTS_SUBDIR) if (d / LATEST_MD).is_file()]
    return max(have, key=lambda d: (d / LATEST_MD).stat().st_mtime_ns) if have else reports


# --- offline assets -----------------------------------------------------------------------
def _unquote(value: str) -> str:
    return value[1:-1] if value[:1] in "\"'" else value


def _asset_url(tag: str) -> tuple[re.Match[str], str] | None:
    """The external address a ``<script>`` / ``<link>`` start tag loads, with its attribute."""
    if tag[1:].lower().startswith("script"):
        m = _SRC.search(tag)
    else:
        rel = _REL.search(tag)
        if rel is None or not set(_unquote(rel.group(1)).lower().split()) & _LOADED_RELS:
            return None
        m = _HREF.search(tag)
    if m is None or not _EXTERNAL.match(_unquote(m.group(1))):
        return None
    return m, html.unescape(_unquote(m.group(1)))


def _copy_vendor(site: Path) -> None:
    """``www_vendor/`` files into ``<site>/vendor/``; unchanged files are not rewritten."""
    source = resources.files("vlmpath.render").joinpath(VENDOR_PACKAGE_DIR)
    for name in sorted({*CDN_ASSETS.values(), "README.md"}):
        try:
            data = source.joinpath(name).read_bytes()
        except OSError:
            raise VlmpathError(f"vendored asset {name} missing from the installed vlmpath package "
                               f"({VENDOR_PACKAGE_DIR}/): reinstall vlmpath; its package data must "
                               f"include {VENDOR_PACKAGE_DIR}/*") from None
        dst = site / VENDOR_DIR / name
        if dst.is_file() and dst.read_bytes() == data:
            continue
        atomic.write_bytes(dst, data)


def localize_assets(html_dir: str | os.PathLike[str]) -> list[str]:
    """Point every published page's CDN scripts and stylesheets at copies under ``vendor/``.

    Copies the vendored files into ``<html_dir>/vendor/``, then in each ``*.html`` below
    ``html_dir`` replaces a ``<script src>`` / ``<link href>`` listed in ``CDN_ASSETS``
    by the relative path of its copy and drops that tag's ``integrity`` and
    ``crossorigin`` (nothing else on the page changes). An external address not in
    ``CDN_ASSETS`` is left as it is and reported with an ``UnvendoredAssetWarning``.
    Idempotent: a second call rewrites nothing. Returns one line per rewritten tag,
    ``"<page>: <cdn url> -> <local path>"``.
    """
    site = Path(html_dir)
    if not (site / "index.html").is_file():
        raise VlmpathError(f"{site} has no index.html: run `asv publish` (or `vlmpath run`) first, "
                           "or pass the html_dir from asv.conf.json")
    _copy_vendor(site)
    done: list[str] = []
    for page in sorted(site.rglob("*.html")):
        rel_page = page.relative_to(site)
        if rel_page.parts[0] == VENDOR_DIR:
            continue
        text = page.read_bytes().decode("utf-8")
        unknown: list[str] = []

        def rewrite(tag_match: re.Match[str], page=page, rel_page=rel_page, unknown=unknown) -> str:
            tag = tag_match.group(0)
            found = _asset_url(tag)
            if found is None:
                return tag
            attr, url = found
            if url not in CDN_ASSETS:
                unknown.append(url)
                return tag
            local = os.path.relpath(site / VENDOR_DIR / CDN_ASSETS[url], page.parent).replace(os.sep, "/")
            name = attr.group(0).split("=", 1)[0]
            tag = f'{tag[:attr.start()]}{name}="{html.escape(local)}"{tag[attr.end():]}'
            done.append(f"{rel_page.as_posix()}: {url} -> {local}")
            return _SRI.sub("", tag)

        new = _TAG.sub(rewrite, text)
        for url in unknown:
            warnings.warn(f"{page}: {url} has no vendored copy (not in vlmpath.render.dashboard.CDN_ASSETS), so "
                          "this page still needs the network for it; add the file to "
                          f"vlmpath/{VENDOR_PACKAGE_DIR}/ and an entry to CDN_ASSETS",
                          UnvendoredAssetWarning, stacklevel=2)
        if new != text:
            write_text_atomic(page, new)
    return done
