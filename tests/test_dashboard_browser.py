"""The published dashboard in a real headless Chromium: asv's pages and our charts page.

The site is built here the way CI builds it: the real ``asv publish`` over a recorded asv
results fixture (``report_fixture``: its git repository is rebuilt with the same shas, so
asv draws its graphs), then ``vlmpath report`` charts and ``write_dashboard``. A local
HTTP server (127.0.0.1, port 0, in a thread) serves it to Debian's ``chromium`` run with
``--headless --dump-dom --virtual-time-budget`` (no driver, no extra package): the DOM is
read after the page's scripts have run. Screenshots go to ``test-artifacts/``.

asv's pages load jQuery, flot, bootstrap and friends from public CDNs, which this machine
and CI cannot reach. Two ways round that, both tested:

- ``server``: asv's pages as published; the test server answers the CDN URLs from the
  copies vlmpath ships (``src/vlmpath/render/www_vendor/``, see its README) by rewriting the CDN
  addresses in the HTML it *serves*; the files on disk stay byte for byte as asv wrote them.
- ``offline_server``: a copy of the site after ``localize_assets`` (what ``vlmpath run``
  publishes), served as plain files with no interception, to a Chromium that cannot
  resolve any host but 127.0.0.1: the dashboard works with no network at all. The same
  setup on the un-localized pages shows asv's script error, so the check can fail.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_fixture import FIXTURE, asv_conf, make_repo
from test_report import assert_not_blank

from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.render import dashboard
from vlmpath.render.comment import render_json, render_markdown
from vlmpath.render.dashboard import localize_assets, write_dashboard
from vlmpath.render.report import write_report
from vlmpath.render.report_data import load_history

ROOT = Path(__file__).resolve().parents[1]
VENDOR = Path(dashboard.__file__).parent / dashboard.VENDOR_PACKAGE_DIR
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Without these Chromium tries the network (updates, sync, QUIC) and stalls offline.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1400,1600")
# Every host but the test server fails to resolve: a CDN load cannot succeed by luck.
NO_NETWORK = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
CDN = re.compile(r"https://(?:code\.jquery\.com|cdnjs\.cloudflare\.com|cdn\.jsdelivr\.net)/(?:[^\"']*/)?([^/\"']+)")
SRI = re.compile(r"\s(?:integrity|crossorigin|referrerpolicy)=\"[^\"]*\"")
# Test-only page: loads a page of the site in a frame (same origin) and reports whether
# every image decoded (naturalWidth > 0) once the frame has loaded.
CHECK_PAGE = """<!doctype html><html><body><pre id=result>pending</pre>
<iframe id=f src="{target}" width=1200 height=900></iframe><script>
// The window's load event waits for the frame, and the frame's for its images.
window.addEventListener('load', () => {{
  const imgs = [...document.getElementById('f').contentDocument.images];
  document.getElementById('result').textContent = JSON.stringify(imgs.map(
    i => ({{src: i.getAttribute('src'), complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}})));
}});</script></body></html>"""

pytestmark = pytest.mark.e2e


class _Plain(http.server.SimpleHTTPRequestHandler):
    """Files as they are on disk, nothing answered on a CDN's behalf."""

    def log_message(self, *args) -> None:  # keep pytest output readable
        pass


class _Handler(_Plain):

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path.startswith("/_vendor/"):
            f = VENDOR / path.rsplit("/", 1)[-1]
            if f.is_file():
                ctype = "text/css" if f.suffix == ".css" else "application/javascript"
                return self._send(f.read_bytes(), ctype)
            return self.send_error(404)
        if path == "/_check.html":
            target = self.path.split("target=", 1)[-1]
            return self._send(CHECK_PAGE.format(target=target).encode(), "text/html; charset=utf-8")
        f = Path(self.directory) / path.lstrip("/")
        if f.is_dir():
            f = f / "index.html"
        if f.suffix == ".html" and f.is_file():
            text = SRI.sub("", CDN.sub(r"/_vendor/\1", f.read_text(encoding="utf-8")))
            return self._send(text.encode(), "text/html; charset=utf-8")
        return super().do_GET()

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    t = tmp_path_factory.mktemp("site")
    shas = make_repo(t / "repo")
    results = t / "results"
    shutil.copytree(FIXTURE, results)
    (t / "bench").mkdir()
    conf = asv_conf(t / "asv.conf.json", t / "repo", results, t / "html", t / "bench")
    proc = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(conf), "--no-pull"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    asv_index = (t / "html" / "index.html").read_bytes()
    history = load_history(results)
    assert [r.commit for r in history.runs] == shas  # the fixture's commits exist in the repo
    report = compare(history.runs[0], history.runs[-1])
    (t / "reports").mkdir()
    (t / "reports" / "summary.md").write_text(render_markdown(report))
    (t / "reports" / "summary.json").write_text(render_json(report))
    out = write_report(results, t / "reports", thresholds=Thresholds.default(), comparison=report)
    page = write_dashboard(t / "html", t / "reports")
    bench_meta = json.loads((results / "benchmarks.json").read_text())
    return {"html": t / "html", "page": page, "asv_index": asv_index, "charts": out.charts,
            "benchmarks": {k: v for k, v in bench_meta.items() if isinstance(v, dict)}}


@contextlib.contextmanager
def _serve(handler: type, root: Path) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(site) -> Iterator[str]:
    with _serve(_Handler, site["html"]) as url:
        yield url


@pytest.fixture(scope="module")
def offline_site(site, tmp_path_factory) -> Path:
    """A copy of the published site after ``localize_assets``, as ``vlmpath run`` leaves it."""
    html = tmp_path_factory.mktemp("offline") / "html"
    shutil.copytree(site["html"], html)
    done = localize_assets(html)
    assert len(done) == len(dashboard.CDN_ASSETS), done
    return html


@pytest.fixture(scope="module")
def offline_server(offline_site) -> Iterator[str]:
    with _serve(_Plain, offline_site) as url:
        yield url


@pytest.fixture(params=["cdn-answered", "localized-offline"])
def asv_site(request) -> tuple[str, tuple[str, ...], str]:
    """(server url, extra Chromium flags, screenshot suffix) for each way of serving asv's pages."""
    if request.param == "cdn-answered":
        return request.getfixturevalue("server"), (), ""
    return request.getfixturevalue("offline_server"), (NO_NETWORK,), "-offline"


def chromium(url: str, *extra: str, budget_ms: int = 8000) -> str:
    """Run headless Chromium on ``url`` with a fresh profile; returns stdout."""
    if CHROMIUM is None:  # a failure, not a skip: CI must notice a missing browser
        pytest.fail("no chromium on PATH: run ci/setup.sh (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
             *extra, url], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def dom(url: str, *extra: str) -> str:
    return chromium(url, "--dump-dom", *extra)


def screenshot(url: str, name: str, *extra: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.unlink(missing_ok=True)
    chromium(url, f"--screenshot={path}", *extra)
    assert_not_blank(path, 10_000)
    return path


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_asv_index_lists_our_benchmarks_after_its_scripts_ran(site, asv_site):
    server, flags, suffix = asv_site
    html = dom(f"{server}/index.html", *flags)
    assert "airspeed velocity error" not in html, "a script dependency failed to load"
    for name in site["benchmarks"]:  # one grid entry per benchmark, linking to its graph
        assert f'href="#{name}"' in html, f"{name} missing from asv's benchmark grid"
        assert name.split(".", 1)[1] in _text(html)
    # asv builds the grid from index.json with JavaScript: the file as served has none of it.
    assert not any(name in (site["html"] / "index.html").read_text() for name in site["benchmarks"])
    screenshot(f"{server}/index.html", f"asv-index{suffix}.png", *flags)


def test_asv_benchmark_list_shows_values_with_our_units(site, asv_site):
    server, flags, suffix = asv_site
    text = _text(dom(f"{server}/index.html#summarylist", *flags))
    assert "airspeed velocity error" not in text
    for name, meta in site["benchmarks"].items():
        # e.g. "bench_embed.EmbedRoutine.track_tok_per_s ('default', 'multi_region') 790 tok/s"
        row = re.compile(re.escape(name) + r" \([^)]*\) [-+0-9.e]+ " + re.escape(meta["unit"]))
        assert row.search(text), f"no value in {meta['unit']} for {name}"
    screenshot(f"{server}/index.html#summarylist", f"asv-summarylist{suffix}.png", *flags)


def test_vlmpath_page_loads_every_chart_image(site, server):
    html = dom(f"{server}/_check.html?target=/vlmpath/index.html")
    found = json.loads(re.search(r'<pre id="result">(.*?)</pre>', html, re.S).group(1))
    pngs = [f for c in site["charts"] for f in c.files if f.endswith(".png")]
    assert sorted(i["src"] for i in found) == sorted(pngs)
    assert all(i["complete"] and i["w"] > 0 and i["h"] > 0 for i in found), found
    raw = dom(f"{server}/vlmpath/index.html")
    page = _text(raw)
    assert "Latest summary" in page and "tok/s" in page
    for c in site["charts"]:  # drawn in the picture: its alt text, not a caption repeating it
        assert f'alt="{c.title}' in raw and "<figcaption" not in raw
    screenshot(f"{server}/vlmpath/index.html", "vlmpath-dashboard.png")


def test_asv_index_is_untouched_and_linked_back(site):
    assert (site["html"] / "index.html").read_bytes() == site["asv_index"]
    assert hashlib.sha256(site["asv_index"]).hexdigest()  # published at all
    assert 'href="../index.html"' in site["page"].read_text()


def test_offline_setup_fails_on_the_unlocalized_site(site, offline_site):
    """Control: without ``localize_assets`` the same offline setup cannot run asv's scripts."""
    with _serve(_Plain, site["html"]) as url:
        html = dom(f"{url}/index.html", NO_NETWORK)
    assert "airspeed velocity error" in html
    assert not any(f'href="#{name}"' in html for name in site["benchmarks"])
    index = (offline_site / "index.html").read_text()
    assert not re.search(r"<(?:script|link)\b[^>]*https://", index)  # nothing left to fetch
