"""Which operators got slower between base and head, by self time?

A pure function over two operator tables (the ``ops`` JSON that
``vlmpath.suite.profile`` writes per side): ``diff_ops`` pairs operators by name and
ranks them by the growth of their self time (CPU + device) per profiled pass, largest
growth first; an operator only one side ran counts with 0 calls on the other. The PR
comment lists the top rows per regressed case (``vlmpath.render.profile_section``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.core.visible import visible


@dataclass(frozen=True)
class OpTotals:
    """One operator on one side, per profiled pass (microseconds)."""

    name: str
    calls: float
    self_us: float


@dataclass(frozen=True)
class OpDelta:
    name: str
    base_calls: float
    head_calls: float
    base_us: float
    head_us: float

    @property
    def delta_us(self) -> float:
        return self.head_us - self.base_us


@dataclass(frozen=True)
class CaseProfile:
    """One regressed case's profile on both sides: the top deltas and where the traces are."""

    machine: str
    case: str                  # e.g. "embed:default/many_small_images"
    benchmarks: tuple[str, ...]  # the regressed rows that asked for it
    deltas: tuple[OpDelta, ...]
    base_trace: str | None     # paths relative to the artifact's root
    head_trace: str | None
    note: str | None = None    # why a side has no profile


def read_ops(path: str | os.PathLike[str]) -> dict[str, OpTotals]:
    """An ``ops`` JSON as per-pass totals by operator name."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        passes = max(1, int(data.get("passes", 1)))
        rows = data["ops"]
        return {str(r["name"]): OpTotals(str(r["name"]), float(r["calls"]) / passes,
                                         (float(r["self_cpu_us"]) + float(r["self_device_us"])) / passes)
                for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VlmpathError(f"operator table {p} is unreadable ({type(exc).__name__}: {exc}); re-run the profile") from None


def diff_ops(base: Mapping[str, OpTotals], head: Mapping[str, OpTotals], top: int = 8,
             skip: Sequence[str] = ("ProfilerStep*",)) -> tuple[OpDelta, ...]:
    """The ``top`` operators whose self time grew most from base to head (pure)."""
    rows = []
    for name in set(base) | set(head):
        if name in skip:
            continue
        b, h = base.get(name), head.get(name)
        rows.append(OpDelta(name, b.calls if b else 0.0, h.calls if h else 0.0,
                            b.self_us if b else 0.0, h.self_us if h else 0.0))
    rows.sort(key=lambda d: (-d.delta_us, d.name))
    return tuple(rows[:top])


# --- the artifact's profiles.json (read back by `vlmpath ci merge`: untrusted) ------------
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")
_MAX_PROFILES, _MAX_ROWS, _MAX_NAME = 10, 20, 160


def profiles_to_json(profiles: Sequence[CaseProfile]) -> str:
    return json.dumps([asdict(p) for p in profiles], indent=1, sort_keys=True) + "\n"


def _clean(text: object, limit: int = _MAX_NAME) -> str:
    # One line of printable characters (no control, bidi or zero-width character), no
    # Markdown table/code delimiter: the text came from another job's artifact. The
    # renderer escapes again for its own sink.
    return re.sub(r"[`|<>]", " ", " ".join(visible(str(text)[: limit * 4]).split()))[:limit]


def _path(value: object, prefix: str) -> str | None:
    if not isinstance(value, str) or not _SAFE_PATH.match(value) or ".." in value.split("/"):
        return None
    return f"{prefix}{value}"


def profiles_from_json(text: str, prefix: str = "") -> list[CaseProfile]:
    """``profiles.json`` as written by ``profiles_to_json``, validated and bounded (it is
    untrusted in the merge job); trace paths get ``prefix`` (the artifact's name)."""
    from vlmpath.core import safe_json

    data = safe_json.loads(text, "profiles.json is malformed", "profiles not shown", strict=True)
    try:
        if not isinstance(data, list):
            raise TypeError("not a list")
        out = []
        for p in data[:_MAX_PROFILES]:
            deltas = tuple(OpDelta(_clean(d["name"]), float(d["base_calls"]), float(d["head_calls"]),
                                   float(d["base_us"]), float(d["head_us"])) for d in p["deltas"][:_MAX_ROWS])
            out.append(CaseProfile(_clean(p["machine"], 64), _clean(p["case"]),
                                   tuple(_clean(b) for b in p["benchmarks"][:_MAX_ROWS]), deltas,
                                   _path(p.get("base_trace"), prefix), _path(p.get("head_trace"), prefix),
                                   None if p.get("note") is None else _clean(p["note"], 500)))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise VlmpathError(f"profiles.json is malformed ({type(exc).__name__}: {exc}); profiles not shown") from None
