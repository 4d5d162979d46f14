"""How does a row say what its run could see: interval, smallest visible change, quick hints?

The words for ``vlmpath.compare.spread``'s fields, in one place (the metric table of
layout phase 2 can take them over): a row's verdict cell ("too noisy to judge" instead of
"unchanged" when the run's minimum detectable effect is beyond the band; "indicative"
for a verdict from too few samples) and its note (head's 99% interval, the MDE).
"""

from __future__ import annotations

from vlmpath.compare.comparison import Comparison, Verdict
from vlmpath.render.fmt import fmt_value

TOO_NOISY = "🌫️ too noisy to judge"
INDICATIVE = " (indicative: too few samples, not gating)"


def verdict_text(c: Comparison, base_text: str) -> str:
    """``base_text`` (the verdict's usual words), adjusted for what the run could see."""
    if c.verdict is Verdict.UNCHANGED and c.too_noisy:
        return TOO_NOISY
    if c.indicative and c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        return base_text + INDICATIVE
    return base_text


def spread_note(c: Comparison) -> str:
    """``head 99% CI 1.1k-1.3k tok/s; MDE 12% (band 50%)``; empty without samples."""
    bits = []
    if c.head_ci is not None:
        lo, hi = c.head_ci
        bits.append(f"head 99% CI {fmt_value(lo, c.unit)}-{fmt_value(hi, c.unit)} {c.unit}")
    if c.mde is not None:
        band = f" (band {c.factor * 100:.0f}%)" if c.factor is not None else ""
        bits.append(f"MDE {c.mde * 100:.0f}%{band}")
    return "; ".join(bits)
