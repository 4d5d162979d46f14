"""How does vlmpath keep exactly one benchmark comment on a pull request up to date?

``upsert_comment`` lists the pull request's issue comments (following pagination), finds
the one whose body carries our hidden HTML marker, and edits it in place; only when none
exists does it create one. Re-running a CI job therefore never stacks comments.

Standard library only (``urllib.request`` + ``json``): the comment job of the workflow_run
pattern runs on a bare runner with no project dependencies installed.

Choices worth knowing:

* Ours = the marker AND our author: a person's comment quoting the marker is never
  overwritten. The author is ``author`` if given, else the token's user (``GET /user``,
  asked only once a marked comment is seen); the Actions token cannot read ``/user`` (403),
  and its comments are by ``github-actions[bot]``.
* Several comments of ours with the marker (e.g. an old bug, or two jobs racing): we
  update the **first** (oldest) one and leave the rest alone. The first is what people
  linked to; it is also the stable choice when the list grows.
* Retries and rate limits (primary and secondary): ``vlmpath.github.rest``.
* A failed *create* is never retried blindly: the server may have stored the comment and
  still answered 502. We list again and update what we find, so a retry cannot duplicate.
* The token is sent only to the API origin: pagination links and redirects that point
  elsewhere are refused. No message, log line or repr contains it (messages are redacted
  as a second line of defence, in case the server echoes it back).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from vlmpath.github.rest import (
    PER_PAGE,
    Client,
    GitHubError,
    Transient,
    make_client,
    paginate,
)

DEFAULT_MARKER = "<!-- vlmpath-bench -->"
# GitHub answers 422 "Body is too long (maximum is 65536 characters)" above this.
MAX_BODY_CHARS = 65536
_REPO_PART = re.compile(r"^[A-Za-z0-9_.-]+$")
# Whose comment is ours when the token cannot say (GET /user is 403 for the Actions token).
ACTIONS_BOT = "github-actions[bot]"


@dataclass(frozen=True)
class CommentResult:
    """What ``upsert_comment`` did: ``action`` is ``"created"`` or ``"updated"``."""

    action: Literal["created", "updated"]
    comment_id: int
    html_url: str


# --- input validation (no network) -----------------------------------------------------
def parse_repo(repo: str) -> tuple[str, str]:
    """``"owner/name"`` -> ``("owner", "name")``; anything else raises ``GitHubError``."""
    parts = repo.split("/") if isinstance(repo, str) else []
    if len(parts) != 2 or not all(
        _REPO_PART.match(p) and p not in (".", "..") for p in parts
    ):
        raise GitHubError(
            f"repo {repo!r} is not of the form owner/name: pass --repo like "
            "'sgl-project/sglang' (in Actions: ${{ github.repository }})"
        )
    return parts[0], parts[1]


def _check_pr(pr: int) -> int:
    if isinstance(pr, bool) or not isinstance(pr, int) or pr <= 0:
        raise GitHubError(
            f"pull request number {pr!r} is not a positive integer: pass --pr N "
            "(in Actions: ${{ github.event.pull_request.number }})"
        )
    return pr


def prepare_body(body: str, marker: str = DEFAULT_MARKER) -> str:
    """Return the body that will be posted: the marker is prepended if missing.

    Raises ``GitHubError`` for an empty marker or a body over ``MAX_BODY_CHARS`` (GitHub
    would reject it with 422; the renderer is expected to truncate before we get here).
    """
    if not isinstance(marker, str) or not marker.strip():
        raise GitHubError(
            f"marker {marker!r} is empty: pass a unique string such as {DEFAULT_MARKER!r}"
        )
    if not isinstance(body, str):
        raise GitHubError(f"comment body must be text, got {type(body).__name__}")
    if marker not in body:
        body = f"{marker}\n{body}"
    if len(body) > MAX_BODY_CHARS:
        raise GitHubError(
            f"comment body is {len(body)} characters (marker included), over GitHub's "
            f"limit of {MAX_BODY_CHARS}: truncate the rendered report before posting"
        )
    return body


class _Author:
    """Whose comments are ours: given, or asked of the API once (lazily)."""

    def __init__(self, client: Client, login: str | None):
        self.client, self.login = client, login

    def get(self) -> str:
        if self.login is None:
            try:
                data = self.client.request("GET", self.client.url("/user")).data
                self.login = str(data.get("login")) if isinstance(data, dict) and data.get("login") else ACTIONS_BOT
            except GitHubError as exc:
                if exc.status not in (403, 404):
                    raise
                self.login = ACTIONS_BOT  # an installation (Actions) token: no /user
        return self.login


def _find_marked(client: Client, owner: str, name: str, pr: int, marker: str, author: _Author):
    """The first (oldest) comment by ``author`` whose body contains ``marker``, or ``None``."""
    url = client.url(f"/repos/{owner}/{name}/issues/{pr}/comments", {"per_page": PER_PAGE})
    for c in paginate(client, url, f"comments of {owner}/{name}#{pr}"):
        if marker in (c.get("body") or "") and (c.get("user") or {}).get("login") == author.get():
            return c
    return None


def comment_id(value: Any, where: str) -> int:
    """A comment id from an API answer: a positive integer (never a bool, a float, a
    string or a number that fills a path with more than digits), else one line naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise GitHubError(f"{where}: the comment id {str(value)[:40]!r} is not a positive integer: check "
                          "GITHUB_API_URL points at the REST API root")
    return value


def _result(action: Literal["created", "updated"], data: Any) -> CommentResult:
    if not isinstance(data, dict) or "id" not in data:
        raise GitHubError(
            f"GitHub's answer to the comment {action[:-1]} has no comment id: check "
            "GITHUB_API_URL points at the REST API root"
        )
    return CommentResult(action, comment_id(data["id"], f"the comment {action[:-1]}"),
                         str(data.get("html_url", ""))[:500])


def upsert_comment(
    repo: str,
    pr: int,
    body: str,
    *,
    marker: str = DEFAULT_MARKER,
    author: str | None = None,
    token: str | None = None,
    api_url: str | None = None,
    max_retries: int = 5,
    backoff_s: float = 1.0,
    max_delay_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> CommentResult:
    """Create or update the one comment carrying ``marker`` on pull request ``pr``.

    ``token`` defaults to ``GITHUB_TOKEN`` and ``api_url`` to ``GITHUB_API_URL`` (else
    ``https://api.github.com``); ``author`` is the login whose comment is ours (default: the
    token's user). Everything is validated before the first request.
    ``max_retries`` is the number of *re*-tries shared by all requests of this call;
    ``sleep`` and ``clock`` are injectable for tests. Raises ``GitHubError``.
    """
    owner, name = parse_repo(repo)
    pr = _check_pr(pr)
    body = prepare_body(body, marker)
    client = make_client(api_url, token, max_retries=max_retries, backoff_s=backoff_s,
                         max_delay_s=max_delay_s, sleep=sleep, clock=clock)
    who = _Author(client, author)
    payload = {"body": body}
    while True:
        existing = _find_marked(client, owner, name, pr, marker, who)
        if existing is not None:
            resp = client.request(
                "PATCH",
                client.url(f"/repos/{owner}/{name}/issues/comments/{comment_id(existing.get('id'), 'a listed comment')}"),
                payload,
            )
            return _result("updated", resp.data)
        try:
            resp = client.send_once(
                "POST", client.url(f"/repos/{owner}/{name}/issues/{pr}/comments"), payload
            )
            return _result("created", resp.data)
        except Transient as exc:
            # The comment may exist despite the error: loop to list again, never re-POST
            # blindly.
            client.wait_or_raise(exc)
