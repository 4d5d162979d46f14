"""Which files did a pull request change, as the privileged job reads them from GitHub?

``GET /repos/{o}/{r}/pulls/{n}/files`` (paginated, at most 3000 files: GitHub's own cap),
read in the comment job with main's code, never from the artifact: the artifact is the
PR's own job's output, and a notice it carries can be dropped. Each file is ``(filename,
previous_filename or None)``; ``classify`` (``core.yardstick``) splits them into the
yardstick and the code under test.

Entry point: ``changed_files(client, repo, pr)`` -> ``(files, truncated)``, called by
``github.label_grant.read_grant`` (the privileged ``vlmpath ci label-grant`` step), which
writes the yardstick's files into ``grant.json``; ``ci merge --grant`` turns them into
``core.yardstick.yardstick_withheld`` reasons on the report (``compare.withheld.withhold``).
"""

from __future__ import annotations

import re

from vlmpath.core.errors import VlmpathError
from vlmpath.github.rest import PER_PAGE, Client, paginate

#: GitHub lists at most this many files of a pull request.
GITHUB_FILES_CAP = 3000
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_MAX_PATH = 4096


def changed_files(client: Client, repo: str, pr: int) -> tuple[list[tuple[str, str | None]], bool]:
    """The PR's changed files as ``(path, previous path or None)``, and whether the list may
    be incomplete (GitHub's cap reached, or an entry that is not a file record)."""
    if not _REPO.match(repo):
        raise VlmpathError(f"--repo {repo[:80]!r} is not owner/name")
    if isinstance(pr, bool) or not isinstance(pr, int) or not 0 < pr < 10**10:
        raise VlmpathError(f"--pr {str(pr)[:20]!r} is not a pull request number")
    url = client.url(f"/repos/{repo}/pulls/{pr}/files", {"per_page": PER_PAGE})
    out: list[tuple[str, str | None]] = []
    truncated = False
    for item in paginate(client, url, f"files of PR #{pr}"):
        name, prev = item.get("filename"), item.get("previous_filename")
        if not isinstance(name, str) or not name or len(name) > _MAX_PATH:
            truncated = True  # a file we cannot name: the yardstick may have moved
            continue
        out.append((name, prev if isinstance(prev, str) and prev and len(prev) <= _MAX_PATH else None))
    return out, truncated or len(out) >= GITHUB_FILES_CAP
