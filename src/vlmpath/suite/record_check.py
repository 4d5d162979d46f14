"""Does a case record contradict itself, and what is such a record then?

A record can come from an artifact a pull request's job wrote. Its numbers are bound to
each other by how ``suite.measure`` computes them: ``accuracy`` is ``placed / items`` (1.0
with no items), ``placed`` is at most ``items``, ``failed_steps`` at most ``steps``, a
failed step leaves an ``error`` and no ``tok_per_s``. A record that breaks one of
these ("accuracy 1.0 with 0 of 4 items placed", "9 of 4 placed", a failed step with an
accuracy of 1.0 and a speed) is not compared as given: it is **one failure** of its case,
saying so, with none of its numbers left to compare (``as_failed``).

Entry point: ``checked(rec)``, called where records are read (``suite.record.loads_record``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vlmpath.suite.record import CaseRecord

#: The start of the error of a record that contradicts itself.
CONTRADICTS = "record contradicts itself"
_TOL = 1e-9


def _count(v) -> bool:
    return v is None or (float(v) >= 0 and float(v) == int(v))


def contradiction(rec: CaseRecord) -> str | None:
    """What in ``rec`` cannot all be true, in one phrase; None when it holds together."""
    items, placed, acc = rec.items, rec.placed, rec.accuracy
    for name in ("items", "placed", "steps", "failed_steps", "prefill_tokens", "syncs", "encoder_syncs",
                 "encoder_calls"):
        if not _count(getattr(rec, name)):
            return f"{name} {getattr(rec, name)!r} is not a count"
    if acc is not None and not 0.0 <= acc <= 1.0:
        return f"accuracy {acc} is outside 0..1"
    if items is not None and placed is not None and placed > items:
        return f"{placed:g} of {items:g} items placed"
    if acc is not None and items is not None and placed is not None:
        want = placed / items if items else 1.0
        if abs(acc - want) > _TOL:
            return f"accuracy {acc:g} with {placed:g} of {items:g} items placed"
    if rec.steps is not None and rec.failed_steps is not None and rec.failed_steps > rec.steps:
        return f"{rec.failed_steps:g} of {rec.steps:g} steps failed"
    if rec.failed_steps:
        if not rec.error:
            return f"{rec.failed_steps:g} failed step(s) and no error"
        if rec.tok_per_s is not None:
            return f"{rec.failed_steps:g} failed step(s) and a speed of {rec.tok_per_s:g} tok/s"
    if rec.error and rec.tok_per_s is not None:
        return f"an error and a speed of {rec.tok_per_s:g} tok/s"
    return None


def as_failed(rec: CaseRecord, error: str) -> CaseRecord:
    """``rec`` as one failure: ``error`` says why, no metric is left to compare."""
    from vlmpath.core.metrics import ENGINE_PATH, routine_metrics

    cleared = {m.name: None for m in routine_metrics(ENGINE_PATH) if hasattr(rec, m.name)}
    return replace(rec, **cleared, error=error[:500], samples=())


def checked(rec: CaseRecord) -> CaseRecord:
    """``rec``, or its one-failure form when it contradicts itself."""
    why = contradiction(rec)
    return rec if why is None else as_failed(rec, f"{CONTRADICTS}: {why}")


def instruments_held(rec: CaseRecord) -> CaseRecord:
    """``rec``, or its one-failure form when an instrument changed while it was measured
    (``measure.instrument_check.verify``); called right after a case ran."""
    from vlmpath.measure.instrument_check import verify

    why = verify()
    return rec if why is None else as_failed(rec, why)
