"""How does ``vlmpath ci pr --interleave N`` measure: base and head alternately, N rounds?

Each round runs the base side, then the head side, each a fresh ``vlmpath run`` process
(``pr_side.run_side``), and copies that side's asv results of the round to
``OUT/rounds/NN/{base,head}`` before the next run overwrites them (the results store's
``copy_comparison``: the commit's runs, their side files, ``benchmarks.json`` trimmed).
Drift on a shared machine (a neighbour's job, a frequency step) then lands on both sides
of a round alike, and ``vlmpath.compare.paired`` judges the timings on the paired rounds.
Base results are never reused in this mode: reuse would take base out of the time window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vlmpath.pr.artifact import MAX_ROUNDS
from vlmpath.compare.results_store import copy_comparison
from vlmpath.core.errors import VlmpathError

ROUNDS_SUBDIR = "rounds"


def check_rounds(n: int) -> None:
    if n < 2 or n > MAX_ROUNDS:
        raise VlmpathError(f"--interleave {n}: use 2 to {MAX_ROUNDS} rounds (6 or more to be judged; "
                           "fewer give indicative verdicts)")


def side_dir(out: Path, i: int, side: str) -> Path:
    return out / ROUNDS_SUBDIR / f"{i:02d}" / side


def run_rounds(n: int, out: Path, rdir: Path, machine: str, base_sha: str, head_sha: str,
               run_base: Callable[[], None], run_head: Callable[[], None]) -> None:
    from vlmpath.pr.side import log

    for i in range(n):
        for side, sha, run in (("base", base_sha, run_base), ("head", head_sha, run_head)):
            log(f"interleaved round {i + 1}/{n}: {side} {sha[:8]}")
            run()
            copy_comparison(rdir, side_dir(out, i, side), machine, (sha,))
