"""Which serve rows does an artifact hold, and how are they judged on their pairs?

``ci pr --serve MODEL_DIR`` measures base's and head's servers in interleaved rounds and
writes each round's run file (``OUT/serve/{base,head}-<i>.json``, ``pr.serve``), its
manifest saying ``serve`` (the model) and ``serve_rounds`` N. The judge (``ci pr`` on its own
artifact, ``ci merge`` on every machine's) never reads the artifact's comparison.json: ``serve_sides_of`` reads those N pairs of run files itself
(each a regular file within the run's budget, checked by ``serving.run_file``: shape only),
turns them into each side's ``RunResults`` for that artifact's machine and shas
(``compare.from_serve``: what a row means comes from the metric table), and ``judge_serve``
re-judges the serve timings on the pairs with the same ``compare.paired`` ``ci pr`` used
(agreement exact, errors exact; one round: the ordinary band, as ``ci pr`` left it).

A claimed serve run whose files are missing, malformed or more than ``MAX_SERVE_ROUNDS``
is named in a note and listed as incomplete, its serve rows absent: never green from rows
nobody could read. Two artifacts of one machine that both claim serve rows (shards that
each served) are refused in one line: serve in one shard only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.from_serve import first_differences, run_from_serve
from vlmpath.compare.paired import paired_report
from vlmpath.compare.records import RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.budget import RunBudget
from vlmpath.core.errors import VlmpathError
from vlmpath.core.safe_json import loads, read_capped
from vlmpath.pr.artifact import Artifact, RunManifest
from vlmpath.pr.sources import Context, Rows, RowSource
from vlmpath.serving.run_file import parse_run

SERVE_SUBDIR = "serve"  # pr.serve.SERVE_SUBDIR: the same folder ci pr writes
MAX_SERVE_ROUNDS = 50   # pr.serve.ServeOptions.check's upper bound
MAX_SERVE_FILE = 16 << 20


@dataclass(frozen=True)
class ServeSides:
    machine: str
    artifact: str
    base: tuple[RunResults, ...]
    head: tuple[RunResults, ...]
    notes: tuple[str, ...]


def _claimed_rounds(m: RunManifest) -> int | None:
    """None: the artifact claims no serve rows. Else its round count (maybe out of range)."""
    return None if m.serve is None else m.serve_rounds


def _files(art: Path, name: str, n: int) -> list[tuple[Path, str]]:
    """Each round's (path, where), base then head; a missing or oversized one refused."""
    if (art / SERVE_SUBDIR).is_symlink() or not (art / SERVE_SUBDIR).is_dir():
        raise VlmpathError(f"artifact {name}: {SERVE_SUBDIR}/ is missing (or a link)")
    out = []
    for i in range(n):
        for side in ("base", "head"):
            path = art / SERVE_SUBDIR / f"{side}-{i}.json"
            where = f"artifact {name}: {SERVE_SUBDIR}/{path.name}"
            if not path.is_file() or path.is_symlink():
                raise VlmpathError(f"{where} is missing")
            if path.stat().st_size > MAX_SERVE_FILE:
                raise VlmpathError(f"{where} is larger than {MAX_SERVE_FILE} bytes")
            out.append((path, where))
    return out


def _parse(path: Path, where: str) -> dict:
    return parse_run(loads(read_capped(path, where, MAX_SERVE_FILE), where, "re-run ci pr --serve"), where)


def serve_sides_of(artifact: Artifact, spent: RunBudget) -> tuple[ServeSides | None, str | None]:
    """The artifact's serve rounds as each side's ``RunResults`` (module doc), or why they
    cannot be used; (None, None): the artifact claims no serve rows."""
    art, name, m = artifact.path, artifact.name, artifact.manifest
    n = _claimed_rounds(m)
    if n is None:
        return None, None
    if not 1 <= n <= MAX_SERVE_ROUNDS:
        return None, f"artifact {name}: run.json claims serve rows but serve_rounds is not 1 to {MAX_SERVE_ROUNDS}"
    machine, base_sha, head_sha = m.machine, m.base_sha, m.head_sha
    try:
        files = _files(art, name, n)
    except VlmpathError as exc:
        return None, str(exc)[:400]
    for path, where in files:  # over the run's budget: the whole merge stops, as for results
        spent.charge(path.stat().st_size, where)
    try:
        parsed = [_parse(path, where) for path, where in files]
    except VlmpathError as exc:
        return None, str(exc)[:400]
    docs = list(zip(parsed[0::2], parsed[1::2]))
    base = tuple(run_from_serve(b, machine=machine, commit=base_sha) for b, _ in docs)
    head = tuple(run_from_serve(h, machine=machine, commit=head_sha, base=b) for b, h in docs)
    b_last, h_last = docs[-1]
    notes = tuple(f"{machine}: served outputs differ: {w} c={c}, first at character {pos}"
                  for w, c, pos in first_differences(b_last, h_last))
    return ServeSides(machine, name, base, head, notes), None


def collect(arts: Sequence[Artifact], spent: RunBudget) -> tuple[list[ServeSides], list[str], list[str]]:
    """Every artifact's usable serve sides, the notes, and the incomplete entries
    (``machine: usable serve rounds``)."""
    got: list[ServeSides] = []
    notes: list[str] = []
    broken: list[str] = []
    claimed: dict[str, str] = {}
    for art in arts:
        if _claimed_rounds(art.manifest) is None:
            continue
        name, machine = art.name, art.manifest.machine
        if machine in claimed:
            raise VlmpathError(f"machine {machine}: artifacts {claimed[machine]} and {name} both claim serve rows; "
                               "serve in one shard only (ci pr --serve with --shard 1/N)")
        claimed[machine] = name
        sides, why = serve_sides_of(art, spent)
        if sides is None:
            notes.append(f"{machine}: {why}: its serve rows are not judged")
            broken.append(f"{machine}: usable serve rounds")
        else:
            got.append(sides)
            notes.extend(sides.notes)
    return got, notes, broken


def judge_serve(report: ComparisonReport, got: Sequence[ServeSides], cfg: Thresholds
                ) -> tuple[ComparisonReport, list[str]]:
    """``report`` with each artifact's serve timings judged on its own pairs (``compare.paired``),
    and one note per machine saying so."""
    notes = []
    for s in got:
        if len(s.base) > 1:
            report = paired_report(list(s.base), list(s.head), report, cfg)
            notes.append(f"{s.machine}: served in {len(s.base)} interleaved rounds ({s.artifact}); "
                         "serve timings judged on paired rounds")
    return report, notes


class Served(RowSource):
    """The serve rows of every (asv) artifact that claims them; re-judged on their pairs."""

    def __init__(self) -> None:
        self.got: list[ServeSides] = []

    def rows(self, ctx: Context) -> Rows:
        got, notes, broken = collect(ctx.of_kind(engine=False), ctx.spent)
        self.got = got
        return Rows([s.base[-1] for s in got], [s.head[-1] for s in got], notes, broken)

    def rejudge(self, report: ComparisonReport, ctx: Context) -> tuple[ComparisonReport, Rows]:
        report, notes = judge_serve(report, self.got, ctx.cfg)
        return report, Rows(notes=notes)
