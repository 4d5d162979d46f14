"""How does vlmpath ask git about the checkout (top level, commits, dirty paths, worktrees)?

The one git module: ``vlmpath run`` and the PR flow (``vlmpath ci pr``) both name results
by commit and both need the same answers; before, each had its own ``_git`` with a
different signature and different errors. Every failure is a ``VlmpathError`` naming the
command, the repository and the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def git(repo: str | os.PathLike[str], *args: str, check: bool = True, stdin: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``git -C repo args``; ``check``: a non-zero exit is a ``VlmpathError`` with git's message.
    ``stdin``: text fed to git; ``env``: variables added to this process's environment."""
    try:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False,
                           input=stdin, env={**os.environ, **env} if env else None)
    except FileNotFoundError:
        raise VlmpathError("git is not installed or not on PATH: vlmpath names results by commit, install git") from None
    if check and r.returncode != 0:
        raise VlmpathError(f"git {' '.join(args)} failed in {repo}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def git_out(repo: str | os.PathLike[str], *args: str) -> str:
    """Standard output of a git command that must succeed."""
    return git(repo, *args).stdout


def repo_root(path: str | os.PathLike[str]) -> Path:
    """Top level of the git checkout containing ``path`` (a directory or a file in one)."""
    p = Path(path).resolve()
    if not p.exists():
        raise VlmpathError(f"--repo {path} does not exist: pass the vlmpath checkout")
    r = git(p if p.is_dir() else p.parent, "rev-parse", "--show-toplevel", check=False)
    if r.returncode != 0:
        raise VlmpathError(f"{p} is not inside a git work tree: vlmpath names results by commit, "
                           "run it in a git checkout (asv needs its history)")
    return Path(r.stdout.strip())


def head(repo: Path) -> str:
    return git_out(repo, "rev-parse", "HEAD").strip()


def resolve_commit(repo: Path, ref: str) -> str:
    """Full sha of ``ref`` (branch, tag or sha); an unknown ref is a ``VlmpathError`` naming it."""
    if not ref or ref.startswith("-") or any(c.isspace() for c in ref):
        raise VlmpathError(f"{ref!r} is not a git ref or commit: pass a branch, tag or sha")
    r = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if r.returncode != 0:
        raise VlmpathError(
            f"unknown commit {ref!r} in {repo}: no such commit; fetch it first (in CI: actions/checkout "
            "with fetch-depth: 0) or check the name"
        )
    return r.stdout.strip()


def dirty_paths(repo: Path) -> list[str]:
    """Modified, staged and untracked (not ignored) paths of the work tree."""
    return [line[3:] for line in git_out(repo, "status", "--porcelain").splitlines() if line.strip()]


def merge_base(repo: Path, a: str, b: str) -> str:
    r = git(repo, "merge-base", a, b, check=False)
    if r.returncode != 0 or not r.stdout.strip():
        raise VlmpathError(
            f"commits {a[:12]} and {b[:12]} have no merge-base: is the history shallow? "
            "Fetch the full history (actions/checkout fetch-depth: 0)"
        )
    return r.stdout.strip()


@contextmanager
def worktree(repo: Path, sha: str, path: Path) -> Iterator[Path]:
    """A detached checkout of ``sha`` at ``path``, removed on exit (also on failure)."""
    git(repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
    try:
        yield path
    finally:
        git(repo, "worktree", "remove", "--force", str(path), check=False)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        git(repo, "worktree", "prune", check=False)


def sha_or_revision(repo: str | os.PathLike[str], rev: str) -> str:
    """A hex sha (7 to 40 digits) as given, lowered: results may be for commits this clone
    lacks (downloaded artifacts); any other revision (``HEAD~1``, ``main``, a tag) resolved
    to its full sha in ``repo``."""
    import re

    if re.fullmatch(r"[0-9a-fA-F]{7,40}", rev or ""):
        return rev.lower()
    return resolve_commit(repo_root(repo), rev)


def file_at(repo: str | os.PathLike[str], sha: str, path: str, *, limit: int) -> bytes | None:
    """The bytes of ``path`` as committed at ``sha`` (``git show SHA:PATH``); None when the
    commit has no such file. Over ``limit`` bytes is a ``VlmpathError`` (sized before read)."""
    spec = f"{sha}:{path}"
    size = git(repo, "cat-file", "-s", spec, check=False)
    if size.returncode != 0:
        return None
    if int(size.stdout.strip() or 0) > limit:
        raise VlmpathError(f"{path} at {sha[:12]} is larger than {limit} bytes: shorten the file")
    try:
        r = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", spec], capture_output=True, check=False)
    except FileNotFoundError:
        raise VlmpathError("git is not installed or not on PATH: vlmpath names results by commit, install git") from None
    if r.returncode != 0:
        raise VlmpathError(f"git cat-file blob {spec} failed in {repo}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout
