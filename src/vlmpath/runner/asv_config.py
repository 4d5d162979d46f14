"""How is asv's configuration read and handed to asv with absolute paths?

asv has no flags for the results and html directories, and resolves relative paths in
``asv.conf.json`` against the *current* directory, not the config's; so the run writes a
temporary copy with every path absolute. Also: is a directory we must write to writable?
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def abs_path(repo: Path, p: str | os.PathLike[str]) -> Path:
    q = Path(p).expanduser()
    return q if q.is_absolute() else (repo / q)


def load_config(path: Path) -> dict:
    """asv.conf.json, which may hold // comments (asv's own loader strips them)."""
    from asv import util as asv_util

    if not path.is_file():
        raise VlmpathError(f"{path} not found: run from the vlmpath checkout or pass --repo")
    try:
        return asv_util.load_json(str(path), js_comments=True)
    except asv_util.UserError as exc:
        raise VlmpathError(f"cannot read {path}: {exc}") from None


def write_config(conf: Mapping, repo: Path, results_dir: Path, html_dir: Path, dest: Path) -> Path:
    """A copy of the config with every path absolute (see the module docstring)."""
    c = dict(conf)
    c["repo"] = str(abs_path(repo, conf.get("repo", ".")))
    c["benchmark_dir"] = str(abs_path(repo, conf.get("benchmark_dir", "benchmarks")))
    c["env_dir"] = str(abs_path(repo, conf.get("env_dir", ".asv/env")))
    c["results_dir"] = str(results_dir)
    c["html_dir"] = str(html_dir)
    dest.write_text(json.dumps(c, indent=2), encoding="utf-8")
    return dest


def check_writable(path: Path, what: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".vlmpath-write-check-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise VlmpathError(f"{what} {path} is not writable ({exc.strerror or exc}): pass a writable directory "
                           f"with --{what.replace(' ', '-')}") from None

