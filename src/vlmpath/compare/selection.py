"""Which cases did a run's ``--bench`` selection ask for, read without compiling a regex?

``vlmpath ci merge`` runs in the privileged comment job and reads each machine's selection
from an artifact's ``run.json``: a pattern there could backtrack for minutes in ``re``. So
the selection is read as what people write: alternatives (``a|b``) of literal names with
``.*`` gaps and ``^``/``$`` anchors, matched with ``str.find`` (linear: leftmost-first
search is exact for gaps); a backslash before a punctuation character makes it that
literal character (``name\\('a'\\)``, as people write an asv parameter spelling), and a group
of such alternatives (``track_(accuracy|syncs)``, ``^(?:a|b)$``) stands for each of them (at
most ``MAX_VARIANTS`` spellings in all). A pattern using anything else (classes, quantifiers
on a group, other quantifiers, lookarounds, other escapes) is not applied, and a note says so; a selection that matches no
case leaves the machine with nothing judged, which the verdict reports as incomplete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

#: Longest selection read from an artifact, and most spellings its groups expand to.
MAX_SELECTION = 500
MAX_VARIANTS = 256
_REGEX_ONLY = set("[]{}()+?\\")  # '*' only as '.*'; '.' is a literal dot (names are dotted)


#: An escaped punctuation character stands in as one private-use character while the
#: pattern is taken apart, so it can never read as ``|``, ``.*``, ``^`` or ``$``.
_HIDDEN = 0xE000


def _hide_escapes(pattern: str) -> str | None:
    """``pattern`` with each ``\\<punctuation>`` as its stand-in; None: another escape."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1] if i + 1 < len(pattern) else ""
            if not nxt or nxt.isalnum() or nxt.isspace() or ord(nxt) >= 128:
                return None
            out.append(chr(_HIDDEN + ord(nxt)))
            i += 2
            continue
        if _HIDDEN <= ord(ch) < _HIDDEN + 128:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _shown(piece: str) -> str:
    return "".join(chr(ord(c) - _HIDDEN) if _HIDDEN <= ord(c) < _HIDDEN + 128 else c for c in piece)


def _expand(hidden: str) -> list[str] | None:
    """Each group of alternatives (innermost first) written out: ``a(b|c)d`` is ``abd`` and
    ``acd``; None past ``MAX_VARIANTS`` spellings, or for a group that is not a plain one."""
    variants, done = [hidden], []
    while variants:
        v = variants.pop()
        close = v.find(")")
        if close < 0:
            if "(" in v:
                return None
            done.append(v)
            continue
        start = v.rfind("(", 0, close)
        if start < 0:
            return None
        body = v[start + 1:close]
        if body.startswith("?:"):
            body = body[2:]
        variants.extend(v[:start] + alt + v[close + 1:] for alt in body.split("|"))
        if len(variants) + len(done) > MAX_VARIANTS:
            return None
    return done


def parse(pattern: str) -> list[tuple[bool, list[str], bool]] | None:
    """``pattern`` as (anchored at start, literal pieces between ``.*`` gaps, anchored at
    end) per alternative; None when it is not that simple (or too long)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_SELECTION:
        return None
    hidden = _hide_escapes(pattern)
    variants = None if hidden is None else _expand(hidden)
    if variants is None or any(_REGEX_ONLY & set(v) for v in variants):
        return None
    out = []
    for alt in dict.fromkeys(a for v in variants for a in v.split("|")):
        start, end = alt.startswith("^"), alt.endswith("$")
        body = alt[1 if start else 0: len(alt) - 1 if end else len(alt)]
        pieces = body.split(".*")
        if any("*" in p or "^" in p or "$" in p for p in pieces):
            return None
        out.append((start, [_shown(p) for p in pieces], end))
    return out


def alt_matches(start: bool, pieces: list[str], end: bool, text: str) -> bool:
    if len(pieces) == 1:
        p = pieces[0]
        return (text == p if end else text.startswith(p)) if start else (text.endswith(p) if end else p in text)
    first, *middle, last = pieces
    if start:
        if not text.startswith(first):
            return False
        pos = len(first)
    else:
        found = text.find(first)
        if found < 0:
            return False
        pos = found + len(first)
    for piece in middle:  # leftmost first leaves the most room for what follows: exact
        found = text.find(piece, pos)
        if found < 0:
            return False
        pos = found + len(piece)
    if end:
        return text.endswith(last) and len(text) - len(last) >= pos
    return text.find(last, pos) >= 0


def spellings(name: str, params: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """asv's ``name(p1, p2)`` spellings of a case whose parameters we hold as shown: with
    the values as repr (asv's) and as shown; the name alone when it has none."""
    if not params:
        return (name,)
    return (f"{name}({', '.join(repr(v) for _, v in params)})", f"{name}({', '.join(v for _, v in params)})")


def asv_selects(pattern: str, benchmark: str, params: Sequence[tuple[str, str]]) -> bool:
    """Did ``asv run -b pattern`` select this case? asv's own rule (a regex searched in its
    ``name(p1, p2)`` spelling), for a pattern this process's own user gave (what a run will
    measure, ``pr.base_reuse``, ``pr.bisect``); never for a pattern read from an artifact,
    which ``keep_selected`` reads as literal names."""
    import re

    return any(re.search(pattern, n) for n in spellings(benchmark, params))


def matches(parsed: list[tuple[bool, list[str], bool]], benchmark: str,
            params: Sequence[tuple[str, str]]) -> bool:
    """Does the selection pick this case? Tried on the name alone and on asv's
    ``name(p1, p2)`` spellings (``spellings``), as ``asv run -b`` does."""
    names = {benchmark, *spellings(benchmark, params)}
    return any(alt_matches(s, p, e, n) for s, p, e in parsed for n in names)


def keep_selected(report, selections: Mapping[str, object], counted=frozenset()):
    """``report`` with each machine's rows cut to its selection, and notes: a selection that
    is not a plain one is not applied (said), one that matches nothing is said. ``counted``:
    the (machine, benchmark, params) of instruction counts, selected by their own pattern
    when counted (``pr.sources.counts``): kept."""
    machines, notes = [], []
    for m in report.machines:
        pattern = selections.get(m.machine)
        if not pattern:
            machines.append(m)
            continue
        parsed = parse(pattern)  # type: ignore[arg-type]
        shown = str(pattern)[:80]
        if parsed is None:
            notes.append(f"{m.machine}: selection {shown!r} is not a plain list of names (a|b, .* gaps, "
                         "^ $); not applied: patterns from an artifact are never compiled")
            machines.append(m)
            continue
        kept = tuple(c for c in m.comparisons
                     if (m.machine, c.benchmark, c.params) in counted or matches(parsed, c.benchmark, c.params))
        if not kept:
            notes.append(f"{m.machine}: selection {shown!r} matched no case: nothing judged on this machine")
        machines.append(replace(m, comparisons=kept))
    return replace(report, machines=tuple(machines), notes=tuple(dict.fromkeys(report.notes + tuple(notes))))
