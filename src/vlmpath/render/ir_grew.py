"""How does the PR comment say what grew in a case whose instruction count moved?

``render_grew`` turns ``compare.ir_grew.CaseGrowth`` records into a Markdown section: per
moved case, the C/C++ functions (callgrind's self instructions) whose counts grew most with
their share of the case's net change, then the Python functions and aten operators whose
call counts grew; with the native counter (the default), the Python functions by bytecodes
and the aten operators by elements written, each with its share. Both sides' raw profiles are in the artifact (``ir-profiles/``; open
them with ``callgrind_annotate`` or KCachegrind).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vlmpath.compare.ir_grew import CaseGrowth, Grown
from vlmpath.render.escape import md_code, md_escape

HEADING = "### What grew (exact counts, base vs head)"


def _code(name: str) -> str:
    # A code span keeps C++ names readable (escape.md_code: visible characters, no backtick).
    return f"`{md_code(name)}`"


def _m(n: int) -> str:
    return f"{n / 1e6:.3f}M"


def _functions(rows: Sequence[Grown]) -> list[str]:
    out = ["| function (callgrind, self) | base Ir | head Ir | Δ Ir | share of the change |", "|---|---|---|---|---|"]
    out += [f"| {_code(r.name)} | {_m(r.base)} | {_m(r.head)} | {r.delta / 1e6:+.3f}M | "
            f"{'-' if r.share is None else f'{r.share:.0%}'} |" for r in rows]
    return out


def _calls(title: str, rows: Sequence[Grown], what: str = "calls") -> list[str]:
    share = any(r.share is not None for r in rows)  # the native counter's rows carry their share
    out = [f"| {title} | {what} base | {what} head | Δ {what} |" + (" share of the change |" if share else ""),
           "|---|---|---|---|" + ("---|" if share else "")]
    out += [f"| {_code(r.name)} | {r.base} | {r.head} | {r.delta:+d} |"
            + (f" {'-' if r.share is None else f'{r.share:.0%}'} |" if share else "") for r in rows]
    return out


def _change(g: CaseGrowth) -> str:
    if not g.base_total or g.head_total is None:
        return ""
    pct = f"({g.head_total / g.base_total - 1:+.2%})"
    if g.unit == "instructions":
        return f": {_m(g.base_total)} → {_m(g.head_total)} Ir {pct}"
    return f": {g.base_total} → {g.head_total} {g.unit} {pct}"


def render_grew(growths: Sequence[CaseGrowth]) -> str:
    """Markdown for every moved case ("" when there is none)."""
    if not growths:
        return ""
    out = [HEADING, ""]
    # Moved metrics of one change share their tables (the same functions and operators
    # grew): each says its own totals, the tables come once, not once per metric.
    groups: dict[str, list[CaseGrowth]] = {}
    for g in growths:
        key = repr((g.functions, g.python, g.aten, g.unit == "instructions")) if (g.functions or g.python or g.aten) \
            else f"alone {id(g)}"
        groups.setdefault(key, []).append(g)
    for same in groups.values():
        g = same[0]
        for x in same:
            out.append(f"**{md_escape(x.case)}**{_change(x)}  ")
            out += [f"> {md_escape(n)}" for n in x.notes]
        if out[-1].endswith("  "):
            out[-1] = out[-1].rstrip()
        native = g.unit != "instructions"
        for rows, lines in ((g.functions, _functions),
                            (g.python, lambda r: _calls("Python function", r, "bytecodes" if native else "calls")),
                            (g.aten, lambda r: _calls("aten operator", r, "elements" if native else "calls"))):
            if rows:
                out += ["", *lines(rows)]
        if not (g.functions or g.python or g.aten):
            out.append("nothing grew by function (the change is a shrink, or the profiles are missing)")
        out.append("")
    out.append("Raw profiles of both sides: the artifact's `ir-profiles/` (`*.ops.json`: bytecodes per Python "
               "function and elements per aten operator; `*.callgrind`: `callgrind_annotate FILE`); for an "
               "engine's counts, `counts_top` in `records/{base,head}.jsonl`.")
    return "\n".join(out)


def append_to_comment(comment: Path, growths: Sequence[CaseGrowth]) -> None:
    """Add the section to an existing comment.md (atomically); nothing when there is none.
    The whole body stays within GitHub's limit: a section that does not fit is cut at a
    line, with a line saying where the rest is."""
    from vlmpath.core.atomic import write_text
    from vlmpath.render.comment import GITHUB_COMMENT_LIMIT

    section = render_grew(growths)
    if not section:
        return
    body = comment.read_text(encoding="utf-8").rstrip("\n") + "\n\n"
    cut = "\n\n_What grew is cut here to fit the comment: the artifact's `ir-grew.json` has all of it._"
    room = GITHUB_COMMENT_LIMIT - len(body) - len(cut) - 1
    if len(section) > room:
        section = section[: max(0, section.rfind("\n", 0, max(room, 0)))] + cut if room > len(HEADING) else ""
    if section:
        write_text(comment, body + section + "\n")
