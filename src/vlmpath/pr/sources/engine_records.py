"""Which rows does an *engine* PR artifact (``vlmpath ci pr --engine-src``) hold?

An engine artifact carries no asv results: its manifest's kind is ``engine`` and
``records/base.jsonl`` / ``records/head.jsonl`` hold each side's CaseRecords. Both
``ci pr --engine-src`` (on its own artifact) and the comment workflow (``vlmpath ci merge``,
with its own, trusted vlmpath) build the comparison from those records here, the same way;
the runner's ``comment.md`` is never posted. The artifact came from a job that ran the PR's
engine code, so every file is size-checked and every record validated before use.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from vlmpath.compare.records import RunResults
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.artifact import Artifact
from vlmpath.pr.sources import Context, Rows, RowSource
from vlmpath.suite.record import CaseRecord, read_records

RECORDS_SUBDIR = "records"

MAX_RECORDS_BYTES = 16 << 20
MAX_RECORDS = 10_000
MAX_TEXT = 500  # longest workload name / error message kept from an untrusted record


def _records(path: Path, artifact: str) -> list[CaseRecord]:
    if path.is_symlink() or not path.is_file():
        raise VlmpathError(f"artifact {artifact}: {RECORDS_SUBDIR}/{path.name} is missing or not a regular file")
    if path.stat().st_size > MAX_RECORDS_BYTES:
        raise VlmpathError(f"artifact {artifact}: {RECORDS_SUBDIR}/{path.name} is larger than {MAX_RECORDS_BYTES} bytes")
    where = f"artifact {artifact}: {RECORDS_SUBDIR}/{path.name}"
    out = [replace(r, workload=r.workload[:MAX_TEXT], error=None if r.error is None else r.error[:MAX_TEXT])
           for r in read_records(path, where)]
    if len(out) > MAX_RECORDS:
        raise VlmpathError(f"artifact {artifact}: more than {MAX_RECORDS} records in {path.name}")
    return out


def load_engine_artifact(art: Artifact) -> tuple[RunResults, RunResults]:
    """(base, head) results of one engine artifact."""
    from vlmpath.compare.from_records import run_from_records

    rec_dir = art.path / RECORDS_SUBDIR
    if rec_dir.is_symlink() or not rec_dir.is_dir():
        raise VlmpathError(f"artifact {art.name} is an engine run without {RECORDS_SUBDIR}/")
    m = art.manifest
    return tuple(  # type: ignore[return-value]
        run_from_records(_records(rec_dir / f"{side}.jsonl", art.name), machine=m.machine,
                         commit=sha, where=f"artifact {art.name} {side} records")
        for side, sha in (("base", m.base_sha), ("head", m.head_sha)))


class EngineRecords(RowSource):
    """Each engine artifact's records as its machine's rows (one artifact a machine)."""

    def rows(self, ctx: Context) -> Rows:
        got = Rows()
        for art in ctx.of_kind(engine=True):
            machine = art.manifest.machine
            if machine in ctx.owner:
                raise VlmpathError(f"machine {machine} appears in artifacts {ctx.owner[machine]} and {art.name}")
            ctx.owner[machine] = art.name
            base, head = load_engine_artifact(art)
            got.base.append(base)
            got.head.append(head)
        return got
