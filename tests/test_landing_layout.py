"""Does the landing page of a real quick run read clean in a real browser at common widths?

The page is published (``runner.run.publish_pages``, as ``vlmpath run`` does) from the
results of one real ``vlmpath run --quick`` (``tests/fixtures/quick_run``) and loaded by
Debian's headless Chromium (the drivers are test_dashboard_browser.py's) inside a frame
1280, 1400 and 1920 px wide; a script there reports what a reader would see:

- a table wider than its card (cut off: the injection table read ``where_inde...``) or a
  page wider than the window;
- raw Markdown in the visible text (``### vlmpath run``, ``**``, ``|---|``);
- a caption repeating the chart's title or note (both are drawn inside the picture);
- an image of a chart drawn without data (the manifest marks it; such a chart is only
  named under "not shown").

Each check is shown red on a copy of the page with that defect planted. Screenshots:
``test-artifacts/landing-<width>.png``.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
from test_dashboard_browser import ARTIFACTS, _Plain, _serve, chromium
from test_report import assert_not_blank

from vlmpath.render.report import CHART_DIR, MANIFEST
from vlmpath.render.report_figure import EMPTY_MARK
from vlmpath.runner.run import publish_pages

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent
RUN = ROOT / "fixtures" / "quick_run"
COMMIT = "0236c8bf"
WIDTHS = (1280, 1400, 1920)
# Test-only page: the landing page in a same-origin frame WIDTH px wide; once it has
# loaded, what a reader sees is written into <pre id=result> for --dump-dom.
LAYOUT_PAGE = """<!doctype html><html><body style="margin:0"><pre id=result>pending</pre>{frames}<script>
function seen(d) {{
  const w = d.defaultView;
  const out = {{wide: [], page: d.documentElement.scrollWidth - w.innerWidth, figcaptions: [], imgs: []}};
  for (const tile of d.querySelectorAll('section.tile, body')) {{
    const box = tile.getBoundingClientRect();
    for (const t of tile.querySelectorAll('table')) {{
      const r = t.getBoundingClientRect();
      if (t.offsetParent !== null && (r.right > box.right + 0.5 || t.scrollWidth > t.clientWidth + 1))
        out.wide.push((tile.id || 'body') + ': ' + t.innerText.slice(0, 60));
    }}
  }}
  out.text = d.body.innerText;
  for (const f of d.querySelectorAll('figure')) {{
    const c = f.querySelector('figcaption');
    if (c) out.figcaptions.push(c.innerText);
  }}
  for (const i of d.images) out.imgs.push({{src: i.getAttribute('src'), w: i.naturalWidth}});
  return out;
}}
// The window's load event waits for every frame, and each frame's for its images.
window.addEventListener('load', () => {{
  document.getElementById('result').textContent = JSON.stringify(
    [...document.querySelectorAll('iframe')].map(f => seen(f.contentDocument)));
}});</script></body></html>"""
RAW_MARKDOWN = re.compile(r"(^|\n)\s*#{1,6} |\*\*|\|\s*-{3,}|(^|\n)\|.*\|\s*($|\n)")


class _Layout(_Plain):
    """Serves the site, and ``/_layout.html?f=PAGE@WIDTH,...``: those pages in frames."""

    def do_GET(self) -> None:
        if self.path.startswith("/_layout.html"):
            frames = [f.split("@") for f in self.path.split("f=", 1)[1].split(",")]
            body = LAYOUT_PAGE.format(frames="".join(
                f'<iframe src="/{page}" width={int(w)} height=2000 style="border:0;display:block"></iframe>'
                for page, w in frames)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return None
        return super().do_GET()


@pytest.fixture(scope="module")
def quick_site(tmp_path_factory) -> Path:
    t = tmp_path_factory.mktemp("quick")
    shutil.copytree(RUN, t / "results", ignore=shutil.ignore_patterns("README.md"))
    (t / "html").mkdir()
    (t / "reports").mkdir()
    (t / "html" / "index.html").write_text("<!doctype html><html><body><p>asv dashboard</p></body></html>")
    from vlmpath.render import summary as summod

    summod.write_summary(summod.summarize(t / "results", COMMIT, "cpu-xeon", options={"quick": True}), t / "reports")
    publish_pages(t / "results", t / "html", t / "reports", COMMIT, "cpu-xeon")
    return t / "html"


def _manifest(html_dir: Path) -> list[dict]:
    reports = html_dir.parent / "reports"
    return json.loads((reports / CHART_DIR / MANIFEST).read_text())["charts"]


def problems(html_dir: Path, frames: list[tuple[str, int]]) -> list[list[str]]:
    """For each (page, width): what a reader would call broken there (empty: reads clean).
    One Chromium run loads them all, each in a frame of its width."""
    with _serve(_Layout, html_dir) as url:
        out = chromium(f"{url}/_layout.html?f=" + ",".join(f"{p}@{w}" for p, w in frames), "--dump-dom",
                       f"--window-size={max(w for _, w in frames) + 40},2100", budget_ms=15000)
    views = json.loads(html.unescape(re.search(r'<pre id="result">(.*?)</pre>', out, re.S).group(1)))
    charts = _manifest(html_dir)
    said = [str(c.get("title", "")) for c in charts] + [str(n) for c in charts for n in c.get("notes", ())]
    empty = {Path(f).name for c in charts if EMPTY_MARK in c.get("marks", ()) for f in c["files"]}
    return [_judge(seen, width, said, empty) for seen, (_, width) in zip(views, frames)]


def _judge(seen: dict, width: int, said: list[str], empty: set[str]) -> list[str]:
    found = [f"wider than its card at {width}px: {w}" for w in seen["wide"]]
    if seen["page"] > 0:
        found.append(f"page {seen['page']}px wider than the window at {width}px")
    raw = RAW_MARKDOWN.search(seen["text"])
    if raw:
        found.append(f"raw Markdown: {seen['text'][max(0, raw.start() - 20):raw.end() + 40]!r}")
    for cap in seen["figcaptions"]:
        if any(s and s in cap for s in said):
            found.append(f"caption repeats what the picture draws: {cap[:80]!r}")
    for img in seen["imgs"]:
        if Path(img["src"]).name in empty:
            found.append(f"chart drawn without data shown: {img['src']}")
        elif img["w"] == 0:
            found.append(f"image not loaded: {img['src']}")
    return found


def test_landing_page_of_a_quick_run_reads_clean_at_common_widths(quick_site):
    found = problems(quick_site, [("vlmpath/index.html", w) for w in WIDTHS])
    assert found == [[]] * len(WIDTHS), found
    text = (quick_site / "vlmpath" / "index.html").read_text()
    assert "1 calls" not in text and "1 syncs" not in text and "commit(s)" not in text
    assert "Not shown (nothing to draw here)" in text and "vendors" in text  # named, not drawn
    assert "Here (cpu):" in text and "judge the sync count here, not" in text
    assert "measured 2026-12-03 09:18 UTC" in text  # asv's measuring time, not the commit's date
    ARTIFACTS.mkdir(exist_ok=True)
    with _serve(_Plain, quick_site) as url:
        for width in WIDTHS:
            shot = ARTIFACTS / f"landing-{width}.png"
            shot.unlink(missing_ok=True)
            chromium(f"{url}/vlmpath/index.html", f"--screenshot={shot}", f"--window-size={width},2400")
            assert_not_blank(shot, 10_000)


PLANTS = {  # defect: (the page's text, the defect planted there, what the check must say)
    "wide table": ("<div class=measures>", "<div class=measures><table class=vs><tr>"
                   + "<td style='white-space:nowrap'>where_index 0.17 ratio n=1</td>" * 12 + "</tr></table>",
                   "wider than its card"),
    "raw markdown": ('<p id="headline">', "<p>### vlmpath run: `cpu-xeon` @ `0236c8bf` (complete)</p>"
                     '<p id="headline">', "raw Markdown"),
    "repeated caption": ("</a></figure>", "</a><figcaption>encode path: strategies side by side @ 0236c8bf"
                         "</figcaption></figure>", "caption repeats"),
    "empty chart": ("<h2 id=history>", '<img src="charts/vendors.png"><h2 id=history>', "without data shown"),
}


def test_each_planted_defect_is_caught_and_the_page_itself_stays_clean(quick_site, tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(quick_site, html_dir)
    shutil.copytree(quick_site.parent / "reports", tmp_path / "reports")
    text = (html_dir / "vlmpath" / "index.html").read_text()
    pages = []
    for i, (old, new, _) in enumerate(PLANTS.values()):
        assert old in text, old
        (html_dir / "vlmpath" / f"plant{i}.html").write_text(text.replace(old, new, 1))
        pages.append(f"vlmpath/plant{i}.html")
    found = problems(html_dir, [(p, 1400) for p in [*pages, "vlmpath/index.html"]])
    for (defect, (_, _, says)), got in zip(PLANTS.items(), found):
        assert any(says in f for f in got), (defect, got)
    assert found[-1] == []  # the unplanted page, in the same run: green
