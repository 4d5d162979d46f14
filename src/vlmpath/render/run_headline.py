"""Which few numbers of one ``vlmpath run`` answer the landing page's questions?

The end of the main job's terminal output (``render.summary.render_terminal``): instead of
every case (the full table stays in the summary files, and behind ``vlmpath run
--table``), the numbers that say what the box found, each read from the run's summary
rows (never measured or judged here):

- encoding: batched vs per-request vision-tower calls and accuracy, over the workloads
  both sides ran;
- syncs: the whole routine's host syncs, default vs legacy pipeline (and on a CPU, that a
  host sync costs next to nothing there: the count is the finding, not tok/s);
- hashing: what the receiver pays to identify the largest item, forwarded vs re-hashed.

Skipped cases are one short line per metric, saying what would enable them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from vlmpath.core.asv_names import strip_kind
from vlmpath.render.fmt import fmt_value, plural

# Rows and summaries are ``render.summary``'s (which calls this module: no import back).
Row = Summary = Any

#: What would make a skipped metric measurable (by the metric's name); the fallback says
#: what asv's n/a means. Short: one terminal line each.
ENABLE = {
    "reserved_bytes": "needs a GPU allocator's counter: run on a GPU",
    "peak_bytes": "needs an allocator counter: run on a GPU",
    "routine_bytecodes": "counted for an engine's routine only: --engine NAME==X",
    "routine_aten_elements": "counted for an engine's routine only: --engine NAME==X",
}
#: Whole benchmark classes skipped for one reason: one line for all their metrics.
ENABLE_CLASS = {
    "bench_serve.Serve": "opt-in: vlmpath run --serve MODEL_DIR (serve-bench --write-tiny-model DIR writes one)",
}
FALLBACK = "not measurable on this device or scale (asv n/a)"
#: Failure lines shown before "+N more" (the table keeps all).
FAILED_SHOWN = 5


def _ok(rows: Iterable[Row], benchmark: str) -> list[Row]:
    return [r for r in rows if r.benchmark == benchmark and r.state == "ok" and r.value is not None]


def _pairs(rows: Sequence[Row], benchmark: str, side: str, a: str, b: str, group: str = "preset"
           ) -> dict[str, tuple[float, float]]:
    """group -> (value of side ``a``, value of side ``b``) where both sides have a value."""
    got: dict[str, dict[str, float]] = defaultdict(dict)
    for r in _ok(rows, benchmark):
        p = dict(r.params)
        if p.get(side) in (a, b):
            got[p.get(group, "")][p[side]] = float(r.value)
    return {g: (v[a], v[b]) for g, v in got.items() if a in v and b in v}


def _unit(rows: Sequence[Row], benchmark: str) -> str:
    return next((r.unit for r in rows if r.benchmark == benchmark and r.unit), "")


def _encoding(rows: Sequence[Row]) -> str | None:
    calls = _pairs(rows, "bench_encode.EncodeMetrics.track_encoder_calls", "strategy", "batched", "per_request")
    if not calls:
        return None
    unit = _unit(rows, "bench_encode.EncodeMetrics.track_encoder_calls") or "calls"
    a, b = sum(v[0] for v in calls.values()), sum(v[1] for v in calls.values())
    line = (f"encoding: vision-tower {unit}, batched {fmt_value(a, unit)} vs per-request {fmt_value(b, unit)} "
            f"over {plural(len(calls), 'workload')}")
    acc = _pairs(rows, "bench_encode.EncodeMetrics.track_accuracy", "strategy", "batched", "per_request")
    if acc:
        lo = min(v[0] for v in acc.values()), min(v[1] for v in acc.values())
        line += f"; accuracy {fmt_value(lo[0], 'fraction')} vs {fmt_value(lo[1], 'fraction')} (lowest"
        # Which workload the lower one is: a reader looks there (per-request keys its cache by
        # the hash alone, as the engines do: key_collision serves it another item's rows).
        worst = min(acc, key=lambda g: min(acc[g]))
        line += f": {worst})" if min(acc[worst]) < 1.0 and worst else ")"
    return line


def _syncs(rows: Sequence[Row], backend: str) -> str | None:
    syncs = _pairs(rows, "bench_embed.EmbedRoutine.track_syncs", "pipeline", "default", "legacy")
    if not syncs:
        return None
    unit = _unit(rows, "bench_embed.EmbedRoutine.track_syncs") or "syncs"
    a, b = sum(v[0] for v in syncs.values()), sum(v[1] for v in syncs.values())
    line = (f"syncs:    whole routine's host {unit}, default {fmt_value(a, unit)} vs legacy {fmt_value(b, unit)} "
            f"over {plural(len(syncs), 'workload')}")
    if backend == "cpu":
        line += " (free on a CPU: judge the count, not tok/s)"
    return line


def _hashing(rows: Sequence[Row]) -> str | None:
    times = _pairs(rows, "bench_hash.Receive.time_receive", "path", "forwarded", "rehash", group="size_mib")
    if not times:
        return None

    def size(g: str) -> float:
        try:
            return float(g)
        except ValueError:
            return -1.0

    g = max(times, key=size)
    f, r = times[g]
    return (f"hashing:  the receiver identifies a {g} MiB item in {fmt_value(f, 'seconds')} forwarded "
            f"vs {fmt_value(r, 'seconds')} re-hashed")


def findings(s: Summary) -> list[str]:
    """The headline's lines of numbers (none when the run has none of these cases)."""
    backend = str((s.fingerprint or {}).get("backend", ""))
    return [x for x in (_encoding(s.rows), _syncs(s.rows, backend), _hashing(s.rows)) if x]


def metric_of(benchmark: str) -> str:
    return strip_kind(benchmark.rsplit(".", 1)[-1])


def skipped_lines(rows: Iterable[Row]) -> list[str]:
    """One short line per skipped metric (or opt-in class): how many cases, and what would
    enable them."""
    n: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        if r.state == "skipped":
            cls = r.benchmark.rsplit(".", 1)[0]
            key = (cls, ENABLE_CLASS[cls]) if cls in ENABLE_CLASS else \
                (metric_of(r.benchmark), ENABLE.get(metric_of(r.benchmark), FALLBACK))
            n[key] += 1
    by_why: dict[str, list[str]] = defaultdict(list)  # one line per reason, its metrics named
    for what, why in sorted(n):
        by_why[why].append(what)
    return [f"skipped: {', '.join(names)} ({plural(sum(n[(x, why)] for x in names), 'case')}): {why}"
            for why, names in by_why.items()]


def failed_lines(rows: Sequence[Row], one_line, limit: int) -> list[str]:
    failed = [r for r in rows if r.state == "failed"]
    out = [f"failed: {r.benchmark}({r.params_text}): {one_line(r.error or 'failed', limit)}"
           for r in failed[:FAILED_SHOWN]]
    if len(failed) > FAILED_SHOWN:
        out.append(f"failed: +{len(failed) - FAILED_SHOWN} more (every one in the full table)")
    return out
