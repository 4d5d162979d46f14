"""How does vlmpath talk to the GitHub REST API: authentication, retries, rate limits, pages?

``make_client`` validates the API root and the token; ``Client.request`` sends one
idempotent request and retries transient failures; ``paginate`` follows ``rel="next"``.
Used by the sticky PR comment (``vlmpath.github.comment``) and the regression issues
(``vlmpath.github.issues``). Standard library only: the comment and alert jobs run on
bare runners.

Each request has one overall deadline (``CALL_DEADLINE_S``: connect, headers and body
together), enforced by shutting the socket down when it passes: a server that trickles
bytes cannot hold the job; such a call is not retried.

Retries: 5xx, 429, a 403 that is a rate limit (``x-ratelimit-remaining: 0``, a
``retry-after`` header, or GitHub's "secondary rate limit" message) and connection errors
are retried up to ``max_retries`` times (shared by all requests of one client) with
exponential backoff (``backoff_s * 2**k``), or the wait the server asks for
(``Retry-After`` seconds, or until ``x-ratelimit-reset``; a secondary limit without either
waits a minute, as GitHub's docs ask), always capped at ``max_delay_s``. The token is sent
only to the API origin; no message, log line or repr contains it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
# 100 is GitHub's maximum page size; 200 pages = 20k items is far past any real list and
# stops a server that keeps sending rel="next" from looping us forever.
PER_PAGE = 100
MAX_PAGES = 200
USER_AGENT = "vlmpath-comment (+https://github.com)"
_TIMEOUT_S = 30.0
SECONDARY_WAIT_S = 60.0  # GitHub: "wait at least one minute" when it names no time


class GitHubError(VlmpathError):
    """The GitHub API refused or kept failing; the message names the fix."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


def resolve_api_url(api_url: str | None = None) -> str:
    """The API root: the argument, else ``GITHUB_API_URL``, else ``https://api.github.com``."""
    url = (api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise GitHubError(
            f"API URL {url!r} is not an http(s) URL: set GITHUB_API_URL to e.g. "
            f"{DEFAULT_API_URL} (or https://HOST/api/v3 for GitHub Enterprise)"
        )
    return url


def _resolve_token(token: str | None) -> str:
    tok = token if token else os.environ.get("GITHUB_TOKEN", "")
    if not tok:
        raise GitHubError(
            "token missing: set GITHUB_TOKEN (in Actions: env GITHUB_TOKEN: "
            "${{ secrets.GITHUB_TOKEN }} with permissions pull-requests: write)"
        )
    if any(c.isspace() for c in tok) or not tok.isprintable():
        # Never echo it: a malformed token is still a secret.
        raise GitHubError(
            "token invalid: GITHUB_TOKEN contains whitespace or control characters; "
            "set it to the bare token"
        )
    return tok


# --- transport -------------------------------------------------------------------------
def _origin(url: str) -> tuple[str, str]:
    p = urllib.parse.urlsplit(url)
    return p.scheme.lower(), p.netloc.lower()


class Transient(Exception):
    """A retriable failure; ``wait_s`` is the server's requested wait, if it gave one."""

    def __init__(self, message: str, wait_s: float | None, status: int | None):
        super().__init__(message)
        self.wait_s, self.status = wait_s, status


@dataclass(frozen=True)
class _Response:
    status: int
    headers: dict[str, str]  # lower-cased names
    data: Any


#: One overall deadline per request (connect, headers, body together): a server that
#: trickles a byte at a time cannot hold a job longer than this per call.
CALL_DEADLINE_S = 60.0


class _Deadline:
    """The current call's deadline, shared by the opener's connections: each connection
    arms a timer at connect that shuts its socket down when the deadline passes, so a
    trickling server's next read fails at once, whatever the per-read timeout."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.timers: list[threading.Timer] = []
        self.expired = False

    def arm(self, sock) -> None:
        if self.at is None:
            return

        def expire() -> None:
            self.expired = True
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        t = threading.Timer(max(0.0, self.at - time.monotonic()), expire)
        t.daemon = True
        self.timers.append(t)
        t.start()

    def disarm(self) -> None:
        for t in self.timers:
            t.cancel()
        self.timers.clear()


def _deadline_handlers(deadline: _Deadline) -> list[urllib.request.BaseHandler]:
    def conn_class(base):
        class _Conn(base):  # type: ignore[misc, valid-type]
            def connect(self) -> None:
                super().connect()
                deadline.arm(self.sock)
        return _Conn

    http_conn, https_conn = conn_class(http.client.HTTPConnection), conn_class(http.client.HTTPSConnection)

    class _Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(http_conn, req)

    class _Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(https_conn, req, context=self._context)

    return [_Http(), _Https()]


def _same_origin_redirects(origin: tuple[str, str]) -> urllib.request.HTTPRedirectHandler:
    class _Handler(urllib.request.HTTPRedirectHandler):
        # A redirect to another host would carry our Authorization header there.
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            if _origin(urllib.parse.urljoin(req.full_url, newurl)) != origin:
                raise GitHubError(
                    f"the API redirected {req.get_method()} to another host "
                    f"({_origin(newurl)[1] or 'unknown'}); refusing to send the token "
                    "there: check GITHUB_API_URL",
                    status=code,
                )
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return _Handler()


@dataclass
class Client:
    api_url: str
    token: str = field(repr=False)
    max_retries: int
    backoff_s: float
    max_delay_s: float
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    retries_used: int = 0
    deadline_s: float = CALL_DEADLINE_S

    def __post_init__(self) -> None:
        self._origin = _origin(self.api_url)
        # Built per client (not at import) so proxy settings are read when we run.
        self._deadline = _Deadline()
        self._opener = urllib.request.build_opener(_same_origin_redirects(self._origin),
                                                   *_deadline_handlers(self._deadline))

    def _redact(self, text: str) -> str:
        return text.replace(self.token, "***") if self.token else text

    def url(self, path: str, query: dict[str, Any] | None = None) -> str:
        q = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"{self.api_url}{path}{q}"

    def _where(self, method: str, url: str) -> str:
        return f"{method} {urllib.parse.urlsplit(url).path}"

    def send_once(self, method: str, url: str, payload: Any = None) -> _Response:
        """One HTTP exchange. Raises ``Transient`` (retriable) or ``GitHubError``."""
        if _origin(url) != self._origin:
            raise GitHubError(
                f"refusing to send the token to {_origin(url)[1]!r}, which is not the API "
                f"host {self._origin[1]!r}: check GITHUB_API_URL"
            )
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/vnd.github+json")
        req.add_header("X-GitHub-Api-Version", API_VERSION)
        req.add_header("User-Agent", USER_AGENT)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        where = self._where(method, url)
        self._deadline.at, self._deadline.expired = time.monotonic() + self.deadline_s, False
        try:
            with self._opener.open(req, timeout=min(_TIMEOUT_S, self.deadline_s)) as resp:
                status, headers, raw = resp.status, resp.headers, _read_capped(resp, where)
        except urllib.error.HTTPError as exc:
            status, headers = exc.code, exc.headers
            try:
                raw = _read_capped(exc, where)
            except (OSError, http.client.HTTPException, VlmpathError):
                if not self._deadline.expired:
                    raise
                raw = b""
            finally:
                exc.close()
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if self._deadline.expired:  # a trickling server: not retried, it would trickle again
                raise GitHubError(f"{where}: no whole answer within {self.deadline_s:.0f} s (the server "
                                  "sends too slowly); GitHub may be degraded: rerun the job later") from None
            reason = getattr(exc, "reason", exc)
            raise Transient(
                f"{where}: connection failed ({self._redact(str(reason))})", None, None
            ) from None
        except VlmpathError:
            if self._deadline.expired:
                raise GitHubError(f"{where}: no whole answer within {self.deadline_s:.0f} s (the server "
                                  "sends too slowly); GitHub may be degraded: rerun the job later") from None
            raise
        finally:
            self._deadline.disarm()
        if self._deadline.expired:
            raise GitHubError(f"{where}: no whole answer within {self.deadline_s:.0f} s (the server "
                              "sends too slowly); GitHub may be degraded: rerun the job later")
        hdrs = {k.lower(): v for k, v in (headers or {}).items()}
        try:  # bounded (depth, number length): a hostile body is "not JSON", never a RecursionError
            body = safe_json.loads(raw, where) if raw else None
        except VlmpathError:
            body = None
        if 200 <= status < 300:
            return _Response(status, hdrs, body)
        self._raise_for(status, hdrs, body, where)
        raise AssertionError("unreachable")  # pragma: no cover

    def _raise_for(self, status: int, hdrs: dict[str, str], body: Any, where: str):
        msg = body.get("message", "") if isinstance(body, dict) else ""
        if isinstance(body, dict) and body.get("errors"):
            msg = f"{msg} {json.dumps(body['errors'])}"
        said = self._redact(f" (GitHub said: {msg})" if msg else "")
        secondary = status == 403 and ("retry-after" in hdrs or "secondary rate limit" in msg.lower())
        rate_limited = status == 429 or secondary or (
            status == 403 and hdrs.get("x-ratelimit-remaining") == "0"
        )
        if status >= 500 or rate_limited:
            kind = "rate limited" if rate_limited else "server error"
            wait = self._server_wait(hdrs)
            if wait is None and secondary:
                wait = SECONDARY_WAIT_S
            raise Transient(f"{where}: HTTP {status} {kind}{said}", wait, status)
        if status == 401:
            fix = (
                "token missing or invalid: set GITHUB_TOKEN to a valid token "
                "(in Actions: ${{ secrets.GITHUB_TOKEN }})"
            )
        elif status == 403:
            fix = (
                "token lacks pull-requests: write (add `permissions: pull-requests: write` "
                "to the job), or this is a fork PR whose token is read-only: use the "
                "workflow_run pattern (the PR job uploads the report as an artifact, a "
                "workflow_run job posts it)"
            )
        elif status == 404:
            fix = (
                "repo or PR not found: check --repo owner/name and --pr, and that the "
                "token can read the repository"
            )
        elif status == 422:
            fix = "GitHub rejected the comment as invalid (check its body and size)"
        else:
            fix = "unexpected response from GitHub"
        raise GitHubError(f"{where}: HTTP {status}: {fix}{said}", status=status)

    def _server_wait(self, hdrs: dict[str, str]) -> float | None:
        ra = hdrs.get("retry-after")
        if ra is not None:
            try:
                return max(0.0, float(ra))
            except ValueError:
                pass  # an HTTP-date; GitHub sends seconds, fall through
        if hdrs.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in hdrs:
            try:
                return max(0.0, float(hdrs["x-ratelimit-reset"]) - self.clock())
            except ValueError:
                return None
        return None

    def wait_or_raise(self, exc: Transient) -> None:
        """Sleep before the next try, or raise ``GitHubError`` if retries are spent."""
        if self.retries_used >= self.max_retries:
            raise GitHubError(
                f"{exc} - still failing after {self.max_retries} retries: "
                "GitHub may be degraded (https://www.githubstatus.com); rerun the job later",
                status=exc.status,
            ) from None
        delay = self.backoff_s * (2**self.retries_used)
        if exc.wait_s is not None:
            delay = exc.wait_s
        self.retries_used += 1
        self.sleep(min(delay, self.max_delay_s))

    def request(self, method: str, url: str, payload: Any = None) -> _Response:
        """An idempotent request (GET, PATCH), retried on transient failures."""
        while True:
            try:
                return self.send_once(method, url, payload)
            except Transient as exc:
                self.wait_or_raise(exc)


def _next_link(link_header: str | None) -> str | None:
    """The ``rel="next"`` URL of an RFC 8288 ``Link`` header, or ``None``."""
    if not link_header:
        return None
    for part in link_header.split(","):
        m = re.match(r'\s*<([^>]*)>\s*;(.*)$', part)
        if m and re.search(r'(?:^|;)\s*rel="?next"?\s*(?:;|$)', m.group(2)):
            return m.group(1)
    return None


def make_client(api_url: str | None, token: str | None, *, max_retries: int = 5, backoff_s: float = 1.0,
                max_delay_s: float = 60.0, sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.time) -> Client:
    """A client for the API root (argument, ``GITHUB_API_URL``, or github.com) and token
    (argument or ``GITHUB_TOKEN``), validated before any request."""
    if max_retries < 0 or backoff_s < 0 or max_delay_s < 0:
        raise GitHubError("max_retries, backoff_s and max_delay_s must be >= 0")
    return Client(api_url=resolve_api_url(api_url), token=_resolve_token(token), max_retries=max_retries,
                   backoff_s=backoff_s, max_delay_s=max_delay_s, sleep=sleep, clock=clock)


def paginate(client: Client, url: str, what: str) -> Iterator[dict[str, Any]]:
    """Every item of a paginated list endpoint, page by page (at most ``MAX_PAGES``)."""
    next_url: str | None = url
    for _ in range(MAX_PAGES):
        if next_url is None:
            return
        resp = client.request("GET", next_url)
        if not isinstance(resp.data, list):
            raise GitHubError(f"GET {what} did not return a list: check GITHUB_API_URL points at the REST API root")
        yield from (x for x in resp.data if isinstance(x, dict))
        next_url = _next_link(resp.headers.get("link"))
    raise GitHubError(f"{what}: more than {MAX_PAGES} pages (or the API keeps sending rel=next): "
                      "check GITHUB_API_URL")


#: Largest API response read (a page of 100 issues is well under 1 MiB).
MAX_BODY_BYTES = 8 << 20


def _read_capped(resp, where: str) -> bytes:
    """At most ``MAX_BODY_BYTES`` of a response body (``core.safe_json``, as a package index's)."""
    return safe_json.read_stream_capped(resp, f"{where}: response body", MAX_BODY_BYTES)

