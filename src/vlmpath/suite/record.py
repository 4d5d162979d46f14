"""What is one measured case, and how does it cross a process or a file?

``CaseRecord`` is what ``measure_case`` returns, what the engine worker sends back, what
``vlmpath measure --json`` and the PR flows' ``records/*.jsonl`` hold, and what the
comparison (``compare.from_records``) and the terminal table (``render.tables``) read. It
crosses every boundary through ONE pair of functions:

- ``dumps_record(rec)``: one JSON line (sorted keys, no newline);
- ``loads_record(line_or_object, where)``: the record back, every field checked (a
  record can come from an artifact a pull request's job wrote: hostile input).

``write_records`` (atomic) and ``read_records`` are JSON Lines of them; the worker appends
``dumps_record`` lines as it goes. Nothing else writes or parses a record.

Every measured number is optional (``None``: not measured, or the case never ran), so a
record that lacks one (an older writer) reads as "not measured", never as a zero that a
comparison would take for an improvement. Keys this version does not know are ignored
(a newer writer); a value of the wrong type is an error naming the record and the fix.
This module imports no torch: the comparison and the comment read records without it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE

SCHEMA_VERSION = 1

#: Where a bad record sends the user.
FIX = "re-run `vlmpath measure --json` (or the measuring job) with this version of vlmpath"


@dataclass(frozen=True)
class CaseRecord:
    """One measured case; what ``vlmpath measure --json`` writes, one per line."""

    workload: str
    scale: str = DEFAULT_SCALE
    pipeline: dict = field(default_factory=dict)
    tok_per_s: float | None = None
    accuracy: float | None = None
    max_abs_err: float | None = None
    encoder_calls: int | None = None
    cache_hits: int | None = None
    wall_s: float | None = None             # median routine seconds per pass
    samples: tuple[float, ...] = ()         # routine seconds of every timed pass
    error: str | None = None
    prefill_tokens: int | None = None
    steps: int | None = None
    failed_steps: int | None = None
    items: int | None = None
    placed: int | None = None
    hash_s: float | None = None
    sha256_digests: int | None = None
    syncs: int | None = None
    encoder_syncs: int | None = None
    sync_events: dict = field(default_factory=dict)
    device: str = "cpu"
    # Peak memory of one pass; None = not measured, ``memory["reason"]`` says why.
    peak_bytes: int | None = None
    reserved_bytes: int | None = None
    memory: dict = field(default_factory=dict)
    # CPU settings the case ran under (``vlmpath.measure.pinning``): torch's intra-op
    # threads and the highest 1-minute load average seen while measuring.
    threads: int | None = None
    load_avg: float | None = None
    schema_version: int = SCHEMA_VERSION
    # Which routine ran (``vlmpath.engines.base.EngineSpec.label``), its version and the
    # engine seams it used (empty for the reference).
    engine: str = "reference"
    engine_version: str | None = None
    engine_seams: dict = field(default_factory=dict)
    # The values of the engine entry's options it ran with (``engines.engine_options``: every
    # option the entry declares; empty for the reference and for an engine that has none).
    engine_options: dict = field(default_factory=dict)
    # One pass of the routine with its tower replayed, counted exactly (engine cases:
    # ``suite.routine_counts``); None = not counted, ``counts_error`` says why when it failed.
    routine_bytecodes: int | None = None
    routine_aten_elements: int | None = None
    counts_error: str | None = None
    # The largest per-function bytecodes and per-operator elements of that pass
    # (``suite.routine_counts.TOP`` each): what grew, when a count moves.
    counts_top: dict = field(default_factory=dict)
    # The path's exact counts over the last pass (``measure.path_ledger``): content encoded
    # again, items encoded for a chunk that does not touch them, cache evictions, and the
    # storage the cache keeps alive (peak; beyond its payload; beyond its budget). None =
    # not measured (the routine exposes no ledger, or its cache was not observed).
    reencodes: int | None = None
    off_chunk_encodes: int | None = None
    cache_evictions: int | None = None
    cache_retained_bytes: int | None = None
    cache_unaccounted_bytes: int | None = None
    cache_over_budget_bytes: int | None = None
    # Misplaced items whose rows are another item's golden rows (served from its entry: a
    # key collision); None = not scored.
    foreign_rows: int | None = None


#: field -> what its JSON value must be (from the annotations: one table, no restatement).
_KINDS = {f.name: ("samples" if f.name == "samples" else "mapping" if f.type == "dict"
                   else "text" if f.type.startswith("str") else "number")
          for f in fields(CaseRecord)}


def dumps_record(rec: CaseRecord) -> str:
    """The record as one JSON line (sorted keys, no trailing newline)."""
    d = asdict(rec)
    d["samples"] = list(rec.samples)
    return json.dumps(d, sort_keys=True)


def _number(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def _check(name: str, v: Any, where: str) -> Any:
    kind = _KINDS[name]
    if kind == "number" and not _number(v):
        raise VlmpathError(f"{where}: field {name!r} is {v!r}, not a number; {FIX}")
    required_text = name in ("workload", "scale", "device", "engine")
    if kind == "text" and not (isinstance(v, str) or (v is None and not required_text)):
        raise VlmpathError(f"{where}: field {name!r} is {v!r}, not text; {FIX}")
    if kind == "mapping" and not isinstance(v, Mapping):
        raise VlmpathError(f"{where}: field {name!r} is {v!r}, not an object; {FIX}")
    if kind == "samples":
        if not isinstance(v, list) or not all(_number(x) and x is not None for x in v):
            raise VlmpathError(f"{where}: field 'samples' is {v!r}, not a list of numbers; {FIX}")
        return tuple(float(x) for x in v)
    return dict(v) if kind == "mapping" else v


def loads_record(data: str | Mapping[str, Any], where: str = "record") -> CaseRecord:
    """The record in ``data`` (a JSON line, or the object parsed from one); ``where``
    names it in the one-line error a malformed record raises."""
    if isinstance(data, str):  # bounded: an engine artifact's records reach the privileged merge
        data = safe_json.loads(data, where, FIX)
    if not isinstance(data, Mapping) or not isinstance(data.get("workload"), str) or not data["workload"]:
        raise VlmpathError(f"{where}: not a CaseRecord (no 'workload'); pass the JSON Lines of `vlmpath measure --json`")
    version = data.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise VlmpathError(f"{where}: CaseRecord schema_version {version!r} is not {SCHEMA_VERSION}; {FIX}")
    from vlmpath.suite.record_check import checked  # a record that contradicts itself: one failure

    return checked(CaseRecord(**{k: _check(k, v, where) for k, v in data.items() if k in _KINDS}))


def write_records(path: str | os.PathLike[str], records: Iterable[CaseRecord]) -> None:
    """JSON Lines, written atomically (a partial run never leaves a half-written file)."""
    from vlmpath.core import atomic

    atomic.write_text(path, "".join(dumps_record(r) + "\n" for r in records))


def read_records(path: str | os.PathLike[str], where: str | None = None, fix: str = "") -> list[CaseRecord]:
    """Every record of a JSON Lines file (blank lines skipped); a line that is not JSON
    raises naming ``where:line`` (default: the path) and ``fix``, a bad record its number."""
    from vlmpath.core.validate import json_lines

    where = where or str(path)
    lines = json_lines(Path(path).read_text(encoding="utf-8", errors="replace"), where, fix)
    return [loads_record(obj, f"{where} record {n}") for n, obj in enumerate(lines, 1)]
