"""``localize_assets`` without a browser: asv's CDN tags point at local copies, nothing else.

The pages are asv's own ``www/`` templates from the installed asv (``asv publish`` copies
them verbatim into html_dir), so an asv upgrade that asks for another CDN release fails
here first. The browser proof that the localized site runs offline is in
``test_dashboard_browser.py``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import asv
import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.render.dashboard import (
    CDN_ASSETS,
    VENDOR_DIR,
    UnvendoredAssetWarning,
    localize_assets,
)

ASV_WWW = Path(asv.__file__).parent / "www"
PACKAGE_VENDOR = Path(__file__).resolve().parents[1] / "src" / "vlmpath" / "render" / "www_vendor"
CDN_HOSTS = ("code.jquery.com", "cdnjs.cloudflare.com", "cdn.jsdelivr.net")
EXTRA = """<!doctype html><html><head>
<link rel="canonical" href="https://example.org/bench/">
<script src='https://code.jquery.com/jquery-3.3.1.min.js' crossorigin defer></script>
<script src="https://cdn.example.net/left-alone-9.9.js" integrity="sha256-x" crossorigin="anonymous"></script>
<script src="local.js" integrity="sha256-keep"></script>
</head><body><a href="https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css">css</a></body></html>
"""


@pytest.fixture
def site(tmp_path) -> Path:
    html = tmp_path / "html"
    shutil.copytree(ASV_WWW, html)
    return html


def _tags(text: str) -> list[str]:
    return re.findall(r"<(?:script|link)\b[^>]*>", text)


def test_asv_pages_load_nothing_from_a_cdn_after_localizing(site):
    before = {p.name: p.read_text() for p in site.glob("*.html")}
    cdn_tags = [t for t in _tags(before["index.html"]) if any(h in t for h in CDN_HOSTS)]
    assert len(cdn_tags) == len(CDN_ASSETS)  # asv 0.6 loads exactly the vendored set

    done = localize_assets(site)

    assert len(done) == len(CDN_ASSETS)
    assert sorted(line.split(": ", 1)[1].split(" -> ")[0] for line in done) == sorted(CDN_ASSETS)
    index = (site / "index.html").read_text()
    for url, name in CDN_ASSETS.items():
        assert url not in index
        assert index.count(f'"{VENDOR_DIR}/{name}"') == 1
        copy = site / VENDOR_DIR / name
        assert copy.read_bytes() == (PACKAGE_VENDOR / name).read_bytes()
    assert (site / VENDOR_DIR / "README.md").is_file()  # provenance and licences travel along
    assert not any(h in t for t in _tags(index) for h in CDN_HOSTS)
    assert not any("integrity=" in t or "crossorigin" in t for t in _tags(index))
    # Only the tags were touched: the page minus them is what asv wrote.
    strip = re.compile(r"<(?:script|link)\b[^>]*>")
    assert strip.sub("", index) == strip.sub("", before["index.html"])
    assert index.count('onerror="js_load_failure()"') == before["index.html"].count('onerror="js_load_failure()"')
    for name, text in before.items():  # pages without CDN tags are left byte for byte
        if name != "index.html":
            assert (site / name).read_text() == text


def test_second_call_rewrites_nothing(site):
    assert localize_assets(site)
    snapshot = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in site.rglob("*") if p.is_file()}
    assert localize_assets(site) == []
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in site.rglob("*") if p.is_file()} == snapshot


def test_nested_page_unknown_cdn_and_other_tags(site):
    page = site / "sub" / "page.html"
    page.parent.mkdir()
    page.write_text(EXTRA)
    with pytest.warns(UnvendoredAssetWarning, match="left-alone-9.9.js") as caught:
        done = localize_assets(site)
    assert len(caught) == 1  # the canonical link and the <a> are not assets
    assert "sub/page.html: https://code.jquery.com/jquery-3.3.1.min.js -> ../vendor/jquery-3.3.1.min.js" in done
    text = page.read_text()
    assert '<script src="../vendor/jquery-3.3.1.min.js" defer></script>' in text  # bare crossorigin gone
    # Unknown CDN: untouched, integrity and all. Local script and non-asset links: untouched.
    assert ('<script src="https://cdn.example.net/left-alone-9.9.js" integrity="sha256-x" '
            'crossorigin="anonymous"></script>') in text
    assert '<script src="local.js" integrity="sha256-keep"></script>' in text
    assert '<link rel="canonical" href="https://example.org/bench/">' in text
    assert '<a href="https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css">' in text


def test_not_a_published_site(tmp_path):
    with pytest.raises(VlmpathError, match="asv publish"):
        localize_assets(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VlmpathError, match="no index.html"):
        localize_assets(tmp_path / "empty")
