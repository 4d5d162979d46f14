"""When an instruction count moved between base and head, which functions grew?

Pure functions over what the counter keeps per counted pass (``selfcheck/ir_worker.py`` with
``profiles``): the callgrind dump (``<case>.callgrind``) and the Python calls and aten
operators of one uncounted pass of the same case (``<case>.calls.json``); or, with the native
counter (the default), the pass's own breakdown (``<case>.ops.json``: bytecodes per Python
function, elements per aten operator; ``grew_ops``).

- ``self_costs`` reads a callgrind dump's per-function *self* instructions (the cost lines
  under each ``fn=``, without the inclusive cost that follows each ``calls=`` line; names
  compressed as ``(id) name`` are expanded), so the functions of one dump sum to its total.
- ``grew`` ranks what grew from base to head: each function's change in instructions and
  its share of the case's net change; Python functions and aten operators by their change
  in calls (deterministic counts: an added ``torch.sort`` is ``aten::sort`` +N, an added
  helper is ``module.py:helper`` +N, whatever their instructions sum to).

The files may come from a pull request's run (hostile input): every file is size-capped,
JSON is read with ``core.safe_json`` (bounded depth; no NaN, Infinity or overflow: one line
saying so), malformed lines are skipped, names are cut to ``NAME_MAX`` characters (the
renderer escapes them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError

MAX_PROFILE_BYTES = 64 << 20
MAX_CALLS_BYTES = 8 << 20
NAME_MAX = 160
TOP = 8


def self_costs(text: str) -> tuple[dict[str, int], int | None]:
    """(function -> self instructions, the dump's total) of one callgrind output file."""
    names: dict[str, str] = {}
    costs: Counter = Counter()
    total, fn, npos, skip = None, None, 1, False

    def name(spec: str) -> str:
        spec = spec.strip()
        if spec.startswith("(") and ")" in spec:
            ref, rest = spec[1:].split(")", 1)
            if rest.strip():
                names[ref] = rest.strip()[:NAME_MAX]
            return names.get(ref, f"({ref})")
        return spec[:NAME_MAX]

    for line in text.splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip:  # the inclusive cost of the call on the line before: not this function's own
                skip = False
                continue
            parts = line.split()
            if fn is not None and len(parts) > npos and parts[npos].isdigit():
                costs[fn] += int(parts[npos])
        elif line.startswith("fn="):
            fn = name(line[3:])
        elif line.startswith("cfn="):
            name(line[4:])  # defines a compressed name used later by fn=
        elif line.startswith("calls="):
            skip = True
        elif line.startswith("positions:"):
            npos = max(1, len(line.split()) - 1)
        elif line.startswith(("totals:", "summary:")):
            parts = line.split()
            total = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else total
    return dict(costs), total


@dataclass(frozen=True)
class Grown:
    """One function (or operator) that grew: its value on each side and the change."""

    name: str
    base: int
    head: int
    share: float | None = None  # of the case's net change in instructions (functions only)

    @property
    def delta(self) -> int:
        return self.head - self.base


@dataclass(frozen=True)
class CaseGrowth:
    """What grew in one case whose count moved; ``notes`` say what could not be read."""

    case: str
    base_total: int | None
    head_total: int | None
    functions: tuple[Grown, ...] = ()
    python: tuple[Grown, ...] = ()
    aten: tuple[Grown, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: What the totals count: ``instructions`` (callgrind; python/aten rows are calls), or the
    #: native counter's ``bytecodes``/``elements`` (python rows are bytecodes, aten rows elements).
    unit: str = "instructions"

    def to_dict(self) -> dict:
        return asdict(self)


def _top(base: Mapping[str, int], head: Mapping[str, int], top: int, net: int | None = None) -> tuple[Grown, ...]:
    rows = [Grown(k, base.get(k, 0), head.get(k, 0)) for k in set(base) | set(head)]
    rows = sorted((r for r in rows if r.delta > 0), key=lambda r: (-r.delta, r.name))[:top]
    if net:
        rows = [Grown(r.name, r.base, r.head, r.delta / net) for r in rows]
    return tuple(rows)


def _read(path: Path, cap: int) -> str:
    if path.is_symlink() or not path.is_file() or path.stat().st_size > cap:
        raise ValueError(f"{path.name}: not a regular file of at most {cap} bytes")
    return path.read_text(encoding="utf-8", errors="replace")


def _calls(path: Path) -> dict[str, dict[str, int]]:
    try:
        data = safe_json.loads(_read(path, MAX_CALLS_BYTES), path.name, strict=True)
    except VlmpathError as exc:
        raise ValueError(str(exc)) from None
    out = {}
    for kind in ("python", "aten"):
        got = data.get(kind) if isinstance(data, dict) else None
        out[kind] = {str(k)[:NAME_MAX]: v for k, v in (got or {}).items()
                     if isinstance(v, int) and not isinstance(v, bool)} if isinstance(got, dict) else {}
    return out


def grew_ops(case: str, base_dir: Path, head_dir: Path, base_file: str, head_file: str, unit: str,
             top: int = TOP) -> CaseGrowth:
    """What grew between two native counts (``measure/op_count.py``'s ``*.ops.json``): the
    Python functions by bytecodes and the aten operators by elements, each with its share of
    its own tally's net change; the totals are the moved count's tally (``unit``)."""
    notes: list[str] = []
    sides = []
    for d, f in ((base_dir, base_file), (head_dir, head_file)):
        try:
            sides.append(_calls(d / f))
        except (OSError, ValueError) as exc:
            notes.append(f"{d.name}: ops profile unreadable ({exc})")
            sides.append({"python": {}, "aten": {}})
    b, h = sides
    tally = "python" if unit == "bytecodes" else "aten"
    bt, ht = sum(b[tally].values()), sum(h[tally].values())
    return CaseGrowth(case, bt if b[tally] else None, ht if h[tally] else None, (),
                      _top(b["python"], h["python"], top, (sum(h["python"].values()) - sum(b["python"].values())) or None),
                      _top(b["aten"], h["aten"], top, (sum(h["aten"].values()) - sum(b["aten"].values())) or None),
                      tuple(notes), unit)


def grew_tops(case: str, base: Mapping, head: Mapping, unit: str, top: int = TOP) -> CaseGrowth:
    """What grew between two records' kept tallies (an engine case's ``counts_top``: the
    largest functions by bytecodes and operators by elements of each side; the record may
    come from an artifact, so every value is checked)."""
    def clean(side: Mapping, kind: str) -> dict[str, int]:
        got = side.get(kind) if isinstance(side, Mapping) else None
        return {str(k)[:NAME_MAX]: v for k, v in (got or {}).items()
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0} if isinstance(got, Mapping) else {}

    b = {k: clean(base, k) for k in ("python", "aten")}
    h = {k: clean(head, k) for k in ("python", "aten")}
    notes = () if (b["python"] or b["aten"]) and (h["python"] or h["aten"]) else (
        "a side kept no per-function counts (an older vlmpath measured it)",)
    net = {k: (sum(h[k].values()) - sum(b[k].values())) or None for k in b}
    return CaseGrowth(case, None, None, (), _top(b["python"], h["python"], top, net["python"]),
                      _top(b["aten"], h["aten"], top, net["aten"]), notes, unit)


def grew(case: str, base_dir: Path, head_dir: Path, base_file: str, head_file: str, top: int = TOP,
         unit: str = "instructions") -> CaseGrowth:
    """What grew in ``case`` between the base's and the head's kept profiles."""
    notes: list[str] = []
    for f in (base_file, head_file):  # names come from the records file: never a path elsewhere
        if "/" in f or "\\" in f or f.startswith(".") or not f.endswith((".callgrind", ".ops.json")):
            return CaseGrowth(case, None, None, notes=(f"profile name {f[:80]!r} refused (not a plain *.callgrind "
                                                       "or *.ops.json name)",), unit=unit)
    if base_file.endswith(".ops.json") or head_file.endswith(".ops.json"):
        return grew_ops(case, base_dir, head_dir, base_file, head_file, unit, top)
    sides = []
    for d, f in ((base_dir, base_file), (head_dir, head_file)):
        try:
            sides.append(self_costs(_read(d / f, MAX_PROFILE_BYTES)))
        except (OSError, ValueError) as exc:
            notes.append(f"{d.name}: callgrind profile unreadable ({exc})")
            sides.append(({}, None))
    (bc, bt), (hc, ht) = sides
    net = (ht - bt) if bt is not None and ht is not None else sum(hc.values()) - sum(bc.values())
    calls = []
    for d, f in ((base_dir, base_file), (head_dir, head_file)):
        path = d / f.replace(".callgrind", ".calls.json")
        try:
            calls.append(_calls(path) if path.exists() else {"python": {}, "aten": {}})
        except (OSError, ValueError) as exc:
            notes.append(f"{d.name}: call counts unreadable ({exc})")
            calls.append({"python": {}, "aten": {}})
    return CaseGrowth(case, bt, ht, _top(bc, hc, top, net or None),
                      _top(calls[0]["python"], calls[1]["python"], top), _top(calls[0]["aten"], calls[1]["aten"], top),
                      tuple(notes))


_MAX_CASES, _MAX_ROWS = 20, 20
_UNITS = ("instructions", "bytecodes", "elements")


def _unit(v) -> str:
    return v if v in _UNITS else "instructions"  # anything else from an artifact: the old default


def growths_from_json(text: str) -> list[CaseGrowth]:
    """``ir-grew.json`` as ``pr.instructions.what_grew`` writes it, validated and bounded:
    the merge job reads it from an artifact a pull request's run wrote (hostile input)."""
    def num(v) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def rows(raw) -> tuple[Grown, ...]:
        out = []
        for r in (raw or [])[:_MAX_ROWS]:
            share = r.get("share")
            out.append(Grown(str(r["name"])[:NAME_MAX], int(r["base"]), int(r["head"]),
                             float(share) if isinstance(share, (int, float)) and not isinstance(share, bool) else None))
        return tuple(out)

    try:
        data = safe_json.loads(text, "malformed what-grew file", strict=True)
    except VlmpathError as exc:
        raise ValueError(str(exc)) from None
    try:
        if not isinstance(data, list):
            raise TypeError("not a list")
        return [CaseGrowth(str(g["case"])[:NAME_MAX], num(g.get("base_total")), num(g.get("head_total")),
                           rows(g.get("functions")), rows(g.get("python")), rows(g.get("aten")),
                           tuple(str(n)[:300] for n in (g.get("notes") or [])[:5]),
                           _unit(g.get("unit"))) for g in data[:_MAX_CASES]]
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise ValueError(f"malformed what-grew file ({type(exc).__name__}: {str(exc)[:200]})") from None
