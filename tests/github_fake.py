"""A fake GitHub REST API for the issue-comment endpoints, served over real HTTP.

``FakeGitHub`` runs a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a background
thread and answers, with GitHub's request and response shapes:

* ``GET   /repos/{owner}/{repo}/issues/{n}/comments?per_page=&page=`` (with ``Link``)
* ``POST  /repos/{owner}/{repo}/issues/{n}/comments``   -> 201
* ``PATCH /repos/{owner}/{repo}/issues/comments/{id}``  -> 200
* ``GET   /user``: the token's user (``token_user``), or 403 for an Actions
  (installation) token, as GitHub answers it
* issues: ``GET /repos/{o}/{r}/issues?state=&labels=&per_page=&page=`` (pull requests are
  not in this store), ``POST /repos/{o}/{r}/issues`` -> 201, ``GET``/``PATCH
  /repos/{o}/{r}/issues/{n}`` (title, body, state, labels); comments on an issue use the
  comment endpoints above
* pull requests and who labelled them: ``GET /repos/{o}/{r}/pulls/{n}`` (``head.sha``,
  ``user``, ``labels``), ``GET /repos/{o}/{r}/issues/{n}/events`` (``labeled`` /
  ``unlabeled`` events with ``actor``, ``label.name``, ``created_at``; paginated) and
  ``GET /repos/{o}/{r}/collaborators/{login}/permission`` (``permission``, ``role_name``;
  404 for someone who is not a collaborator). Scripted with ``open_pull``, ``label`` and
  ``unlabel``; ``collaborators`` maps a login to its role
* a pull request's changed files: ``GET /repos/{o}/{r}/pulls/{n}/files`` (paginated;
  ``files`` maps a PR to GitHub's file records: ``filename``, ``status``,
  ``previous_filename`` for a rename)

It checks ``Authorization: Bearer <token>`` (401 otherwise), the ``Accept`` and
``X-GitHub-Api-Version`` headers, records every request for assertions, and can be
scripted to fail (``fail_next``) or to act as a read-only fork-PR token (``read_only``).
The ``github_fake`` fixture yields a started instance and stops it afterwards.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DOCS = "https://docs.github.com/rest"
TOKEN = "ghs_fakeTOKEN0123456789abcdefSECRET"
BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
HUMAN = {"login": "octocat", "id": 583231, "type": "User"}
_EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]  # lower-cased names


@dataclass
class _Failure:
    status: int
    headers: dict[str, str]
    message: str
    apply_first: bool  # process the request, then answer with the failure anyway
    method: str | None  # only requests with this method consume it (None: any)


@dataclass
class FakeGitHub:
    """In-memory issue comments for one repository, behind a real HTTP server."""

    owner: str = "octo-org"
    repo: str = "bench"
    prs: tuple[int, ...] = (7,)
    token: str = TOKEN
    read_only: bool = False
    token_user: dict | None = None  # None: an Actions token (GET /user is 403)
    # Override the origin used in Link headers (to test that foreign links are refused).
    link_base: str | None = None
    requests: list[Recorded] = field(default_factory=list)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    files: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # pulls/{n}/files, paginated
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> admin|maintain|write|triage|read
    _failures: list[_Failure] = field(default_factory=list)
    _next_id: int = 1_000_000
    _tick: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.comments = {pr: [] for pr in self.prs}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> FakeGitHub:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown() (each test's teardown) fast.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- scripting -----------------------------------------------------------------
    def fail_next(
        self,
        n: int,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str | None = None,
        apply_first: bool = False,
        method: str | None = None,
    ) -> None:
        """Answer the next ``n`` requests (of ``method``, if given) with ``status``.

        The body is GitHub-shaped (``message``, ``documentation_url``). With
        ``apply_first`` the request takes effect before the error is returned, like a
        gateway timing out after the backend stored the comment.
        """
        msg = message or f"fake {status}"
        with self._lock:
            for _ in range(n):
                self._failures.append(
                    _Failure(status, dict(headers or {}), msg, apply_first, method)
                )

    def seed(self, pr: int, n: int, *, user: dict | None = None, body: str | None = None):
        """Add ``n`` comments (by default from a human, without any marker)."""
        with self._lock:
            for i in range(n):
                self._add(pr, body if body is not None else f"lgtm #{i}", user or HUMAN)

    def open_pull(self, pr: int, head_sha: str, author: str = "contributor") -> None:
        with self._lock:
            self.pulls[pr] = {"number": pr, "state": "open", "head": {"sha": head_sha, "ref": "feature"},
                              "base": {"ref": "main"}, "user": _user(author), "labels": []}
            self.events.setdefault(pr, [])

    def label(self, pr: int, name: str, actor: str, *, at: str | None = None, kind: str = "User") -> None:
        """``actor`` applies label ``name`` (at ``at``, ISO 8601; default: the next tick)."""
        self._label_event(pr, name, actor, at, kind, "labeled")

    def unlabel(self, pr: int, name: str, actor: str, *, at: str | None = None) -> None:
        self._label_event(pr, name, actor, at, "User", "unlabeled")

    def _label_event(self, pr, name, actor, at, kind, event) -> None:
        with self._lock:
            self._next_id += 1
            self.events.setdefault(pr, []).append({
                "id": self._next_id, "node_id": f"LE_{self._next_id}", "event": event,
                "actor": _user(actor, kind), "created_at": at or self._stamp(), "commit_id": None,
                "label": {"name": name, "color": "ededed"}, "performed_via_github_app": None})
            pull = self.pulls.get(pr)
            if pull is not None:
                names = [x["name"] for x in pull["labels"] if x["name"] != name]
                pull["labels"] = [{"name": x} for x in names + ([name] if event == "labeled" else [])]

    def marked(self, pr: int, marker: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(c) for c in self.comments[pr] if marker in c["body"]]

    def calls(self, method: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if method is None or r.method == method]

    # --- store (call with the lock held) ---------------------------------------------
    def _stamp(self) -> str:
        self._tick += 1
        return (_EPOCH + timedelta(seconds=self._tick)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _add(self, pr: int, body: str, user: dict) -> dict[str, Any]:
        self._next_id += 1
        cid, now = self._next_id, self._stamp()
        c = {
            "id": cid,
            "node_id": "IC_" + base64.b64encode(f"IssueComment{cid}".encode()).decode(),
            "url": f"{self.url}/repos/{self.owner}/{self.repo}/issues/comments/{cid}",
            "html_url": f"https://github.com/{self.owner}/{self.repo}/pull/{pr}#issuecomment-{cid}",
            "issue_url": f"{self.url}/repos/{self.owner}/{self.repo}/issues/{pr}",
            "body": body,
            "user": dict(user),
            "created_at": now,
            "updated_at": now,
            "author_association": "NONE" if user["type"] == "Bot" else "MEMBER",
        }
        self.comments[pr].append(c)
        return c

    # --- request handling (called from server threads) --------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], raw: bytes):
        """Return ``(status, headers, json_body)`` for one request."""
        parts = urllib.parse.urlsplit(raw_path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = "<invalid json>"
        with self._lock:
            self.requests.append(Recorded(method, parts.path, query, body, headers))
            failure = next(
                (f for f in self._failures if f.method in (None, method)), None
            )
            if failure is not None:
                self._failures.remove(failure)
            if failure is not None and not failure.apply_first:
                return self._error(failure.status, failure.message, failure.headers)
            result = self._route(method, parts.path, query, headers, body)
            if failure is not None:
                return self._error(failure.status, failure.message, failure.headers)
            return result

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None):
        return status, dict(headers or {}), {"message": message, "documentation_url": DOCS}

    def _route(self, method, path, query, headers, body):
        if headers.get("authorization") != f"Bearer {self.token}":
            return self._error(401, "Bad credentials")
        if headers.get("accept") != "application/vnd.github+json":
            return self._error(415, "Unsupported 'Accept' header")
        if headers.get("x-github-api-version", "2022-11-28") != "2022-11-28":
            return self._error(400, "Unsupported API version")
        seg = path.strip("/").split("/")
        if seg == ["user"] and method == "GET":
            if self.token_user is None:
                return self._error(403, "Resource not accessible by integration")
            return 200, {}, dict(self.token_user)
        if len(seg) >= 4 and seg[0] == "repos" and seg[1:3] == [self.owner, self.repo] and seg[3] == "issues" \
                and (len(seg) == 4 or (len(seg) == 5 and seg[4].isdigit())):
            return self._issues(method, seg, query, body)
        if len(seg) < 5 or seg[0] != "repos" or seg[1:3] != [self.owner, self.repo]:
            return self._error(404, "Not Found")
        if method == "GET" and seg[3] == "pulls" and len(seg) == 5 and seg[4].isdigit():
            pull = self.pulls.get(int(seg[4]))
            return (200, {}, json.loads(json.dumps(pull))) if pull else self._error(404, "Not Found")
        if method == "GET" and seg[3] == "pulls" and len(seg) == 6 and seg[5] == "files" and seg[4].isdigit():
            if int(seg[4]) not in self.pulls:
                return self._error(404, "Not Found")
            return self._list(None, path, query, [dict(f) for f in self.files.get(int(seg[4]), [])])
        if method == "GET" and seg[3] == "issues" and len(seg) == 6 and seg[5] == "events" and seg[4].isdigit():
            if int(seg[4]) not in self.events:
                return self._error(404, "Not Found")
            return self._list(None, path, query, [dict(e) for e in self.events[int(seg[4])]])
        if method == "GET" and seg[3] == "collaborators" and len(seg) == 6 and seg[5] == "permission":
            role = self.collaborators.get(seg[4])
            if role is None:
                return self._error(404, f"{seg[4]} is not a user")
            perm = {"maintain": "write", "triage": "read"}.get(role, role)
            return 200, {}, {"permission": perm, "role_name": role, "user": _user(seg[4])}
        if seg[3] == "issues" and len(seg) == 6 and seg[5] == "comments" and seg[4].isdigit():
            pr = int(seg[4])
            if pr not in self.comments:
                return self._error(404, "Not Found")
            if method == "GET":
                return self._list(pr, path, query)
            if method == "POST":
                return self._write(pr, None, body)
        if seg[3:5] == ["issues", "comments"] and len(seg) == 6 and seg[5].isdigit():
            if method == "PATCH":
                return self._write(None, int(seg[5]), body)
        return self._error(404, "Not Found")

    def _issues(self, method, seg, query, body):
        if len(seg) == 4 and method == "GET":
            state, labels = query.get("state", "open"), [x for x in query.get("labels", "").split(",") if x]
            items = [dict(i) for _, i in sorted(self.issues.items(), reverse=True)  # newest first
                     if state in ("all", i["state"]) and all(lb in [x["name"] for x in i["labels"]] for lb in labels)]
            return self._list(None, "/" + "/".join(seg), query, items)
        if self.read_only and method in ("POST", "PATCH"):
            return self._error(403, "Resource not accessible by integration")
        if len(seg) == 4 and method == "POST":
            if not isinstance(body, dict) or not isinstance(body.get("title"), str) or not body["title"]:
                return self._error(422, "Validation Failed")
            number = max([*self.issues, *self.comments, 0]) + 1
            self.comments[number] = []
            now = self._stamp()
            self.issues[number] = {
                "number": number, "id": 5_000_000 + number, "title": body["title"], "body": body.get("body") or "",
                "state": "open", "labels": [{"name": x} for x in body.get("labels", [])], "user": dict(BOT),
                "html_url": f"https://github.com/{self.owner}/{self.repo}/issues/{number}",
                "created_at": now, "updated_at": now, "closed_at": None, "state_reason": None,
            }
            return 201, {}, dict(self.issues[number])
        issue = self.issues.get(int(seg[4])) if len(seg) == 5 else None
        if issue is None:
            return self._error(404, "Not Found")
        if method == "GET":
            return 200, {}, dict(issue)
        if method == "PATCH" and isinstance(body, dict):
            for k in ("title", "body", "state", "state_reason"):
                if k in body:
                    issue[k] = body[k]
            if "labels" in body:
                issue["labels"] = [{"name": x} for x in body["labels"]]
            issue["updated_at"] = self._stamp()
            issue["closed_at"] = issue["updated_at"] if issue["state"] == "closed" else None
            return 200, {}, dict(issue)
        return self._error(404, "Not Found")

    def _list(self, pr: int | None, path: str, query: dict[str, str], items: list | None = None):
        per_page = max(1, min(100, int(query.get("per_page", 30))))
        page = max(1, int(query.get("page", 1)))
        items = self.comments[pr] if items is None else items
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        base = f"{self.link_base or self.url}{path}"

        def link(p: int, rel: str) -> str:
            q = urllib.parse.urlencode({**{k: v for k, v in query.items() if k != "page"},
                                        "per_page": per_page, "page": p})
            return f'<{base}?{q}>; rel="{rel}"'

        rels = []
        if page > 1:
            rels += [link(page - 1, "prev")]
        if page < last:
            rels += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            rels += [link(1, "first")]
        hdrs = {"Link": ", ".join(rels)} if rels else {}
        return 200, hdrs, [dict(c) for c in chunk]

    def _write(self, pr: int | None, cid: int | None, body: Any):
        if self.read_only:
            return self._error(403, "Resource not accessible by integration")
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            return self._error(422, "Invalid request. \"body\" wasn't supplied.")
        if len(body["body"]) > 65536:
            return self._error(422, "Body is too long (maximum is 65536 characters)")
        if cid is None:
            return 201, {}, dict(self._add(pr, body["body"], BOT))
        for comments in self.comments.values():
            for c in comments:
                if c["id"] == cid:
                    c["body"], c["updated_at"] = body["body"], self._stamp()
                    return 200, {}, dict(c)
        return self._error(404, "Not Found")


def _user(login: str, kind: str = "User") -> dict[str, Any]:
    return {"login": login, "id": abs(hash(login)) % 10**8, "type": kind,
            "html_url": f"https://github.com/{login}"}


def _handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            hdrs = {k.lower(): v for k, v in self.headers.items()}
            status, out_headers, payload = fake.handle(self.command, self.path, hdrs, raw)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in out_headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@pytest.fixture
def github_fake():
    """A started ``FakeGitHub`` (repo octo-org/bench, PR 7); stopped after the test."""
    fake = FakeGitHub().start()
    try:
        yield fake
    finally:
        fake.stop()
