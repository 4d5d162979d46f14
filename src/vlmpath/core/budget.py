"""How much may one untrusted input cost, and one run as a whole?

Everything a pull request can write (artifacts, results, traces, YAML files in its tree) is
read within one set of bounds, named here so that every reader uses the same ones:

- bytes: each file at most ``MAX_FILE_BYTES``; all the artifacts of one ``ci merge``
  together at most ``MAX_RUN_BYTES``;
- depth and numbers: JSON and YAML nested at most ``MAX_DEPTH``; a number literal at most
  ``MAX_NUMBER_CHARS`` characters; ``NaN``/``Infinity``/an overflowing float refused where a
  count or a share is expected (``core.safe_json``);
- expansion: a results file's cases are the product of its parameter axes (a failed
  benchmark with three axes of 50 values is 125,000 cases in a few hundred bytes), so the
  cases per file and per run are bounded (``MAX_CASES``), a parameter value is kept to
  ``MAX_PARAM_CHARS`` (the rest replaced by a hash, so two long values stay apart) and a
  case's samples to ``MAX_SAMPLES``; YAML aliases are refused outright (``core.safe_yaml``);
- time: one run at most ``MAX_RUN_SECONDS`` of reading and comparing, checked between files:
  derived from the privileged job's timeout (``merge_budget_s``), below it, so a flood of
  small files ends in a one-line refusal that is posted, not in a killed job.

``RunBudget`` is what one run has spent: one per run, passed down, never global.
Any breach is one ``VlmpathError`` naming the input and the bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vlmpath.core.errors import VlmpathError

MAX_FILE_BYTES = 64 << 20
MAX_RUN_BYTES = 256 << 20
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 64
#: Cases (benchmark x parameter combination) of one results file, and of one side of a run:
#: the whole suite is a few thousand.
MAX_CASES = 20_000
MAX_PARAM_CHARS = 200
MAX_SAMPLES = 10_000
MAX_YAML_BYTES = 256 << 10  # a config is a few KB; PyYAML reads ~100 KB/s
#: The privileged comment job's ``timeout-minutes`` (.github/workflows/bench-comment.yml,
#: job ``comment``; tests/test_verdict_bounds.py reads the file and fails when they differ).
COMMENT_JOB_TIMEOUT_S = 15 * 60
#: What that job needs besides reading and comparing: checkout, install, downloads, the
#: label grant, rendering and posting the comment and the status.
COMMENT_JOB_RESERVE_S = 7 * 60


def merge_budget_s(job_timeout_s: float, reserve_s: float = COMMENT_JOB_RESERVE_S) -> float:
    """Seconds one merge may spend reading and comparing inside a job of ``job_timeout_s``:
    the timeout less the job's other steps, so the merge refuses (one line, posted) before
    the runner kills the job (nothing posted). At least a minute; never the whole timeout."""
    return max(60.0, min(job_timeout_s - reserve_s, 0.8 * job_timeout_s))


MAX_RUN_SECONDS = merge_budget_s(COMMENT_JOB_TIMEOUT_S)


@dataclass
class RunBudget:
    """What one run has spent on untrusted input so far, and its limits."""

    max_bytes: int = MAX_RUN_BYTES
    max_seconds: float = MAX_RUN_SECONDS
    clock: Callable[[], float] = time.monotonic
    spent_bytes: int = 0
    started: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    def charge(self, n_bytes: int, where: str) -> None:
        """Count ``n_bytes`` read from ``where``; refuse past the run's byte limit or time."""
        self.spent_bytes += max(int(n_bytes), 0)
        if self.spent_bytes > self.max_bytes:
            raise VlmpathError(f"{where}: the run's inputs are over {self.max_bytes} bytes in all "
                               "(artifacts of one run together); split the run or drop results")
        self.check_time(where)

    def check_time(self, where: str) -> None:
        spent = self.clock() - self.started
        if spent > self.max_seconds:
            raise VlmpathError(f"{where}: the run spent {spent:.0f} s reading its inputs, over the limit of "
                               f"{self.max_seconds:.0f} s; split the run or drop results")
