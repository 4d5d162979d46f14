"""Which GitHub issues carry a label, and how are they opened, edited, commented and closed?

A thin layer over the REST issues API for ``vlmpath ci alert`` (one issue per regressed
benchmark), on the client of ``vlmpath.github.rest`` (retries, rate limits, pages).
``list_issues`` skips pull requests (the issues endpoint lists both).
"""

from __future__ import annotations

from typing import Any

from vlmpath.github.rest import PER_PAGE, Client, GitHubError, Transient, paginate


def _issue(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict) or "number" not in data:
        raise GitHubError(f"GitHub's answer to {what} has no issue number: check GITHUB_API_URL")
    return data


def list_issues(client: Client, owner: str, name: str, *, label: str, state: str = "open") -> list[dict[str, Any]]:
    url = client.url(f"/repos/{owner}/{name}/issues", {"state": state, "labels": label, "per_page": PER_PAGE})
    return [i for i in paginate(client, url, f"issues of {owner}/{name}") if "pull_request" not in i]


def create_issue(client: Client, owner: str, name: str, *, title: str, body: str, labels: list[str]) -> dict[str, Any]:
    # One POST, never retried blindly: the caller lists again before creating (idempotence).
    try:
        resp = client.send_once("POST", client.url(f"/repos/{owner}/{name}/issues"),
                                {"title": title, "body": body, "labels": labels})
    except Transient as exc:
        raise GitHubError(f"{exc}: the issue may or may not exist; rerun (a rerun finds it instead of "
                          "opening another)", status=exc.status) from None
    return _issue(resp.data, "the issue create")


def update_issue(client: Client, owner: str, name: str, number: int, **fields: Any) -> dict[str, Any]:
    resp = client.request("PATCH", client.url(f"/repos/{owner}/{name}/issues/{int(number)}"), fields)
    return _issue(resp.data, "the issue update")


def comment_issue(client: Client, owner: str, name: str, number: int, body: str) -> None:
    try:
        client.send_once("POST", client.url(f"/repos/{owner}/{name}/issues/{int(number)}/comments"), {"body": body})
    except Transient as exc:
        raise GitHubError(f"{exc}: rerun", status=exc.status) from None
