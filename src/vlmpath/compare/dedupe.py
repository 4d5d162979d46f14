"""Which rows of a comparison are the same measurement reported under two names?

``bench_encode.EncodeMetrics(S, P)`` and ``bench_embed.EmbedRoutine(default, P)`` read the
same memoised ``measure_case`` when S is the default pipeline's encode strategy (one
case, one measurement), so every finding there would be counted twice ("12 regressions"
that are 6). ``once`` keeps the ``EmbedRoutine`` row and drops its ``EncodeMetrics``
twin: same metric method, same preset, and the same base and head values (the values
confirm the two rows really are one measurement; a default that changed between base
and head makes them differ, and then both stay). A note says how many were folded.
"""

from __future__ import annotations

from dataclasses import replace

from vlmpath.compare.comparison import Comparison, MachineComparison

ENCODE_CLASS = "EncodeMetrics"
EMBED_CLASS = "EmbedRoutine"


def _split(c: Comparison) -> tuple[str, str, dict[str, str]]:
    parts = c.benchmark.split(".")
    cls = parts[-2] if len(parts) >= 2 else ""
    return cls, parts[-1], dict(c.params)


def _key(c: Comparison, preset: str | None) -> tuple:
    return (_split(c)[1], preset, c.unit, c.base, c.head, c.verdict)


def once(m: MachineComparison) -> tuple[MachineComparison, str | None]:
    """The machine's rows with the twins dropped, and a note (report-level: a fold is not a
    partial run) when any were."""
    embed_keys = set()
    for c in m.comparisons:
        cls, _, params = _split(c)
        if cls == EMBED_CLASS and params.get("pipeline") == "default":
            embed_keys.add(_key(c, params.get("preset")))
    kept, folded = [], 0
    for c in m.comparisons:
        cls, _, params = _split(c)
        if cls == ENCODE_CLASS and c.base is not None and _key(c, params.get("preset")) in embed_keys:
            folded += 1
            continue
        kept.append(c)
    if not folded:
        return m, None
    note = (f"{m.machine}: {folded} {ENCODE_CLASS} row(s) are the same measurement as "
            f"{EMBED_CLASS}(default, ...) and are reported once")
    return replace(m, comparisons=tuple(kept)), note
