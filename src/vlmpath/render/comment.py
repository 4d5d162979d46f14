"""How does a base-vs-head comparison read, in a terminal, a PR comment and JSON?

Turns a ``compare.ComparisonReport`` into text and nothing else: it never reads result
files or measures. The PR comment leads with the verdict in words, keeps what changed
in a compact table, folds everything else into per-machine ``<details>``, escapes every
name that came from a benchmark or a parameter, and stays under GitHub's comment limit
by dropping folded rows first.

A newly failing case shows why it failed (``Comparison.error``, from the benchmark's own
exception), on one line, escaped and clipped (``ERROR_CHARS``; shorter in the headline):
in the headline, in the verdict cell of the changes table and in the note column.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from vlmpath.core.yardstick import ENGINE_NOTICE, YARDSTICK_MARK, is_top_notice
from vlmpath.compare.accepted import AWAITING
from vlmpath.compare.comparison import Comparison, ComparisonReport, MachineComparison, Verdict, dumps_report
from vlmpath.render.escape import clip, html_escape, log_line, md_escape
from vlmpath.render.fmt import fmt_change, fmt_pair, fmt_ratio
from vlmpath.render.headline import (
    VERDICT_ORDER,
    VERDICT_TEXT,
    case_text,
    headline,
    note_text,
    plural,
    sort_key,
    warnings,
)
from vlmpath.render.spread_text import verdict_text
from vlmpath.render.vendor_table import vendor_table

MARKER = "<!-- vlmpath-bench -->"
GITHUB_COMMENT_LIMIT = 65536
# Room below GitHub's limit for the truncation note and anything a workflow appends.
DEFAULT_MAX_CHARS = 65000
#: Longest case label shown (benchmark and parameters): a 70k-character parameter value
#: must not fill the comment; the JSON keeps it whole.
NAME_CHARS = 160
#: Most warning lines under the verdict (each is clipped to ``headline.NOTE_CHARS``).
MAX_WARNINGS = 20


# --- terminal -------------------------------------------------------------------------------


def render_terminal(report: ComparisonReport, *, show_unchanged: bool = True) -> str:
    header = ("machine", "case", "unit", "base", "head", "change", "verdict", "note")
    rows = []
    for c in sorted(report.all(), key=sort_key):
        if not show_unchanged and c.verdict is Verdict.UNCHANGED:
            continue
        b, h = fmt_pair(c.base, c.head, c.unit)
        note = note_text(c)
        # Every cell from the artifact goes through log_line: this text is printed in the
        # privileged comment job's log (no newline, control character or "::" gets through).
        rows.append(tuple(log_line(x) for x in (c.machine, clip(case_text(c.case or c.benchmark, c.params), NAME_CHARS),
                                                c.unit, b, h, fmt_change(c), verdict_text(c, c.verdict.value)
                                                + (f" (accepted: {clip(c.accepted, 120)})" if c.accepted else "")
                                                + (f" ({AWAITING}: {clip(c.awaiting_review, 120)})"
                                                   if c.awaiting_review else ""),
                                                note)))
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]
    lines = [f"vlmpath compare {report.base_commit[:8]}..{report.head_commit[:8]}"
             f" (thresholds: {report.thresholds_source})"]
    lines.append(_strip_md(headline(report)))
    lines.extend(f"WARNING: {w.replace('**', '')}" for w in warnings(report))
    lines.append("")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)
    for r in report.cross_vendor:
        if r.flagged:
            lines.append(
                f"CROSS-VENDOR: {case_text(r.benchmark, r.params)} {r.other}/{r.reference} ratio "
                f"{fmt_ratio(r.base_ratio)} -> {fmt_ratio(r.head_ratio)} "
                f"({r.other_machine} vs {r.reference_machine})"
            )
    return "\n".join(log_line(line) for line in lines) + "\n"


def _strip_md(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
            continue
        if s[i] != "*":
            out.append(s[i])
        i += 1
    return html.unescape("".join(out))


# --- markdown -------------------------------------------------------------------------------


@dataclass
class _Block:
    head: list[str]
    rows: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    priority: int = -1  # rows of lower priority are dropped first; -1: never dropped
    omitted: int = 0
    what: str = "rows"  # what a row is, for the "N more ... omitted" line
    section: str = ""  # the section's name, for the line saying it was left out

    def lines(self) -> list[str]:
        return self.head + self.rows + self.tail


def _table(header: Sequence[str]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _cmp_cells(c: Comparison, with_machine: bool) -> list[str]:
    b, h = fmt_pair(c.base, c.head, c.unit)
    unit = md_escape(clip(c.unit, 40))
    cells = [md_escape(clip(c.machine, 64))] if with_machine else []
    # Numbers are formatted here, not taken from input: they need no escaping.
    verdict = verdict_text(c, VERDICT_TEXT[c.verdict])
    if with_machine and c.verdict is Verdict.NEWLY_FAILING and c.error:
        found = f"{md_escape(c.finding)}; " if c.finding else ""  # e.g. its accuracy before it raised
        verdict += f": {found}{md_escape(clip(c.error))}"
    if c.accepted is not None:  # benchmarks/accepted.yaml: reviewed, shown, not failing
        verdict = f"✅ accepted: {md_escape(clip(c.accepted, 120))} (was {verdict})"
    elif c.awaiting_review is not None:  # the PR's own entry: still failing, said why
        verdict += f" ⏳ {AWAITING}: {md_escape(clip(c.awaiting_review, 120))}"
    cells += [md_escape(clip(case_text(c.case or c.benchmark, c.params), NAME_CHARS)), unit, b, h, fmt_change(c), verdict]
    if not with_machine:
        cells.append(md_escape(clip(note_text(c), 200)))
    return cells


#: A path inside one of the PR job's temporary directories (``pr.flow``, ``pr.engine``,
#: ``pr.instructions``, ``pr.bisect``), up to its side's worktree: the runner's, not the reader's.
_RUNNER_PATH = re.compile(r"(?:/[^\s/'\"`]+)*/vlmpath-(?:ci|engine-pr|ir-wt|bisect|asv)-[A-Za-z0-9_]+"
                          r"(?:/(?:base|head|wt)[A-Za-z0-9_-]*)?(/|\b)")


def without_runner_paths(text: str) -> str:
    """``/tmp/vlmpath-ci-x1/head/benchmarks/t.yaml`` -> ``benchmarks/t.yaml``: what a reader can open."""
    return _RUNNER_PATH.sub(lambda m: "" if m.group(1) == "/" else "(a temporary worktree)", text)


def _machine_summary(m: MachineComparison) -> str:
    # Indicative moves are counted apart, as the headline counts them (never as regressions).
    counts = Counter(c.verdict for c in m.comparisons
                     if not (c.indicative and c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)))
    bits = [plural(n, v.value) if v in (Verdict.REGRESSION, Verdict.IMPROVEMENT) else f"{n} {v.value}"
            for v, n in sorted(counts.items(), key=lambda kv: VERDICT_ORDER[kv[0]])]
    moves = sum(1 for c in m.comparisons if c.indicative and c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT))
    bits += [f"{moves} indicative"] if moves else []
    status = "" if m.status == "both" else f" ({m.status})"
    return f"<b>{html_escape(m.machine)}</b>{status}: {html_escape(', '.join(bits) or 'no cases')}"


def render_markdown(report: ComparisonReport, *, chart_url: str | None = None,
                    max_chars: int = DEFAULT_MAX_CHARS, profiles: Sequence = ()) -> str:
    """The PR comment body (GitHub-flavoured markdown), at most ``max_chars`` long, every
    section included in the fit (``profiles``: ``CaseProfile`` records of regressed cases)."""
    # The yardstick moved (benchmarks, thresholds or instruments changed by the PR,
    # core.yardstick): said right under the verdict, kept whatever the fit drops, once
    # (each machine's artifact of ``ci merge`` brings the same note), not again as a warning.
    report = replace(report, notes=tuple(without_runner_paths(n) for n in report.notes),
                     machines=tuple(replace(m, notes=tuple(without_runner_paths(n) for n in m.notes))
                                    for m in report.machines))
    moved = [n for n in report.notes if is_top_notice(n)]
    report = replace(report, notes=tuple(n for n in report.notes if n not in moved))
    once = dict.fromkeys(n[min(n.find(m) for m in (YARDSTICK_MARK, ENGINE_NOTICE) if m in n):] for n in moved)
    notice = [f"> ⚠️ **{md_escape(clip(n, 600))}**  " for n in list(once)[:MAX_WARNINGS]]
    top = [MARKER, headline(report)]
    n_cases = len(report.all())
    top.append(
        f"<sub>base {md_escape(report.base_commit[:8])} → head {md_escape(report.head_commit[:8])}"
        f" · {plural(n_cases, 'case')} on {plural(len(report.machines), 'machine')}"
        f" · thresholds: {md_escape(report.thresholds_source)}</sub>"
    )
    if notice:
        top.extend(["", *notice])
    shown = warnings(report, md_escape)
    if shown:  # at most MAX_WARNINGS: notes must not crowd the tables out of the comment
        top.append("")
        top.extend(f"> ⚠️ {w}  " for w in shown[:MAX_WARNINGS])
        if len(shown) > MAX_WARNINGS:
            top.append(f"> _{len(shown) - MAX_WARNINGS} more warnings in comparison.json_")
    blocks = [_Block(top)]

    changed = sorted((c for c in report.all() if c.verdict is not Verdict.UNCHANGED), key=sort_key)
    if changed:
        blocks.append(_Block(
            ["", "### What changed", ""] + _table(["machine", "case", "metric", "base", "head", "change", "verdict"]),
            rows=[_row(_cmp_cells(c, with_machine=True)) for c in changed], priority=2,
            section="the changes table",
        ))
    if report.cross_vendor:  # one ratio column per other backend, one change column per backend
        heading, (header, *cells) = vendor_table(report.cross_vendor)
        blocks.append(_Block(["", *heading] + _table(header), rows=[_row(c) for c in cells], priority=1,
                             section="the cross-vendor table"))
    if chart_url:
        blocks.append(_Block(["", f"📈 [Charts]({_safe_url(chart_url)})"]))
    for m in report.machines:
        rows = sorted(m.comparisons, key=sort_key)
        blocks.append(_Block(
            ["", "<details>", f"<summary>{_machine_summary(m)}</summary>", ""]
            + _table(["case", "metric", "base", "head", "change", "verdict", "note"]),
            rows=[_row(_cmp_cells(c, with_machine=False)) for c in rows],
            tail=["", "</details>"], priority=0, section=f"the details of {clip(m.machine, 64)}",
        ))
    if profiles:
        from vlmpath.render.profile_section import HEADING, profile_chunks

        blocks.append(_Block(["", HEADING, ""], rows=profile_chunks(profiles), priority=1,
                             what="profiled cases", section="the profiles"))
    return _fit(blocks, max_chars, keep=_KEEP_TOP + (1 + len(notice) if notice else 0))


def _safe_url(url: str) -> str:
    # Only the characters that could end the link or open HTML are encoded.
    return url.replace(" ", "%20").replace(")", "%29").replace("(", "%28").replace("<", "%3C").replace(">", "%3E")


def _size(lines: Iterable[str]) -> int:
    return sum(len(s) + 1 for s in lines)


#: Lines of the top block always kept: the marker, the verdict line, the commits line (and
#: the yardstick notice above the verdict, when there is one).
_KEEP_TOP = 3


def _fit(blocks: list[_Block], max_chars: int, keep: int = _KEEP_TOP) -> str:
    """Fit the blocks into ``max_chars``: drop rows (lowest priority first), then whole
    sections, then warnings, each with a line saying what was left out; the marker and the
    verdict line are always kept."""
    reserve = 200 + 80 * sum(1 for b in blocks if b.priority >= 0)  # the "left out" lines
    over = sum(_size(b.lines()) for b in blocks) - max_chars
    if over > 0:
        over += reserve
        for b in sorted((b for b in blocks if b.priority >= 0), key=lambda b: b.priority):
            while b.rows and over > 0:
                over -= len(b.rows.pop()) + 1
                b.omitted += 1
    for b in blocks:
        if b.omitted and b.priority >= 0:
            more = f"_{b.omitted} more {b.what} omitted_"
            b.tail.insert(0, f"| {more} |" if b.what == "rows" else more)
    kinds = dict.fromkeys(b.what for b in blocks if b.omitted)
    notes = [f"{sum(b.omitted for b in blocks if b.what == k)} {k} omitted" for k in kinds]
    # Still over (the fixed text alone is too long): drop whole sections, then warnings.
    dropped = []
    for b in sorted((b for b in blocks[1:] if b.priority >= 0), key=lambda b: b.priority):
        if _size(line for x in blocks for line in x.lines()) + reserve <= max_chars:
            break
        blocks.remove(b)
        dropped.append(b.section or "a section")
    if dropped:
        notes.append(f"{len(dropped)} section(s) left out ({', '.join(dropped[:5])}{', ...' if len(dropped) > 5 else ''})")
    top = blocks[0].head
    cut = 0
    while len(top) > keep and _size(line for x in blocks for line in x.lines()) + reserve > max_chars:
        top.pop()
        cut += 1
    if cut:
        notes.append(f"{cut} warning line(s) left out")
    if notes:
        top[keep:keep] = ["", f"_truncated: {'; '.join(notes)}; full comparison in the artifact_"]
    text = "\n".join(line for b in blocks for line in b.lines()) + "\n"
    if len(text) > max_chars:  # cannot happen with the clipped verdict line; kept as the last guard
        text = "\n".join(top[:keep]) + "\n\n_truncated: comment cut at the size limit_\n"
    return text[:max_chars]


def render_failures(title: str, errors: Sequence[str], *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The comment when nothing was compared (every machine failed): ``title`` and one
    escaped, clipped line per error, fitted like any comment (errors left out last)."""
    top = [MARKER, f"**{md_escape(clip(title, 200))}**"]
    rows = [f"> ⚠️ {md_escape(clip(e, 300))}  " for e in errors]
    return _fit([_Block(top), _Block([""], rows=rows, priority=0, what="errors", section="the errors")], max_chars)


# --- JSON -----------------------------------------------------------------------------------


def render_json(report: ComparisonReport) -> str:
    return dumps_report(report)  # the one writer of a comparison (compare.comparison)
