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


# --- bounds (issue 39): connections, idle sockets, regular files, the log ---------------------
@pytest.mark.e2e  # 400 connects to a real process: ~20 s on the shared 2-core box
def test_400_idle_sockets_hold_at_most_the_cap_of_threads_in_the_real_serve(site):
    import os
    import re
    import socket
    import subprocess
    import sys
    import time

    from vlmpath.render.static_http import MAX_CONNECTIONS

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "vlmpath.cli", "serve", "--html-dir", str(site), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(root / "src")})
    socks = []
    try:
        line = proc.stdout.readline()  # "serving ... at http://127.0.0.1:PORT/"
        port = int(re.search(r"http://[^:]+:(\d+)/", line).group(1))
        for _ in range(400):  # connect and say nothing
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.5)
        threads = int(next(x for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                           if x.startswith("Threads:")).split()[1])
        assert threads <= MAX_CONNECTIONS + 2, threads  # not 402
        for s in socks:
            s.close()
        socks.clear()
        time.sleep(0.5)
        assert _get(f"http://127.0.0.1:{port}/") == (200, "<title>dashboard</title>") and proc.poll() is None
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_an_idle_socket_is_closed_and_a_fifo_is_no_page(site):
    import os
    import socket
    import time

    from vlmpath.render.static_http import published_server

    server = published_server(site, "127.0.0.1", 0, idle_timeout_s=0.3)
    base = _serving(server)
    try:
        with socket.create_connection(server.server_address[:2], timeout=10) as s:
            t0 = time.monotonic()
            while s.recv(1024):  # the server closes it (after a 408 or without a word)
                pass
            assert time.monotonic() - t0 < 5
        os.mkfifo(site / "pipe.html")  # open() of a FIFO would block the thread forever
        t0 = time.monotonic()
        assert _get(base + "/pipe.html")[0] == 404 and time.monotonic() - t0 < 5
    finally:
        server.shutdown()
        server.server_close()


def test_what_a_client_sends_reaches_the_log_escaped(site, capsys):
    import socket

    server = make_server(site, port=0)
    _serving(server)
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as s:
            s.sendall(b"GET /\x1b[31mred\x07\x9b HTTP/1.0\r\n\r\n")
            s.recv(4096)
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert err and not any(ch in err for ch in "\x1b\x07\x9b\u009b") and "red" in err
