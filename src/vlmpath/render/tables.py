"""How are rows of records shown in a terminal?

A plain fixed-width text table (no dependency), used by the CLI for ``measure`` records.
It only formats what it is given.
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.render.fmt import fmt_cell


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[fmt_cell(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


MEASURE_HEADERS = ["engine", "workload", "encode", "inject", "count", "hash", "tok/s", "accuracy",
                   "enc calls", "hits", "syncs", "enc syncs", "threads", "error"]


def _stages(r: dict) -> list:
    """What ran per stage: the reference's strategies, or the engine's seams."""
    seams = r.get("engine_seams") or {}
    if r.get("engine", "reference") == "reference" or not seams:
        return [r["pipeline"][k] for k in ("encode", "inject", "count", "hash")]
    return [seams.get(k, "?") for k in ("chunk_encoding", "scatter", "count", "shm")]


def measure_table(records: Sequence[dict]) -> str:
    """``vlmpath measure``'s table over record dicts (``CaseRecord.to_dict()``); the error
    column says only which case failed ("yes", see below), and every failed case's whole
    message follows the table (a message cut to 60 characters once hid which item did not
    fit)."""
    rows = [[r.get("engine", "reference"), r["workload"], *_stages(r), r["tok_per_s"], r["accuracy"],
             r["encoder_calls"], r["cache_hits"], r["syncs"], r["encoder_syncs"], r.get("threads"),
             "yes" if r["error"] else ""] for r in records]
    errors = [f"error: {r.get('engine', 'reference')} {r['workload']}/{'+'.join(_stages(r))}: {r['error']}"
              for r in records if r["error"]]
    return "\n".join([text_table(MEASURE_HEADERS, rows), *errors])
