"""How much work does one pass of an engine's own routine do, counted exactly?

The engine side of the deterministic gate (issue 22): for a case measured with an engine
adapter (``--engine NAME==X``, ``ci pr --engine-src``), one pass of the engine's routine
with the vision tower *replayed* is counted natively (``measure.op_count``): the rows the
real tower produced for each call are recorded in an uncounted pass
(``measure.tower_replay``), an uncounted pass through the replay warms the path up, and a
fresh routine (empty cache) runs the schedule once more under the counter. What is counted
is then the engine's own code (its scheduling, cache, hashing bookkeeping, gathering and
merging) plus our adapter's glue, which is the same on both sides of an engine PR: a change
of the count is the engine's.

Two tallies, the record's ``routine_bytecodes`` and ``routine_aten_elements`` (metric rows
of the same names in ``core.metrics``), gated exactly at their band like the reference
routine's counts (``selfcheck.ir_cases``). A pass that raises, or calls the encoder
differently from the recording, leaves both ``None`` with the reason: never a zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vlmpath.measure import path_ledger
from vlmpath.measure.op_count import OpCounter
from vlmpath.measure.tower_replay import Recorder


#: Per tally, the functions / operators kept in the record (what grew names them).
TOP = 40
NAME_MAX = 160


@dataclass(frozen=True)
class RoutineCounts:
    bytecodes: int | None
    elements: int | None
    error: str | None = None
    #: ``{"python": {function: bytecodes}, "aten": {operator: elements}}``, the ``TOP`` largest
    #: of each: what ``pr.instructions.what_grew_records`` compares between base and head.
    top: dict = field(default_factory=dict)


def _top(counts: dict) -> dict:
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    return {str(k)[:NAME_MAX]: int(v) for k, v in best}


def count_routine(make: Callable, wl, encoder, pipeline, table, cache_bytes: int) -> RoutineCounts:
    """``make(wl, encoder, pipeline, table, cache_bytes=...)`` builds the routine (an
    engine adapter's ``routine`` or the reference's class); one counted pass of it."""

    def one_pass(enc) -> Callable[[], None]:
        routine = make(wl, enc, pipeline, table, cache_bytes=cache_bytes)  # built outside the count
        return lambda: [routine.run_step(step) for step in wl.steps]

    try:
        rec = Recorder(encoder)
        one_pass(rec)()  # the real tower, recorded (and the warm-up)
        one_pass(rec.replay())()  # the replayed path, warmed up as it will be counted
        replay = rec.replay()  # fresh copies of the recorded rows, made outside the count
        # The path ledger (measure.path_ledger) is measuring, not the routine: left out.
        counter = OpCounter(harness=(__file__, path_ledger.__file__))
        counter.count(one_pass(replay))
        if replay.left:
            raise RuntimeError(f"the counted pass left {replay.left} recorded tower call(s) unmade")
    except Exception as exc:  # a case that cannot be counted says why; its other metrics stand
        return RoutineCounts(None, None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
    return RoutineCounts(counter.parts["bytecodes"], counter.parts["elements"],
                         top={k: _top(v) for k, v in counter.breakdown.items()})
