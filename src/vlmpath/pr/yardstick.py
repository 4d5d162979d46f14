"""With which definitions and thresholds is a pull request judged, and what did it change of them?

The base's, always (``docs/pr-flow.md``): both sides run the base revision's
``asv.conf.json`` and ``benchmarks/`` (each against its own side's package), and the
comparison uses the base revision's packaged ``thresholds.yaml``, read from git
(``yardstick_of``), never the file of the vlmpath that runs the flow (which may be the
PR's). What the PR changed of the yardstick (``core.yardstick``) is found with
``git diff --name-only base...head`` (the same read) and said at the top of the comment.

Head's new or changed benchmark definitions (asv's ``version``, its hash of a
benchmark's source, differs from base's, or base has no such benchmark) are run too, with
head's suite against head's package, in a results directory of their own
(``definitions_run``), and shown as "new definition, not judged" rows
(``definition_rows``): they can never pass or fail the check, so a benchmark the PR
rewrote to read less decides nothing. A changed helper outside the benchmark's own
source (``benchmarks/_common.py``) does not change asv's version, so a benchmark whose
helpers differ (``core.helper_digest``) counts as changed too: head's version of it is
run and shown, and base's (with base's helpers, on both sides) still judges.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vlmpath.compare.comparison import Comparison, MachineComparison, Verdict
from vlmpath.core.errors import VlmpathError
from vlmpath.core.git import git
from vlmpath.core.helper_digest import helper_digests, helpers_moved, module_of
from vlmpath.core.yardstick import notice, yardstick_files

if TYPE_CHECKING:
    from vlmpath.compare.thresholds import Thresholds

THRESHOLDS_PATH = "src/vlmpath/compare/thresholds.yaml"
BENCHMARK_DIR = "benchmarks"
DEFINITIONS_SUBDIR = "head-definitions"
NEW_DEFINITION = "new definition, not judged"
#: Most head definitions run (a PR that rewrites the whole suite is shown in part).
MAX_DEFINITIONS = 200


@dataclass(frozen=True)
class Yardstick:
    """What judges one pair: base's thresholds, and the yardstick files head moved."""

    thresholds: Thresholds
    moved: tuple[str, ...]

    @property
    def notice(self) -> str:
        """The comment's top notice when head moved the yardstick ('' when it did not)."""
        return notice(list(self.moved))

    @property
    def moves_definitions(self) -> bool:
        """Does head touch the benchmark definitions (its new ones then run, unjudged)?"""
        return any(f.startswith(BENCHMARK_DIR + "/") for f in self.moved)


def yardstick_of(root: Path, base_sha: str, head_sha: str, thresholds=None) -> Yardstick:
    """The pair's yardstick, read from git in two reads before anything is measured: the
    yardstick files ``git diff --name-only base...head`` names (renames count twice), and
    the thresholds the PR is judged with: the base revision's packaged yaml (plus the
    user's ``--config``: ``thresholds``); this package's own when the base has none (an
    older layout)."""
    from vlmpath.compare.thresholds import load_thresholds

    diff = git(root, "diff", "--name-only", "--no-renames", "-z", f"{base_sha}...{head_sha}")
    moved = tuple(yardstick_files(p for p in diff.stdout.split("\0") if p))
    packaged = git(root, "show", f"{base_sha}:{THRESHOLDS_PATH}", check=False)
    if packaged.returncode != 0:
        return Yardstick(load_thresholds(thresholds), moved)
    return Yardstick(load_thresholds(thresholds, packaged=(packaged.stdout, f"base {base_sha[:8]} {THRESHOLDS_PATH}")),
                     moved)


def changed_definitions(base_wt: Path, head_wt: Path, python: str,
                        env: Mapping[str, str]) -> tuple[list[str], set[str]]:
    """(benchmarks whose definition in head's ``benchmarks/`` is new or differs from base's:
    asv's version, or the helpers its module imports; base's benchmark names), both suites
    discovered against head's package (``env``)."""
    from vlmpath.runner.discovery import discover

    try:
        base = {b.name: b.version for b in discover(base_wt / BENCHMARK_DIR, python, env)}
    except VlmpathError as exc:
        raise VlmpathError(f"base's benchmarks/ (the yardstick both sides are measured with) do not load "
                           f"against head's package: {exc}. Keep them loading (a shim in benchmarks/_compat.py "
                           "on the base branch first)") from None
    try:
        head = discover(head_wt / BENCHMARK_DIR, python, env)
    except VlmpathError:
        return [], set(base)  # head's own suite does not load: nothing of it to show; base's judged
    moved = helpers_moved(helper_digests(base_wt / BENCHMARK_DIR), helper_digests(head_wt / BENCHMARK_DIR))
    changed = (b.name for b in head if base.get(b.name) != b.version or module_of(b.name) in moved)
    return sorted(changed)[:MAX_DEFINITIONS], set(base)


def names_pattern(names: Sequence[str]) -> str:
    """An ``asv run -b`` regex selecting exactly these benchmarks (any parameters)."""
    return "^(?:" + "|".join(re.escape(n) for n in names) + r")(?:\(|$)"


def definition_rows(defs_dir: Path, head_sha: str, machine: str, base_names: set[str]) -> MachineComparison | None:
    """Head's new or changed definitions as not-judged rows of one machine block."""
    from vlmpath.compare.asv_results import load_asv

    try:
        run = load_asv(defs_dir, head_sha)
    except VlmpathError:
        return None
    rows = []
    for m in (x for mr in run.machines for x in mr.metrics):
        why = ("changed in head (its code or a helper module it imports); base's definition is the one judged"
               if m.benchmark in base_names else "not in base")
        rows.append(Comparison(machine=f"{machine} (head's definitions)", benchmark=m.benchmark, params=m.params,
                               unit=m.unit, base=None, head=m.value, verdict=Verdict.NEW,
                               reason=f"{NEW_DEFINITION} ({why})", error=m.error))
    if not rows:
        return None
    return MachineComparison(f"{machine} (head's definitions)", "head-only", tuple(rows),
                             notes=(f"{machine}: {len(rows)} case(s) of head's new or changed benchmark definitions "
                                    f"measured, {NEW_DEFINITION}",))


def with_definitions(report, block: MachineComparison | None):
    from dataclasses import replace

    return report if block is None else replace(report, machines=(*report.machines, block))
