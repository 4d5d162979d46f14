"""Which files of a published directory may an HTTP client read, and what does it get otherwise?

``vlmpath serve`` publishes the asv dashboard, possibly bound to 0.0.0.0 in the compose
``dashboard`` service. The standard library's ``SimpleHTTPRequestHandler`` lists every
directory, follows symlinks out of the served root, and lets an exception from a hostile
path (``/%00``: "embedded null byte") escape to ``socketserver``, which prints a traceback
per request. This handler serves regular files that really lie under the root (after
resolving symlinks) and ``index.html`` of a directory; everything else is a one-line
404 or 400, with no listing and no traceback. ``/`` redirects to vlmpath's landing page
when the site has one (asv's own grid stays at ``/index.html``).

Bounded, because the port may be open to a network: at most ``MAX_CONNECTIONS`` requests
are handled at once (one thread each; a connection past the cap is closed at once, never
queued as a thread), a socket idle for ``IDLE_TIMEOUT_S`` is closed, only regular files
are served (a FIFO, a device or a socket under the root is a 404, never a hang), and what
a client sends reaches the log through ``render.escape.log_line`` (no ESC, BEL or C1).
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from vlmpath.render.escape import log_line

#: Requests handled at once (each a thread); more are closed, not queued.
MAX_CONNECTIONS = 32
#: Seconds a connection may sit without sending before it is closed.
IDLE_TIMEOUT_S = 10.0


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


#: The landing page ``render.dashboard`` writes: ``/`` opens on it when it is there.
LANDING = "vlmpath/index.html"


class PublishedFilesHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of files under ``directory`` only: no listings, no escapes, no tracebacks."""

    def list_directory(self, path):  # noqa: ANN001 (stdlib signature)
        # A directory without index.html: the listing would show files nobody published.
        self.send_error(HTTPStatus.NOT_FOUND, "no such page")
        return None

    def send_head(self):
        if self.path.split("?", 1)[0].split("#", 1)[0] == "/" and \
                (Path(self.directory) / LANDING).is_file():
            # The site opens on vlmpath's landing page; asv's grid stays at /index.html.
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", "/" + LANDING)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        try:
            path = self.translate_path(self.path)
        except ValueError:  # a NUL or other undecodable byte in the URL
            self.send_error(HTTPStatus.BAD_REQUEST, "bad path")
            return None
        if "\x00" in path:
            self.send_error(HTTPStatus.BAD_REQUEST, "bad path")
            return None
        root = os.path.realpath(self.directory)
        real = os.path.realpath(path)
        # realpath resolves every symlink: a link inside the root that points out of it is refused.
        if real != root and not real.startswith(root + os.sep):
            self.send_error(HTTPStatus.NOT_FOUND, "no such page")
            return None
        page = os.path.join(real, "index.html") if os.path.isdir(real) else real
        if not _regular(page):  # a FIFO would block the thread forever; a device, a socket: no page
            self.send_error(HTTPStatus.NOT_FOUND, "no such page")
            return None
        try:
            return super().send_head()
        except (OSError, ValueError):
            self.send_error(HTTPStatus.NOT_FOUND, "no such page")
            return None

    def log_message(self, format, *args):  # noqa: A002 (stdlib signature)
        # The request line is the client's text: one visible line, no terminal escapes.
        sys.stderr.write(log_line(f"{self.address_string()} {format % args}") + "\n")


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that reports a failed request in one line, not a traceback,
    and handles at most ``max_connections`` requests at once."""

    daemon_threads = True
    max_connections = MAX_CONNECTIONS

    def server_activate(self) -> None:
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().server_activate()

    def process_request(self, request, client_address):  # noqa: ANN001 (stdlib signature)
        if not self._slots.acquire(blocking=False):  # full: close it now, start no thread
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):  # noqa: ANN001 (stdlib signature)
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address):  # noqa: ANN001 (stdlib signature)
        exc = sys.exc_info()[1]
        sys.stderr.write(log_line(f"vlmpath serve: request from {client_address[0]} failed: "
                                  f"{type(exc).__name__}: {exc}") + "\n")


def published_server(root: str | os.PathLike[str], bind: str, port: int, *,
                     max_connections: int = MAX_CONNECTIONS, idle_timeout_s: float = IDLE_TIMEOUT_S) -> QuietServer:
    """A server for the files under ``root`` (raises OSError if it cannot listen)."""
    import functools

    handler = type("Handler", (PublishedFilesHandler,), {"timeout": idle_timeout_s})
    server = type("Server", (QuietServer,), {"max_connections": max_connections})
    return server((bind, port), functools.partial(handler, directory=str(Path(root).resolve())))
