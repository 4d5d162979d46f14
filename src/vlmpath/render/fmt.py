"""How is a measured number shown, given its unit?

The one number-formatting module (there were three: the PR comment's, the run summary's
and the text tables'). ``fmt_value`` scales seconds and bytes to a readable suffix and
keeps counts whole; ``fmt_pair`` adds digits until base and head look different when
they are; ``fmt_with_unit`` is a value with its unit for a run summary's table;
``fmt_cell`` is a unit-less cell of a plain text table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from vlmpath.core.metrics import Method, unit_spec, units_with

if TYPE_CHECKING:  # only a type: formatting must stay import-light
    from vlmpath.compare.comparison import Comparison

#: Units ``fmt_value`` already shows through its suffix or its shape (the metric table's
#: ``scaled`` units, and no unit).
_SELF_DESCRIBING = units_with("scaled") + ("",)


#: Seconds shown as the largest of these at or below the value.
TIME_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def time_scale(seconds: float) -> tuple[float, str]:
    """(divide by, suffix) for showing ``seconds`` (a chart axis picks it from its top)."""
    return next(((f, s) for f, s in TIME_SCALES if abs(seconds) >= f), TIME_SCALES[-1])


def _scaled(v: float, unit: str, digits: int) -> str:
    # How a unit is shown is the metric table's ``fmt`` (``vlmpath.core.metrics``).
    spec = unit_spec(unit)
    shape = spec.fmt if spec is not None else "plain"
    if unit == "seconds":
        scale, suffix = time_scale(v)
        return f"{v / scale:.{digits}g} {suffix}"
    if unit == "bytes":
        for scale, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")):
            if abs(v) >= scale or scale == 1:
                return f"{v / scale:.{digits}g} {suffix}"
    if shape == "fraction":
        return f"{v:.{max(digits - 1, 2)}f}"
    if shape == "count" and float(v).is_integer():
        return f"{int(v)}"
    if abs(v) >= 10**digits:  # 9443 tok/s, not 9.44e+03
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def fmt_value(v: float | None, unit: str, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return _scaled(float(v), unit, digits)


def fmt_pair(b: float | None, h: float | None, unit: str) -> tuple[str, str]:
    """Base and head formatted with just enough digits to look different when they are."""
    for digits in range(3, 10):
        fb, fh = fmt_value(b, unit, digits), fmt_value(h, unit, digits)
        if b is None or h is None or b == h or fb != fh:
            return fb, fh
    return fb, fh


def fmt_change(c: Comparison) -> str:
    if c.base is None or c.head is None:
        return "—"
    if c.method == Method.EXACT:
        delta = c.head - c.base
        if delta == 0:
            return "±0"
        return f"{delta:+.4g}"
    if c.base == 0:
        return "±0%" if c.head == 0 else "n/a (base 0)"
    return f"{(c.head / c.base - 1) * 100:+.1f}%"



def fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.3g}"


def fmt_pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


def fmt_with_unit(v: float | None, unit: str) -> str:
    """A run summary's value cell: ``12.3 ms``, ``2 syncs``, ``9443 tok/s``; ``-`` when
    there is none, ``n/a`` for NaN (plain ASCII: it is also printed to terminals)."""
    if v is None:
        return "-"
    if isinstance(v, float) and math.isnan(v):
        return "n/a"
    text = fmt_value(v, unit)
    spec = unit_spec(unit)
    if unit in _SELF_DESCRIBING or (spec is not None and spec.fmt == "fraction"):  # "1.00", not "1.00 fraction"
        return text
    return f"{text} {singular(unit) if text == '1' else unit}"


def singular(unit: str) -> str:
    """``calls`` -> ``call`` for a count of one ("1 call", not "1 calls"); other units as they are."""
    spec = unit_spec(unit)
    return unit[:-1] if spec is not None and spec.fmt == "count" and unit.endswith("s") else unit


def plural(n: int, word: str) -> str:
    """``1 regression``, ``10 regressions``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def fmt_cell(value: object, digits: int = 3) -> str:
    """A cell of a plain text table (no unit): thousands grouped, small values to ``digits``."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)
