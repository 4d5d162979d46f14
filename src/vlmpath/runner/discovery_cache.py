"""Which discoveries of the suite may a run reuse, instead of importing the suite again?

A PR check runs ``vlmpath run`` 12 times (6 interleaved rounds, base and head), and each
run discovered the suite twice (its own ``--bench`` check, then asv's) in a fresh
interpreter that imports torch: ~2 CPU-s each, ~45 CPU-s of a shard. The discovery of one
suite against one package in one environment is the same every time, so the PR flow
names a cache directory (``DISCOVERY_CACHE_ENV``, inside its own temporary directory) and
each discovery's raw listing (asv's own ``list_benchmarks`` output) is kept there under a
key of everything it depends on: the interpreter, the environment it ran with (PYTHONPATH,
the run's options) and the **content** of the benchmark files and of every ``vlmpath``
package on that path. A changed file, option or path is another key: a miss, never a
stale listing. Without the variable nothing is cached. Each run hands its listing to its
own ``asv run`` too (``runner.asv_main``), which then does not import the suite a second
time to discover it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from vlmpath.core import safe_json
from vlmpath.core.atomic import write_text
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import FAILURES_ENV

#: The directory a run keeps its discoveries in (set by ``vlmpath ci pr`` for its runs).
DISCOVERY_CACHE_ENV = "VLMPATH_DISCOVERY_CACHE"
#: The listing ``vlmpath run`` hands to its ``asv run`` (``runner.asv_main``).
ASV_LISTING_ENV = "VLMPATH_ASV_LISTING"
#: Variables that differ per process but never change what the suite lists.
_PER_PROCESS = frozenset({"TMPDIR", DISCOVERY_CACHE_ENV, ASV_LISTING_ENV, FAILURES_ENV})


def _tree_digest(h, root: Path) -> None:
    if not root.is_dir():
        return
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())


def cache_key(benchmark_dir: Path, python: str, env: Mapping[str, str]) -> str:
    """The key of one discovery (see the module docstring)."""
    h = hashlib.sha256()
    h.update(json.dumps([os.path.realpath(python), str(benchmark_dir.resolve()),
                         sorted((k, v) for k, v in env.items() if k not in _PER_PROCESS)]).encode())
    _tree_digest(h, benchmark_dir)
    for entry in (env.get("PYTHONPATH") or "").split(os.pathsep):
        if entry:
            h.update(b"\1" + entry.encode())
            _tree_digest(h, Path(entry) / "vlmpath")
    return h.hexdigest()[:32]


def cache_file(benchmark_dir: Path, python: str, env: Mapping[str, str]) -> Path | None:
    """Where this discovery's listing is kept (None: no cache directory named)."""
    root = env.get(DISCOVERY_CACHE_ENV)
    if not root:
        return None
    return Path(root) / f"discovered-{cache_key(benchmark_dir, python, env)}.json"


def load(path: Path | None) -> list | None:
    if path is None or not path.is_file():
        return None
    try:  # bounded: the listing's names come from the suite's (a PR's) code
        raw = safe_json.load_file(path, "discovery cache")
    except (OSError, VlmpathError):
        return None  # a miss: the suite is discovered again
    return raw if isinstance(raw, list) else None


def store(path: Path | None, raw: list) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(raw))
