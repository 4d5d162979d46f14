"""How does the comment workflow read an *engine* PR artifact (``vlmpath ci pr --engine-src``)?

An engine artifact carries no asv results: ``run.json`` says ``"kind": "engine"`` and
``records/base.jsonl`` / ``records/head.jsonl`` hold each side's CaseRecords. The
comment workflow (``vlmpath ci merge``) rebuilds the comparison from those records with
its own, trusted vlmpath, exactly as ``vlmpath.pr.engine`` built it on the runner; the
runner's ``comment.md`` is never posted. The artifact came from a job that ran the PR's
engine code, so every file is size-checked and every record validated before use.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from vlmpath.pr.engine import RECORDS_SUBDIR
from vlmpath.compare.records import RunResults
from vlmpath.core.errors import VlmpathError
from vlmpath.suite.record import CaseRecord, read_records

MAX_RECORDS_BYTES = 16 << 20
MAX_RECORDS = 10_000
MAX_TEXT = 500  # longest workload name / error message kept from an untrusted record


def is_engine_run(data: dict[str, Any]) -> bool:
    return data.get("kind") == "engine"


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


def load_engine_artifact(art: Path, data: dict[str, Any]) -> tuple[RunResults, RunResults]:
    """(base, head) results of one engine artifact whose run.json (``data``) is validated."""
    from vlmpath.compare.from_records import run_from_records

    rec_dir = art / RECORDS_SUBDIR
    if rec_dir.is_symlink() or not rec_dir.is_dir():
        raise VlmpathError(f"artifact {art.name} is an engine run without {RECORDS_SUBDIR}/")
    machine = data["machine"]
    return tuple(  # type: ignore[return-value]
        run_from_records(_records(rec_dir / f"{side}.jsonl", art.name), machine=machine,
                         commit=data[f"{side}_sha"], where=f"artifact {art.name} {side} records")
        for side in ("base", "head"))
