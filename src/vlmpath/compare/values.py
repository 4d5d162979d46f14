"""Is a measured value a number the comparison may judge?

One rule for every reader (asv, pytest-benchmark, engine records, instruction counts)
and for the judge itself: a value is judged only when it is a real JSON number (not a
boolean, not a string such as "nan"), finite, and inside its unit's range (a fraction is
in [0, 1]; a time, a size, a count or a rate is not negative). Anything else is *not
judged*, with the reason said, never turned into a number: ``float("nan")`` of a string,
``float(True)`` and an accuracy of -5 once became improvements.
"""

from __future__ import annotations

import math
from typing import Any

#: Units whose values are never negative (all the units thresholds.yaml knows).
NON_NEGATIVE = frozenset({"seconds", "ms", "bytes", "syncs", "calls", "tok/s", "GB/s", "fraction",
                          "instructions", "bytecodes", "elements", "count", "tokens"})
#: Units with an upper bound too.
UNIT_RANGE = {"fraction": (0.0, 1.0)}


def value_problem(raw: Any, unit: str) -> str | None:
    """Why ``raw`` cannot be judged as a value in ``unit`` (None: it can)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        shown = repr(raw)[:40]
        return f"value {shown} is not a number ({type(raw).__name__})"
    try:
        x = float(raw)
    except OverflowError:
        return "value is too large to be a number"
    if not math.isfinite(x):
        return f"value {x} is not finite"
    lo, hi = UNIT_RANGE.get(unit, (0.0 if unit in NON_NEGATIVE else -math.inf, math.inf))
    if not lo <= x <= hi:
        return f"value {x:g} is outside the range of {unit} [{lo:g}, {hi:g}]"
    return None


def checked(raw: Any, unit: str) -> tuple[float | None, str | None]:
    """``(value, None)`` for a judgeable value; ``(None, why)`` otherwise (None stays None:
    a missing value is the reader's failure, not an invalid one)."""
    if raw is None:
        return None, None
    why = value_problem(raw, unit)
    return (None, why) if why else (float(raw), None)
