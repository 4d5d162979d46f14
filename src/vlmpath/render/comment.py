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
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vlmpath.compare.verdict import (
    Comparison,
    ComparisonReport,
    MachineComparison,
    Verdict,
)

MARKER = "<!-- vlmpath-bench -->"
GITHUB_COMMENT_LIMIT = 65536
# Room below GitHub's limit for the truncation note and anything a workflow appends.
DEFAULT_MAX_CHARS = 65000
#: Longest failure message in a table cell / in the headline (the JSON keeps it whole).
ERROR_CHARS = 120
HEADLINE_ERROR_CHARS = 80

VERDICT_TEXT = {
    Verdict.REGRESSION: "🔴 regression",
    Verdict.NEWLY_FAILING: "💥 newly failing",
    Verdict.IMPROVEMENT: "🟢 improvement",
    Verdict.FIXED: "🩹 fixed",
    Verdict.NEW: "🆕 new",
    Verdict.REMOVED: "➖ removed",
    Verdict.NOT_COMPARABLE: "⚠️ not comparable",
    Verdict.UNCHANGED: "⚪ unchanged",
}
# Display order: what needs attention first.
VERDICT_ORDER = {v: i for i, v in enumerate(VERDICT_TEXT)}
_MD_SPECIAL = set("\\`*_{}[]()#+-.!|~:")


_HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;"}


def md_escape(text: object) -> str:
    """Make an untrusted string inert in GitHub markdown (tables included).

    HTML-significant characters become entities, markdown punctuation gets a backslash,
    newlines become spaces (they would end a table row) and ``@`` cannot mention anyone.
    """
    out = []
    for ch in str(text):
        if ch in "<>&":
            out.append(_HTML_ENTITIES[ch])
        elif ch == "@":
            out.append("&#64;")
        elif ch in "\r\n\t":
            out.append(" ")
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def html_escape(text: object) -> str:
    """For text inside raw HTML (``<summary>``), where backslash escapes show literally.

    Markdown punctuation becomes numeric entities too, in case a renderer does parse
    inline markdown there.
    """
    out = []
    for ch in str(text):
        if ch in _HTML_ENTITIES:
            out.append(_HTML_ENTITIES[ch])
        elif ch in _MD_SPECIAL or ch == "@":
            out.append(f"&#{ord(ch)};")
        elif ch in "\r\n\t":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


# --- formatting numbers ---------------------------------------------------------------------


def _scaled(v: float, unit: str, digits: int) -> str:
    if unit == "seconds":
        for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(v) >= scale or scale == 1e-9:
                return f"{v / scale:.{digits}g} {suffix}"
    if unit == "bytes":
        for scale, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")):
            if abs(v) >= scale or scale == 1:
                return f"{v / scale:.{digits}g} {suffix}"
    if unit == "fraction":
        return f"{v:.{max(digits - 1, 2)}f}"
    if unit in ("syncs", "calls") and float(v).is_integer():
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
    if c.method == "exact":
        delta = c.head - c.base
        if delta == 0:
            return "±0"
        return f"{delta:+.4g}"
    if c.base == 0:
        return "±0%" if c.head == 0 else "n/a (base 0)"
    return f"{(c.head / c.base - 1) * 100:+.1f}%"


def params_text(params: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params)


def case_text(benchmark: str, params: Sequence[tuple[str, str]]) -> str:
    return f"{benchmark} ({params_text(params)})" if params else benchmark


def short_label(c: Comparison) -> str:
    """``Embed.tok_per_s multi_region``: last two name parts, kind prefix dropped, values."""
    parts = c.benchmark.split(".")
    leaf = parts[-1]
    for prefix in ("track_", "time_", "peakmem_", "mem_"):
        if leaf.startswith(prefix):
            leaf = leaf[len(prefix):]
            break
    name = ".".join(parts[-2:-1] + [leaf])
    values = " ".join(v for _, v in c.params)
    return f"{name} {values}".strip()


def clip(text: object, limit: int = ERROR_CHARS) -> str:
    """One line (whitespace runs collapsed), at most ``limit`` characters, "…" when cut.
    Clip before escaping, so that no escape sequence is cut in half."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


def note_text(c: Comparison) -> str:
    """The note of a row: why it failed when known (clipped), else the reason or method."""
    if c.error:
        return ("base: " if c.verdict is Verdict.FIXED else "") + clip(c.error)
    return c.reason or c.method


def _headline_item(c: Comparison) -> str:
    label = md_escape(short_label(c))
    if c.verdict is Verdict.NEWLY_FAILING:
        return f"{label} newly failing"
    if c.method == "exact":
        b, h = fmt_pair(c.base, c.head, c.unit)
        return f"{label} {md_escape(c.unit)} {b} -> {h}"
    return f"{label} {md_escape(c.unit)} {fmt_change(c)}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _machines_text(names: Iterable[str]) -> str:
    return ", ".join(md_escape(n) for n in names) or "no machines"


def _headline_items(shown: Sequence[Comparison]) -> str:
    """Items joined by "; "; failing cases with one message share it ("a, b failing: msg")."""
    out: list[str] = []
    i = 0
    while i < len(shown):
        c = shown[i]
        if c.verdict is not Verdict.NEWLY_FAILING or not c.error:
            out.append(_headline_item(c))
            i += 1
            continue
        same = [c]
        while i + len(same) < len(shown) and shown[i + len(same)].verdict is Verdict.NEWLY_FAILING \
                and shown[i + len(same)].error == c.error:
            same.append(shown[i + len(same)])
        labels = ", ".join(md_escape(short_label(x)) for x in same)
        out.append(f"{labels} failing: {md_escape(clip(c.error, HEADLINE_ERROR_CHARS))}")
        i += len(same)
    return "; ".join(out)


def headline(report: ComparisonReport, max_items: int = 3) -> str:
    """The first visible line: the verdict in words."""
    regs = sorted(report.regressions, key=_sort_key)
    counts = Counter(c.verdict for c in report.all())
    if regs:
        where = _machines_text(dict.fromkeys(c.machine for c in regs))
        items = _headline_items(regs[:max_items])
        more = f" (+{len(regs) - max_items} more)" if len(regs) > max_items else ""
        n_reg, n_fail = counts[Verdict.REGRESSION], counts[Verdict.NEWLY_FAILING]
        what = ", ".join(([_plural(n_reg, "regression")] if n_reg else [])
                         + ([f"{n_fail} newly failing"] if n_fail else []))
        line = f"**{what} on {where}**: {items}{more}"
    else:
        where = _machines_text(m.machine for m in report.machines)
        bits = [_plural(counts[Verdict.IMPROVEMENT], "improvement"), f"{counts[Verdict.UNCHANGED]} unchanged"]
        for v, word in ((Verdict.FIXED, "fixed"), (Verdict.NEW, "new"), (Verdict.REMOVED, "removed"),
                        (Verdict.NOT_COMPARABLE, "not comparable")):
            if counts[v]:
                bits.append(f"{counts[v]} {word}")
        line = f"**No regressions**: {', '.join(bits)} on {where}"
    if report.partial:
        line += " — ⚠️ partial comparison"
    return line


def _sort_key(c: Comparison):
    return (VERDICT_ORDER[c.verdict], c.machine, c.benchmark, c.params)


def warnings(report: ComparisonReport, esc=str) -> list[str]:
    """Toolchain changes and partial-run notes, one line each; ``esc`` escapes names."""
    out: list[str] = []
    for m in report.machines:
        if m.toolchain_changes:
            diffs = "; ".join(f"{esc(k)} {esc(b)} -> {esc(h)}" for k, b, h in m.toolchain_changes)
            out.append(f"**{esc(m.machine)}**: toolchain changed between base and head: {diffs};"
                       " timings not comparable")
    notes: list[str] = []
    for m in report.machines:
        notes.extend(m.notes)
    notes.extend(report.notes)
    out.extend(esc(n) for n in dict.fromkeys(notes))
    return out


# --- terminal -------------------------------------------------------------------------------


def render_terminal(report: ComparisonReport, *, show_unchanged: bool = True) -> str:
    header = ("machine", "case", "unit", "base", "head", "change", "verdict", "note")
    rows = []
    for c in sorted(report.all(), key=_sort_key):
        if not show_unchanged and c.verdict is Verdict.UNCHANGED:
            continue
        b, h = fmt_pair(c.base, c.head, c.unit)
        note = note_text(c)
        if c.direction == "unknown":
            note = (note + "; " if note else "") + "direction unknown"
        rows.append((c.machine, case_text(c.benchmark, c.params), c.unit, b, h, fmt_change(c),
                     c.verdict.value, note))
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
                f"CROSS-VENDOR: {case_text(r.benchmark, r.params)} rocm/cuda ratio "
                f"{_fmt_ratio(r.base_ratio)} -> {_fmt_ratio(r.head_ratio)} "
                f"({r.rocm_machine} vs {r.cuda_machine})"
            )
    return "\n".join(lines) + "\n"


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

    def lines(self) -> list[str]:
        return self.head + self.rows + self.tail


def _table(header: Sequence[str]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.3g}"


def _fmt_pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f}%"


def _cmp_cells(c: Comparison, with_machine: bool) -> list[str]:
    b, h = fmt_pair(c.base, c.head, c.unit)
    unit = md_escape(c.unit) + (" (direction unknown)" if c.direction == "unknown" else "")
    cells = [md_escape(c.machine)] if with_machine else []
    # Numbers are formatted here, not taken from input: they need no escaping.
    verdict = VERDICT_TEXT[c.verdict]
    if with_machine and c.verdict is Verdict.NEWLY_FAILING and c.error:
        verdict += f": {md_escape(clip(c.error))}"
    cells += [md_escape(case_text(c.benchmark, c.params)), unit, b, h, fmt_change(c), verdict]
    if not with_machine:
        cells.append(md_escape(note_text(c)))
    return cells


def _machine_summary(m: MachineComparison) -> str:
    counts = Counter(c.verdict for c in m.comparisons)
    bits = [f"{n} {v.value}" for v, n in sorted(counts.items(), key=lambda kv: VERDICT_ORDER[kv[0]])]
    status = "" if m.status == "both" else f" ({m.status})"
    return f"<b>{html_escape(m.machine)}</b>{status}: {html_escape(', '.join(bits) or 'no cases')}"


def render_markdown(report: ComparisonReport, *, chart_url: str | None = None,
                    max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The PR comment body (GitHub-flavoured markdown), at most ``max_chars`` long."""
    top = [MARKER, headline(report)]
    n_cases = len(report.all())
    top.append(
        f"<sub>base {md_escape(report.base_commit[:8])} → head {md_escape(report.head_commit[:8])}"
        f" · {_plural(n_cases, 'case')} on {_plural(len(report.machines), 'machine')}"
        f" · thresholds: {md_escape(report.thresholds_source)}</sub>"
    )
    if warnings(report):
        top.append("")
        top.extend(f"> ⚠️ {w}  " for w in warnings(report, md_escape))
    blocks = [_Block(top)]

    changed = sorted((c for c in report.all() if c.verdict is not Verdict.UNCHANGED), key=_sort_key)
    if changed:
        blocks.append(_Block(
            ["", "### What changed", ""] + _table(["machine", "case", "metric", "base", "head", "change", "verdict"]),
            rows=[_row(_cmp_cells(c, with_machine=True)) for c in changed], priority=2,
        ))
    if report.cross_vendor:
        cv = sorted(report.cross_vendor, key=lambda r: (not r.flagged, r.benchmark, r.params))
        blocks.append(_Block(
            ["", "### ROCm / CUDA ratio", "",
             "Value on ROCm divided by value on CUDA for the same case, at base and head; "
             "⚠️ marks a ratio that moved beyond the GPU noise band.", ""]
            + _table(["case", "metric", "machines", "base ratio", "head ratio", "CUDA change", "ROCm change", ""]),
            rows=[_row([md_escape(case_text(r.benchmark, r.params)), md_escape(r.unit),
                        md_escape(f"{r.rocm_machine} / {r.cuda_machine}"), _fmt_ratio(r.base_ratio),
                        _fmt_ratio(r.head_ratio), _fmt_pct(r.cuda_change), _fmt_pct(r.rocm_change), "⚠️" if r.flagged else ""]) for r in cv],
            priority=1,
        ))
    if chart_url:
        blocks.append(_Block(["", f"📈 [Charts]({_safe_url(chart_url)})"]))
    for m in report.machines:
        rows = sorted(m.comparisons, key=_sort_key)
        blocks.append(_Block(
            ["", "<details>", f"<summary>{_machine_summary(m)}</summary>", ""]
            + _table(["case", "metric", "base", "head", "change", "verdict", "note"]),
            rows=[_row(_cmp_cells(c, with_machine=False)) for c in rows],
            tail=["", "</details>"], priority=0,
        ))
    return _fit(blocks, max_chars)


def _safe_url(url: str) -> str:
    # Only the characters that could end the link or open HTML are encoded.
    return url.replace(" ", "%20").replace(")", "%29").replace("(", "%28").replace("<", "%3C").replace(">", "%3E")


def _size(lines: Iterable[str]) -> int:
    return sum(len(s) + 1 for s in lines)


def _fit(blocks: list[_Block], max_chars: int) -> str:
    # Room for the top note and one "N more rows omitted" row per truncated block.
    note_reserve = 100 + 40 * sum(1 for b in blocks if b.priority >= 0)
    total = sum(_size(b.lines()) for b in blocks)
    over = total - max_chars
    if over > 0:
        over += note_reserve
        for b in sorted((b for b in blocks if b.priority >= 0), key=lambda b: b.priority):
            while b.rows and over > 0:
                over -= len(b.rows.pop()) + 1
                b.omitted += 1
    omitted = sum(b.omitted for b in blocks)
    if omitted:
        note = f"_truncated: {omitted} rows omitted; full comparison in the artifact_"
        blocks[0].head.extend(["", note])
        for b in blocks:
            if b.omitted and b.priority >= 0:
                b.tail.insert(0, f"| _{b.omitted} more rows omitted_ |")
    text = "\n".join(line for b in blocks for line in b.lines()) + "\n"
    if len(text) > max_chars:  # only fixed text left (e.g. thousands of warnings): hard cut
        cut = "\n\n_truncated: comment cut at the size limit; full comparison in the artifact_\n"
        text = text[: max_chars - len(cut)] + cut
    return text


# --- JSON -----------------------------------------------------------------------------------


def render_json(report: ComparisonReport) -> str:
    return json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n"
