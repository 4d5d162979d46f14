"""Do the instruction counts survive the cut to a selection, in ``ci pr`` and in ``ci merge``?

The counts are selected by their own pattern when counted (``--instructions-bench``, and in
a split check every routine case, counted in one shard): cutting the comparison to
a shard's cases dropped them, so the counting shard's own comparison (its comment,
summary and exit code) judged none of its counts (found by
``tests/test_shard_counts_flow.py``; the merged comment, cut by ``--bench`` only, had
them), and ``--instructions-bench`` wider than ``--bench`` lost the difference in both.
Only rows that were really counted are kept: a suite row outside the selection still goes.
Both flows now cut with one rule (``compare.selection.keep_selected``, in ``pr.judge``).
"""

from __future__ import annotations

from vlmpath.compare.comparison import Comparison, ComparisonReport, MachineComparison, Verdict
from vlmpath.compare.selection import keep_selected

M = "cpu-a"
SUITE_IN = "bench_embed.EmbedRoutine.track_accuracy"
SUITE_OUT = "bench_embed.EmbedRoutine.track_syncs"
COUNTED = "bench_embed.EmbedRoutine.track_routine_bytecodes"
PARAMS = (("pipeline", "default"), ("preset", "video"))


def _row(bench: str) -> Comparison:
    return Comparison(machine=M, benchmark=bench, params=PARAMS, unit="x", base=1.0, head=1.0,
                      verdict=Verdict.UNCHANGED)


def _report() -> ComparisonReport:
    return ComparisonReport("b" * 40, "h" * 40, (MachineComparison(M, "both", tuple(map(_row, (
        SUITE_IN, SUITE_OUT, COUNTED)))),))


def _names(report) -> list[str]:
    return sorted(c.benchmark for c in report.all())


def test_the_flows_cut_keeps_the_counted_rows_and_drops_the_rest():
    pattern = r"^bench_embed\.EmbedRoutine\.track_accuracy\('default', 'video'\)$"  # asv's spelling, escaped
    assert _names(keep_selected(_report(), {M: pattern})) == [SUITE_IN]  # the bug: counts gone
    kept = keep_selected(_report(), {M: pattern}, frozenset({(M, COUNTED, PARAMS)}))
    assert _names(kept) == sorted([SUITE_IN, COUNTED])
    # Another machine's or another case's count keeps nothing here.
    other = keep_selected(_report(), {M: pattern}, frozenset({("cpu-b", COUNTED, PARAMS), (M, COUNTED, ())}))
    assert _names(other) == [SUITE_IN]


def test_the_merges_cut_keeps_the_counted_rows_and_drops_the_rest():
    assert _names(keep_selected(_report(), {M: SUITE_IN})) == [SUITE_IN]
    assert _names(keep_selected(_report(), {M: SUITE_IN}, frozenset({(M, COUNTED, PARAMS)}))) == sorted(
        [SUITE_IN, COUNTED])
