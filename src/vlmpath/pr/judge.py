"""Given every machine's artifact of one PR run, what is the verdict?

``judge`` is the one place a PR comparison is decided. Every flow measures into an
artifact (``pr.artifact``: a ``RunManifest`` and the files it names) and hands it here:
``ci pr`` its own artifact, ``ci pr --engine-src`` its records artifact, ``ci merge``
every machine's. So one artifact gets one verdict, whichever flow judged it.

The steps, in this order (a new rule goes into the step it names):

1. **pair**: every artifact compared the same (merge-base, head) (``artifact.one_pair``);
2. **rows**: each row source (``pr.sources``, ``SOURCES``) reads its rows from the
   artifacts through the checked, budgeted reader (asv results with shards merged, engine
   records, instruction counts, serve rounds); rules about one side's records belong here;
3. **compare**: ``compare.verdict.compare`` of the merged sides with the thresholds given
   (quick when any artifact was); rules about a row on one side only (vanished on head)
   apply right after it, on the report;
4. **re-judge**: sources that hold better evidence judge their rows again (serve and
   interleaved rounds: on pairs);
5. **select**: each machine's ``--bench`` as literal names (``compare.selection``: a
   pattern from an artifact is never compiled); the counts, selected when counted, stay.
   First, the cases the artifact's selection cuts that the trusted workflow's selection
   keeps withhold green (``compare.withheld``: the PR wrote that selection);
6. **accept**: one rule for every flow (``Acceptance``: base's entries accept, the PR's own
   await review unless a maintainer's label covers this head); a label read while the
   yardstick moved (``core.yardstick``) withholds green, and so does no label read at all
   where the trusted job requires one;
7. **shown**: rows shown beside the judged ones (head's definitions) and rows of shards
   that never arrived (named, never green);
8. **notes**: the judge's notes, then each artifact's own, with its machine in front;
   notes that classify the run (the yardstick moved) are decided here.

``write_verdict`` then writes comment.md, comparison.json and summary.txt and returns the
exit code (``pr.outputs.write_outputs``); the flows add only their header lines and what
is theirs alone (profiles, what grew, charts).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from vlmpath.compare import accepted as accepted_mod
from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.records import RunResults
from vlmpath.compare.selection import keep_selected
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.withheld import YARDSTICK_UNREAD, selection_withheld, withhold
from vlmpath.core.budget import RunBudget
from vlmpath.core.errors import VlmpathError
from vlmpath.core.yardstick import yardstick_withheld
from vlmpath.pr.artifact import Artifact, RunManifest, one_pair
from vlmpath.pr.sources import Context, RowSource
from vlmpath.pr.sources.asv import AsvResults
from vlmpath.pr.sources.counts import Counts
from vlmpath.pr.sources.definitions import HeadDefinitions
from vlmpath.pr.sources.engine_records import EngineRecords
from vlmpath.pr.sources.rounds import Rounds
from vlmpath.pr.sources.serve import Served

#: Every kind of rows an artifact can hold, in the order their rows join each side.
SOURCES: tuple[type[RowSource], ...] = (AsvResults, EngineRecords, Counts, Served, Rounds, HeadDefinitions)


@dataclass(frozen=True)
class Acceptance:
    """Who may accept a regression (``compare.accepted``), the same for every flow:
    ``proposed``: the PR head's entries; ``base``: the base branch's (trusted: they accept);
    ``grant``: a maintainer's label (``github.label_grant.LabelGrant``) for PR ``pr``."""

    proposed: tuple[accepted_mod.Accepted, ...] = ()
    base: tuple[accepted_mod.Accepted, ...] = ()
    grant: object | None = None
    pr: int | None = None
    #: The trusted workflow's own case selection (``compare.withheld.TRUSTED_BENCH_ENV``,
    #: read by ``ci merge``); None: every case base judged counts.
    trusted_bench: str | None = None
    #: The trusted job read the PR's changed files (``ci label-grant``) and so hands a grant
    #: every time (``compare.withheld.YARDSTICK_REQUIRED_ENV``): with none, never green.
    yardstick_required: bool = False

    def apply(self, report: ComparisonReport, head: str) -> tuple[ComparisonReport, list[str]]:
        g = self.grant
        if g is not None and (g.pr, g.head_sha) != (self.pr, head):  # type: ignore[attr-defined]
            raise VlmpathError(f"--grant is for PR {g.pr} at {g.head_sha[:12]}, but the artifacts are "  # type: ignore[attr-defined]
                               f"PR {self.pr} at {head[:12]}: read the label for this run")
        if g is not None:  # the files that define the measure changed: never green (issue 39)
            report = withhold(report, yardstick_withheld(g.yardstick, g.files_truncated))  # type: ignore[attr-defined]
        elif self.yardstick_required:  # the read failed: unknown is not unchanged (fails closed)
            report = withhold(report, (YARDSTICK_UNREAD,))
        report = accepted_mod.apply(report, self.proposed, pr=self.pr, base=self.base,
                                    grant=g.accepted_text() if g is not None else None)  # type: ignore[attr-defined]
        # Why the label did not count, where it would have mattered.
        return report, [g.why] if g is not None and report.awaiting_review else []  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Judged:
    """What ``judge`` decided: the report, the commits and machines, the notes, and what is
    missing (something the rows cannot show: the check is incomplete at best)."""

    report: ComparisonReport
    base_sha: str
    head_sha: str
    machines: tuple[str, ...]
    notes: tuple[str, ...]
    missing: tuple[str, ...] = ()
    found: tuple[str, ...] = ()  # the notes of the judge's own steps (not the caller's, not the artifacts')
    head_run: RunResults | None = field(default=None, compare=False)


def _with_notes(report: ComparisonReport, notes: Sequence[str]) -> ComparisonReport:
    if not notes:
        return report
    return replace(report, notes=tuple(dict.fromkeys(report.notes + tuple(n[:500] for n in notes))))


def judge(artifacts: Sequence[Artifact], cfg: Thresholds, accepted: Acceptance, *, staging: Path,
          spent: RunBudget | None = None, every_shard: bool = True, head_sha: str | None = None,
          notes: Sequence[str] = ()) -> Judged:
    """The verdict on ``artifacts`` (module doc: the steps). ``staging``: an empty directory
    the sources copy into; ``every_shard``: a shard that did not arrive is named (``ci
    merge``), else only the arrived shards' rows are this check's (one shard's ``ci pr``);
    ``head_sha``: the head the workflow run is for; ``notes``: the caller's, first."""
    from vlmpath.compare import records, verdict as compare

    if not artifacts:
        raise VlmpathError("nothing to judge: no artifact with a run.json")
    base_sha, head = one_pair(artifacts, head_sha)                                     # 1. pair
    ctx = Context(tuple(artifacts), staging, spent or RunBudget(), cfg, every_shard)
    sources = [s() for s in SOURCES]
    got = [s.rows(ctx) for s in sources]                                               # 2. rows
    base = [r for g in got for r in g.base]
    head_side = [r for g in got for r in g.head]
    if not base or not head_side:  # every artifact is of a kind some source reads: never reached
        raise VlmpathError(f"artifacts {', '.join(a.name for a in artifacts)[:200]} hold no rows to judge")
    ctx.base_side = base
    quick = any(a.manifest.quick for a in artifacts)                                   # 3. compare
    head_run = functools.reduce(records.merge_runs, head_side)
    # Every artifact measured head on its machine: base's judged cases there with no head
    # results vanished on head (compare.verdict), never "not judged".
    promised = frozenset(a.manifest.machine for a in artifacts)
    report = compare.compare(functools.reduce(records.merge_runs, base), head_run, cfg, quick=quick,
                             head_promised=promised)
    rejudged = []
    for s in sources:                                                                  # 4. re-judge
        report, more = s.rejudge(report, ctx)
        rejudged.append(more)
    chosen = {a.manifest.machine: a.manifest.bench for a in artifacts if a.manifest.bench}  # 5. select
    report = withhold(report, selection_withheld(report, chosen, accepted.trusted_bench))
    report = keep_selected(report, chosen, frozenset().union(*(g.kept for g in got)))
    report, grant_notes = accepted.apply(report, head)                                 # 6. accept
    shown = []
    for s in sources:                                                                  # 7. shown
        report, more = s.shown(report, ctx)
        shown.append(more)
    own = [n if n.startswith(f"{a.manifest.machine}: ") else f"{a.manifest.machine}: {n}"  # 8. notes
           for a in artifacts for n in a.manifest.notes]
    found = [*grant_notes, *(n for g in (*rejudged, *got, *shown) for n in g.notes)]
    all_notes = [*notes, *found, *own]
    report = _with_notes(report, all_notes)
    missing = tuple(m for g in (*shown, *rejudged, *got) for m in g.missing)  # shards, rounds, serve
    return Judged(report, base_sha, head, tuple(a.manifest.machine for a in artifacts), tuple(all_notes),
                  missing, tuple(found), head_run)


def write_verdict(out: Path, judged: Judged, *, header: Sequence[str], fail: bool, profiles: Sequence = ()) -> int:
    """comment.md, comparison.json and summary.txt of ``judged`` into ``out``; the exit code."""
    from vlmpath.pr.outputs import write_outputs

    because = f"missing {', '.join(judged.missing)}" if judged.missing else None
    return write_outputs(out, judged.report, header=header, fail=fail, profiles=profiles, incomplete_because=because)


def judge_own(out: Path, manifest: RunManifest, cfg: Thresholds, acceptance: Acceptance, *,
              header: Sequence[str], fail: bool) -> tuple[Judged, int]:
    """One machine's own artifact judged as ``ci merge`` judges it (``pr.judge``), the
    outputs written; (the judgement, the exit code). A shard's own check judges its own
    cases (the others are judged when the shards are merged)."""
    import shutil
    import tempfile

    staging = Path(tempfile.mkdtemp(prefix="vlmpath-judge-"))
    try:
        judged = judge([Artifact(out.name, out, manifest)], cfg, acceptance, staging=staging, every_shard=False)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return judged, write_verdict(out, judged, header=header, fail=fail)
