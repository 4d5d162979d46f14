"""Does ``vlmpath serve`` hand out only the published files, and hostile URLs get one line, no traceback?

The real server (``vlmpath.runner.serve.make_server``) runs in a thread on port 0 over a
temporary dashboard holding a page, a directory without index.html, a symlink to a file
outside the root and a symlinked directory pointing out. The same requests against the
standard library's handler show what each rule stops (a listing, the outside file, a
traceback for ``%00``).
"""

from __future__ import annotations

import functools
import threading
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vlmpath.runner.serve import make_server

SECRET = "outside the published root"


@pytest.fixture
def site(tmp_path) -> Path:
    root = tmp_path / "html"
    (root / "graphs").mkdir(parents=True)
    (root / "index.html").write_text("<title>dashboard</title>")
    (root / "graphs" / "a.json").write_text("[1, 2]")
    (tmp_path / "secret.txt").write_text(SECRET)
    (root / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (root / "up").symlink_to(tmp_path)
    return root


def _serving(server):
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except ConnectionError as e:  # the handler died mid-request: no status line at all
        return 0, str(e)


REQUESTS = ["/", "/graphs/a.json", "/graphs/", "/leak.txt", "/up/secret.txt", "/%00", "/index.html%00.js",
            "/../secret.txt"]


def _answers(server) -> dict[str, tuple[int, str]]:
    base = _serving(server)
    try:
        return {path: _get(base + path) for path in REQUESTS}
    finally:
        server.shutdown()
        server.server_close()


def test_serve_gives_published_files_and_nothing_else(site, capsys):
    got = _answers(make_server(site, port=0))
    err = capsys.readouterr().err
    assert got["/"] == (200, "<title>dashboard</title>")
    assert got["/graphs/a.json"] == (200, "[1, 2]")
    assert got["/graphs/"][0] == 404 and "a.json" not in got["/graphs/"][1]  # no listing
    for escape in ("/leak.txt", "/up/secret.txt", "/../secret.txt"):
        assert got[escape][0] == 404 and SECRET not in got[escape][1], escape
    assert got["/%00"][0] == 400 and got["/index.html%00.js"][0] == 400
    assert "Traceback" not in err


def test_the_stdlib_handler_shows_what_each_rule_stops(site, capsys):
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site))
    got = _answers(ThreadingHTTPServer(("127.0.0.1", 0), handler))
    err = capsys.readouterr().err
    assert got["/graphs/"][0] == 200 and "a.json" in got["/graphs/"][1]  # a listing
    assert got["/leak.txt"] == (200, SECRET)  # the symlink followed out of the root
    assert got["/%00"][0] == 0 and "Traceback" in err and "embedded null byte" in err
