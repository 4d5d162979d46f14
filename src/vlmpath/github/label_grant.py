"""Did a maintainer accept this pull request's own entries in accepted.yaml, with a label?

An entry a PR adds to ``benchmarks/accepted.yaml`` for itself never turns its check green
(``vlmpath.compare.accepted``). A maintainer accepts it by applying the acceptance label
(``vlmpath-accept-regression`` unless configured) to the PR. Only the privileged comment
job can read that with authority, through the REST API (``vlmpath ci label-grant``):

- ``GET /repos/{o}/{r}/pulls/{n}``: the PR's head must be the commit that was measured
  (a stale number borrows nothing), and its author is who the change is from;
- ``GET /repos/{o}/{r}/issues/{n}/events``: the last ``labeled`` event of the label not
  undone by an ``unlabeled`` one names who applied it (``actor``) and when;
- ``GET /repos/{o}/{r}/collaborators/{login}/permission``: that person must hold write,
  maintain or admin (``permission`` admin or write).

Not counted: a label applied by the PR's author, by a bot or app, by someone without
write permission, or before the measured head was pushed (``since``: the benchmark run's
creation time, so a label on an old head does not cover a later push). The answer is one
small JSON file (``write_grant``/``load_grant``) that ``vlmpath ci merge --grant`` reads.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vlmpath.core.errors import VlmpathError
from vlmpath.github.rest import PER_PAGE, Client, GitHubError, paginate

ACCEPT_LABEL = "vlmpath-accept-regression"
#: ``permission`` values of the collaborator endpoint that count (maintain reads as write).
MAINTAINER_PERMISSIONS = frozenset({"admin", "write"})
GRANT_SCHEMA = 1
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:/+-]{0,49}$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_SHA40 = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class LabelGrant:
    """Whether the label accepts PR ``pr``'s own entries at ``head_sha``, and why."""

    repo: str
    pr: int
    head_sha: str
    label: str
    granted_by: str | None  # the maintainer's login; None: not granted
    permission: str | None
    why: str  # one line, for the comment
    #: The PR's changed files that are the yardstick (``core.yardstick.classify``), read from
    #: the API by this privileged job (``github.pr_files``), and whether that list may be
    #: incomplete. Either makes ``ci merge`` withhold green ("yardstick changed").
    yardstick: tuple[str, ...] = ()
    files_truncated: bool = False

    def accepted_text(self) -> str | None:
        """What an accepted row says of who accepted it (None: nobody did)."""
        if self.granted_by is None:
            return None
        return f"accepted by @{self.granted_by} ({self.permission}) with the label {self.label}"


def check_label(label: str) -> str:
    if not isinstance(label, str) or not _LABEL.match(label):
        raise VlmpathError(f"--label {str(label)[:60]!r}: a label name of letters, digits and ' ._:/+-' "
                           "(at most 50 characters)")
    return label


def parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 time as GitHub writes it (``2025-01-01T00:00:00Z``), timezone-aware."""
    try:
        t = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise VlmpathError(f"{what} {str(text)[:40]!r} is not an ISO 8601 time (e.g. 2025-01-01T00:00:00Z)") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def last_label_event(events: Iterable[Any], label: str) -> dict[str, Any] | None:
    """The ``labeled`` event that holds ``label`` now, or None: the events of that label
    (names compared case-insensitively, as GitHub does) ordered by their ``created_at``,
    never by the order a page lists them; at the same second an ``unlabeled`` counts
    last, and an event whose time cannot be read counts as the latest (it can only take
    a grant away: an unreadable ``labeled`` time is refused when it is read)."""
    latest = datetime.max.replace(tzinfo=timezone.utc)
    mine = []
    for i, ev in enumerate(events):
        lab = ev.get("label") if isinstance(ev, dict) and isinstance(ev.get("label"), dict) else {}
        name = lab.get("name")
        if ev.get("event") in ("labeled", "unlabeled") and isinstance(name, str) and name.casefold() == label.casefold():
            try:
                at = parse_time(ev.get("created_at", ""), "created_at")
            except VlmpathError:
                at = latest
            mine.append((at, ev["event"] == "unlabeled", i, ev))
    if not mine:
        return None
    last = max(mine, key=lambda t: t[:3])[3]
    return last if last["event"] == "labeled" else None


def _get(client: Client, path: str, what: str) -> dict[str, Any]:
    data = client.request("GET", client.url(path)).data
    if not isinstance(data, dict):
        raise GitHubError(f"GET {what} did not return an object: check GITHUB_API_URL")
    return data


def _permission(client: Client, owner: str, name: str, login: str) -> tuple[str, str]:
    """(``permission``, the role shown) of ``login`` on the repository; ``none`` when not a collaborator."""
    try:
        data = _get(client, f"/repos/{owner}/{name}/collaborators/{login}/permission", f"{login}'s permission")
    except GitHubError as exc:
        if exc.status == 404:
            return "none", "none"
        raise
    perm = data.get("permission") if isinstance(data.get("permission"), str) else "none"
    role = data.get("role_name") if isinstance(data.get("role_name"), str) else perm
    return perm, role[:40]


def read_grant(client: Client, repo: str, pr: int, *, head_sha: str, label: str = ACCEPT_LABEL,
               since: datetime | None = None) -> LabelGrant:
    """Who applied ``label`` to PR ``pr`` (``_read_label``), and which of the PR's changed
    files are the yardstick, as this job reads them from the API (issue 39)."""
    from vlmpath.core.yardstick import classify
    from vlmpath.github.pr_files import changed_files

    grant = _read_label(client, repo, pr, head_sha=head_sha, label=label, since=since)
    files, truncated = changed_files(client, repo, int(pr))
    return replace(grant, yardstick=tuple(classify(files)[0]), files_truncated=truncated)


def _read_label(client: Client, repo: str, pr: int, *, head_sha: str, label: str = ACCEPT_LABEL,
               since: datetime | None = None) -> LabelGrant:
    """Who applied ``label`` to PR ``pr`` (see the module docstring), as a ``LabelGrant``."""
    if not _REPO.match(repo):
        raise VlmpathError(f"--repo {repo[:80]!r} is not owner/name")
    if not _SHA40.match(head_sha):
        raise VlmpathError(f"--head-sha {head_sha[:60]!r} is not a 40-digit lowercase sha")
    check_label(label)
    owner, name = repo.split("/")

    def no(why: str) -> LabelGrant:
        return LabelGrant(repo, pr, head_sha, label, None, None, f"label {label}: {why}")

    pull = _get(client, f"/repos/{owner}/{name}/pulls/{int(pr)}", f"pull request #{pr}")
    head = (pull.get("head") or {}).get("sha") if isinstance(pull.get("head"), dict) else None
    if head != head_sha:
        return no(f"PR #{pr}'s head is {str(head)[:12]}, not the measured {head_sha[:12]} (a new push): "
                  "not read for this run")
    author = (pull.get("user") or {}).get("login") if isinstance(pull.get("user"), dict) else None
    url = client.url(f"/repos/{owner}/{name}/issues/{int(pr)}/events", {"per_page": PER_PAGE})
    current = last_label_event(paginate(client, url, f"events of PR #{pr}"), label)
    if current is None:
        return no(f"not on PR #{pr}; a maintainer applies it to accept this PR's own entries")
    actor = current.get("actor") if isinstance(current.get("actor"), dict) else {}
    login = actor.get("login")
    if actor.get("type") != "User" or not isinstance(login, str) or not _LOGIN.match(login):
        return no(f"applied by {str(login)[:40]!r}, not a person's account: not counted")
    if isinstance(author, str) and login.casefold() == author.casefold():  # GitHub logins ignore case
        return no(f"applied by @{login}, the PR's author: acceptance comes from another maintainer")
    at = parse_time(current.get("created_at", ""), "the label event's created_at")
    if since is not None and at < since:
        return no(f"applied by @{login} at {at:%Y-%m-%dT%H:%M:%SZ}, before the measured head was pushed "
                  f"({since:%Y-%m-%dT%H:%M:%SZ}): remove and re-apply it after reviewing this head")
    perm, role = _permission(client, owner, name, login)
    if perm not in MAINTAINER_PERMISSIONS:
        return no(f"applied by @{login}, whose permission is {role}: only write, maintain or admin counts")
    return LabelGrant(repo, pr, head_sha, label, login, role,
                      f"label {label}: applied by @{login} ({role}) at {at:%Y-%m-%dT%H:%M:%SZ}")


def write_grant(path: str | os.PathLike[str], grant: LabelGrant) -> None:
    from vlmpath.core.atomic import write_text

    write_text(path, json.dumps({"schema_version": GRANT_SCHEMA, **asdict(grant)}, indent=1, sort_keys=True) + "\n")


def load_grant(path: str | os.PathLike[str]) -> LabelGrant:
    """The grant ``write_grant`` wrote (the privileged job's own file), validated."""
    from vlmpath.core import safe_json

    where = f"--grant {path}"
    data = safe_json.loads(safe_json.read_capped(Path(path), "label grant", 1 << 16).decode("utf-8", "replace"), where)
    if not isinstance(data, dict) or data.get("schema_version") != GRANT_SCHEMA:
        raise VlmpathError(f"{where} is not a `vlmpath ci label-grant` file (schema_version {GRANT_SCHEMA})")
    try:
        g = LabelGrant(**{k: data[k] for k in LabelGrant.__dataclass_fields__
                          if k not in ("yardstick", "files_truncated")},
                       yardstick=data.get("yardstick", []), files_truncated=data.get("files_truncated", False))
    except KeyError as exc:
        raise VlmpathError(f"{where}: {exc} missing; write it with `vlmpath ci label-grant`") from None
    ok = (isinstance(g.pr, int) and not isinstance(g.pr, bool) and isinstance(g.head_sha, str)
          and _SHA40.match(g.head_sha) and isinstance(g.label, str) and _LABEL.match(g.label) and isinstance(g.why, str)
          and (g.granted_by is None or (isinstance(g.granted_by, str) and _LOGIN.match(g.granted_by)))
          and (g.permission is None or isinstance(g.permission, str))
          and isinstance(g.yardstick, list) and len(g.yardstick) <= 3000
          and all(isinstance(f, str) and 0 < len(f) <= 4096 for f in g.yardstick)
          and isinstance(g.files_truncated, bool))
    if not ok:
        raise VlmpathError(f"{where}: a field has the wrong type; write it with `vlmpath ci label-grant`")
    # Clipped: the text reaches the comment (escaped there) and the job log.
    return replace(g, why=g.why[:300], permission=None if g.permission is None else g.permission[:40],
                   yardstick=tuple(g.yardstick))
