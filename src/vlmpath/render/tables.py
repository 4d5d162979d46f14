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
