"""Where do a PR comparison's rows come from?

One module per kind of rows an artifact can hold (``RowSource``): ``asv`` (its asv
results, shards merged), ``engine_records`` (an engine PR's case records), ``counts`` (the
instruction counts), ``serve`` (served rounds), ``rounds`` (interleaved rounds: they
re-judge timing rows, they add none) and ``definitions`` (head's new or changed
definitions: shown, never judged). ``pr.judge`` asks every source in turn, at three
points of its one sequence of steps:

- ``rows``: each side's ``RunResults`` the source adds to the comparison (read from the
  artifacts through the checked, budgeted reader of ``pr.artifact``);
- ``rejudge``: after the comparison, before the selection: rows judged again on evidence
  the source holds (paired rounds);
- ``shown``: after the verdict's inputs are settled (selection, acceptance): rows shown
  beside the judged ones, or rows re-labelled as not judged (a missing shard).

A source keeps what it read in its own fields between the steps (one ``Context`` and one
set of source objects per judge call; no module state). A new kind of rows is one module
here and one entry in ``pr.judge.SOURCES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.records import RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.budget import RunBudget
from vlmpath.pr.artifact import Artifact


@dataclass
class Context:
    """What every source of one judge call sees; ``owner``: machine -> the artifact whose
    rows it holds (two artifacts of one machine are refused)."""

    artifacts: tuple[Artifact, ...]
    staging: Path
    spent: RunBudget
    cfg: Thresholds
    every_shard: bool = True  # ci merge: a shard that never arrived is named; ci pr: one shard's own check
    owner: dict[str, str] = field(default_factory=dict)
    base_side: list[RunResults] = field(default_factory=list)  # the judged base rows (definitions read them)

    def of_kind(self, engine: bool) -> list[Artifact]:
        return [a for a in self.artifacts if a.manifest.is_engine is engine]


@dataclass
class Rows:
    """What one source adds: each side's results, notes, what is missing (the check is
    incomplete at best), and row ids a selection must keep (selected when measured)."""

    base: list[RunResults] = field(default_factory=list)
    head: list[RunResults] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    kept: frozenset = frozenset()


class RowSource:
    """The protocol (module doc); every step is a no-op unless a source has one."""

    def rows(self, ctx: Context) -> Rows:
        return Rows()

    def rejudge(self, report: ComparisonReport, ctx: Context) -> tuple[ComparisonReport, Rows]:
        return report, Rows()

    def shown(self, report: ComparisonReport, ctx: Context) -> tuple[ComparisonReport, Rows]:
        return report, Rows()
