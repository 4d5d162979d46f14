"""Why did a benchmark case fail? The one home of the failure-file format.

asv records a raising benchmark as ``null`` and keeps its message only in the log. So:

* the suite (``benchmarks/_common.report_failures``) appends one JSON line per failure,
  ``{"benchmark", "params": {name: value}, "param_names": [asv's order], "error"}``, to the file named by
  ``$VLMPATH_FAILURES_FILE`` (``record_failure``: one ``O_APPEND`` write, so concurrent
  benchmark processes never interleave);
* ``vlmpath run`` points that variable at a temp file and afterwards files the lines,
  deduplicated, as a JSON list beside the results:
  ``<results>/<machine>/vlmpath-failures-<sha8>.json`` (``collect_failures``,
  ``merge_failures``, ``failures_path``);
* the comparison reads that list back (``read_failures``) to show each failed case's own
  message instead of asv's bare ``null``.

Before, the variable name, the file name and the entry shape were spelled out in five
places (the run, the results reader, the suite, the PR flow's copier and the tests).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError

#: The suite appends why each benchmark failed to the file this variable names.
FAILURES_ENV = "VLMPATH_FAILURES_FILE"
#: ``<machine dir>/vlmpath-failures-<sha8>.json``.
FAILURES_PREFIX = "vlmpath-failures-"
#: A line stays far below PIPE_BUF (4096), so an O_APPEND write of it is one atomic append
#: even when several benchmark processes write at once.
MAX_ERROR_CHARS = 500
MAX_LINE_BYTES = 3500


@dataclass(frozen=True)
class Failure:
    """Why one benchmark case failed (one entry of a ``vlmpath-failures-<sha8>.json``)."""

    benchmark: str
    params: tuple[tuple[str, str], ...]  # (name, value as asv's results show it)
    error: str

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """Matches ``(Metric.benchmark, parameter values)``; names may differ (``param1``)."""
        return (self.benchmark, tuple(v for _, v in self.params))

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "params": dict(self.params),
                "param_names": [k for k, _ in self.params], "error": self.error}

    @classmethod
    def from_dict(cls, d: Any) -> Failure:
        """From a failures-file entry (values as the benchmark saw them: 64, 'default').
        ``param_names`` gives asv's parameter order: JSON writers here sort object keys
        (``sort_keys=True``), so the ``params`` object alone lost it and ``key`` matched
        ``("preset", "strategy")`` values against asv's ``("strategy", "preset")``."""
        if not (isinstance(d, Mapping) and isinstance(d.get("benchmark"), str) and isinstance(d.get("error"), str)
                and isinstance(d.get("params", {}), Mapping)):
            raise TypeError(f"expected {{benchmark: str, params: object, error: str}}, got {str(d)[:80]!r}")
        raw = d.get("params", {})
        order = d.get("param_names")
        if isinstance(order, list) and sorted(map(str, order)) == sorted(map(str, raw)):
            raw = {str(k): raw[str(k)] for k in order}
        params = tuple((str(k), str(v)) for k, v in raw.items())
        return cls(d["benchmark"], params, d["error"])


# --- the suite's side: one line per failure ------------------------------------------------
def failure_line(benchmark: str, params: Mapping[str, object], error: str) -> bytes:
    """One JSON line: ``{"benchmark", "params", "param_names", "error"}`` (bounded size)."""
    plain = {str(k): (v if v is None or isinstance(v, (str, int, float, bool)) else str(v))
             for k, v in params.items()}
    error = error[:MAX_ERROR_CHARS]
    while True:
        # asv's parameter order travels as a list: an object's key order does not survive
        # the sorted dumps of the filed list (see ``Failure.from_dict``).
        data = json.dumps({"benchmark": benchmark, "params": plain, "param_names": list(plain),
                           "error": error}, ensure_ascii=True, sort_keys=True) + "\n"
        if len(data) <= MAX_LINE_BYTES or not error:
            return data.encode("ascii")
        error = error[: len(error) // 2]


def record_failure(benchmark: str, params: Mapping[str, object], error: str,
                   env: Mapping[str, str] | None = None) -> bool:
    """Append one failure line to ``$VLMPATH_FAILURES_FILE``; False when it is not set.
    One ``os.write`` on an ``O_APPEND`` descriptor: concurrent writers never interleave."""
    path = (os.environ if env is None else env).get(FAILURES_ENV)
    if not path:
        return False
    data = failure_line(benchmark, params, error)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return True


# --- the run's side: lines -> one filed list -------------------------------------------------
def failures_path(machine_dir: str | os.PathLike[str], commit: str) -> Path:
    return Path(machine_dir) / f"{FAILURES_PREFIX}{commit[:8]}.json"


def collect_failures(lines_path: str | os.PathLike[str]) -> tuple[list[Failure], int]:
    """The failure lines the benchmarks appended: (``Failure`` list in file order, number of
    unreadable lines). A missing file means nothing failed."""
    try:
        raw = Path(lines_path).read_bytes()
    except FileNotFoundError:
        return [], 0
    found, bad = [], 0
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            found.append(Failure.from_dict(json.loads(line)))
        except (ValueError, TypeError):
            bad += 1
    return found, bad


def merge_failures(previous: Sequence[Failure], new: Sequence[Failure],
                   rerun: set[tuple[str, tuple[str, ...]]]) -> list[dict]:
    """The failures file's content: ``new`` (first message per case: asv may run a case
    in several rounds), plus ``previous`` entries for cases this run did not select
    (``rerun``: (benchmark, parameter values) keys), sorted, as JSON-ready dicts."""
    out: dict = {}
    for f in new:
        out.setdefault(f.key, f)
    for f in previous:
        if f.key not in rerun:
            out.setdefault(f.key, f)
    return [out[k].to_dict() for k in sorted(out)]


# --- the comparison's side: read the filed list ----------------------------------------------
def read_failures(path: str | os.PathLike[str]) -> tuple[Failure, ...]:
    """A failures file written by ``vlmpath run``: () if there is none; ``VlmpathError``
    naming the file if it cannot be read."""
    p = Path(path)
    if not p.is_file():
        return ()
    try:
        data = safe_json.load_file(p, "corrupted failures file", "delete it or re-run")
        if not isinstance(data, list):
            raise TypeError(f"not a JSON list but {type(data).__name__}")
        return tuple(Failure.from_dict(d) for d in data)
    except (OSError, ValueError, TypeError) as exc:
        raise VlmpathError(f"corrupted failures file {p}: {exc}; delete it or re-run") from None
