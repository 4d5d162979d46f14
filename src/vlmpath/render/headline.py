"""How is a comparison said in words: verdict names, case labels, the headline, warnings?

The pieces every view of a ``ComparisonReport`` shares (terminal, PR comment, charts):
what each verdict is called and in which order it is shown, how a case is labelled, the
one-line headline that leads the PR comment, and the toolchain / partial-run warnings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from vlmpath.compare.accepted import AWAITING
from vlmpath.compare.comparison import Comparison, ComparisonReport, Verdict
from vlmpath.core.metrics import Method
from vlmpath.compare.records import GPU_KEY_PREFIX
from vlmpath.core.asv_names import strip_kind
from vlmpath.render.escape import clip, md_escape
from vlmpath.render.fmt import fmt_change, fmt_pair
from vlmpath.render.spread_text import spread_note

#: Longest failure message in the headline (shorter than a table cell's).
HEADLINE_ERROR_CHARS = 80
#: Longest case label, unit and machine name in the headline and warnings.
LABEL_CHARS, UNIT_CHARS, MACHINE_CHARS = 80, 24, 64

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


def params_text(params: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params)


def case_text(benchmark: str, params: Sequence[tuple[str, str]]) -> str:
    return f"{benchmark} ({params_text(params)})" if params else benchmark


def short_label(c: Comparison) -> str:
    """``Embed.tok_per_s multi_region``: last two name parts, kind prefix dropped, values."""
    if c.case:  # a whole failed case: its class, not one of its metric rows
        name = c.case.split(".")[-1]
    else:
        parts = c.benchmark.split(".")
        name = ".".join(parts[-2:-1] + [strip_kind(parts[-1])])
    values = " ".join(v for _, v in c.params)
    return clip(f"{name} {values}".strip(), LABEL_CHARS)  # a 70k-character value stays short


def note_text(c: Comparison) -> str:
    """The note of a row: why it failed when known (clipped), else the reason or method."""
    if c.error:
        found = f"{c.finding}; " if c.finding else ""  # the failed case's accuracy, say
        return found + ("base: " if c.verdict is Verdict.FIXED else "") + clip(c.error)
    extra = spread_note(c)
    return "; ".join(x for x in (c.reason or c.method, extra) if x)


def _headline_item(c: Comparison) -> str:
    label = md_escape(short_label(c))
    if c.verdict is Verdict.NEWLY_FAILING:
        return f"{label} newly failing"
    if c.method == Method.EXACT:
        b, h = fmt_pair(c.base, c.head, c.unit)
        return f"{label} {md_escape(clip(c.unit, UNIT_CHARS))} {b} -> {h}"
    return f"{label} {md_escape(clip(c.unit, UNIT_CHARS))} {fmt_change(c)}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _machines_text(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(md_escape(clip(n, MACHINE_CHARS)) for n in names[:8])
    return (shown + (f" (+{len(names) - 8} more)" if len(names) > 8 else "")) or "no machines"


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
        labels = ", ".join(md_escape(short_label(x)) + (f" ({md_escape(x.finding)})" if x.finding else "")
                           for x in same)
        out.append(f"{labels} failing: {md_escape(clip(c.error, HEADLINE_ERROR_CHARS))}")
        i += len(same)
    return "; ".join(out)


def _indicative_text(report: ComparisonReport, inside_parens: bool = False) -> str | None:
    """How many moves rest on too few samples (quick runs, plain tracks): counted apart."""
    n = len(report.indicative_moves)
    what = f"{n} indicative move{'' if n == 1 else 's'}"
    return None if not n else f"{what}, not gating" if inside_parens else f"{what} (too few samples, not gating)"


def headline(report: ComparisonReport, max_items: int = 3) -> str:
    """The first visible line: the verdict in words. It counts the gating findings only;
    indicative moves (too few samples) are counted apart, never as regressions."""
    regs = sorted(report.regressions, key=sort_key)
    counts = Counter(c.verdict for c in report.all())
    indicative = _indicative_text(report)
    if regs:
        where = _machines_text(dict.fromkeys(c.machine for c in regs))
        items = _headline_items(regs[:max_items])
        more = f" (+{len(regs) - max_items} more)" if len(regs) > max_items else ""
        gating = Counter(c.verdict for c in regs)  # not indicative, not accepted
        n_reg, n_fail = gating[Verdict.REGRESSION], gating[Verdict.NEWLY_FAILING]
        what = ", ".join(([plural(n_reg, "regression")] if n_reg else [])
                         + ([f"{n_fail} newly failing"] if n_fail else []))
        line = f"**{what} on {where}**: {items}{more}"
        indicative = _indicative_text(report, inside_parens=True)
        extra = ([f"{len(report.accepted)} accepted"] if report.accepted else []) + ([indicative] if indicative else [])
        if report.awaiting_review:  # the PR's own entries: failing, and why
            extra.append(f"{len(report.awaiting_review)} {AWAITING}")
        if extra:
            line += f" ({'; '.join(extra)})"
    else:
        where = _machines_text(m.machine for m in report.machines)
        bits = [plural(len(report.improvements), "improvement"), f"{counts[Verdict.UNCHANGED]} unchanged"]
        if indicative:
            bits.append(indicative)
        if report.accepted:  # listed in benchmarks/accepted.yaml: shown, not failing
            bits.append(f"{len(report.accepted)} accepted")
        for v, word in ((Verdict.FIXED, "fixed"), (Verdict.NEW, "new"), (Verdict.REMOVED, "removed"),
                        (Verdict.NOT_COMPARABLE, "not comparable")):
            if counts[v]:
                bits.append(f"{counts[v]} {word}")
        skipped = report.not_judged
        if skipped:
            why = Counter(clip(c.reason or "not comparable", 80) for c in skipped)
            reasons = ", ".join(f"{r}: {n}" for r, n in why.most_common(4)) + (", ..." if len(why) > 4 else "")
            judged = report.judged
            lead = ("**Incomplete: nothing judged**" if not judged else
                    f"**Incomplete: {plural(len(report.untrusted), 'untrusted definition')}**"
                    if report.untrusted else
                    "**Incomplete**" if report.incomplete else f"**No regressions among {judged} judged**")
            line = (f"{lead}: {len(skipped)} of {len(report.all())} cases not judged ({md_escape(reasons)}); "
                    f"{', '.join(bits)} on {where}")
        elif not report.all():  # an empty selection, or no results on either side: never green
            line = f"**Incomplete: nothing judged**: no cases to compare on {where}"
        elif report.withheld:  # the trusted side withholds green (compare.withheld; issue 39)
            line = f"**Incomplete**: {md_escape(clip(report.withheld[0], 200))}; {', '.join(bits)} on {where}"
        else:
            line = f"**No regressions**: {', '.join(bits)} on {where}"
    if report.partial:
        line += " — ⚠️ partial comparison"
    return line


def sort_key(c: Comparison):
    return (VERDICT_ORDER[c.verdict], c.machine, c.benchmark, c.params)


#: Longest note shown (notes can carry text from an artifact's run.json).
NOTE_CHARS = 500


def warnings(report: ComparisonReport, esc=str) -> list[str]:
    """Toolchain changes and partial-run notes, one line each; ``esc`` escapes names."""
    out: list[str] = []
    raw_esc = esc

    def esc(x):  # fingerprint values come from the artifact: clipped before escaping
        return raw_esc(clip(str(x), 80))

    for m in report.machines:
        tool = [t for t in m.toolchain_changes if not t[0].startswith(GPU_KEY_PREFIX)]
        gpu = [t for t in m.toolchain_changes if t[0].startswith(GPU_KEY_PREFIX)]
        if tool:
            diffs = "; ".join(f"{esc(k)} {esc(b)} -> {esc(h)}" for k, b, h in tool)
            out.append(f"**{esc(m.machine)}**: toolchain changed between base and head: {diffs};"
                       " timings not comparable")
        if gpu:  # clocks, power limit, modes (vlmpath.measure.gpu_state)
            diffs = "; ".join(f"{esc(k[len(GPU_KEY_PREFIX):])} {esc(b)} -> {esc(h)}" for k, b, h in gpu)
            out.append(f"**{esc(m.machine)}**: GPU settings changed between base and head: {diffs};"
                       " timings not comparable")
    notes: list[str] = []
    for m in report.machines:
        notes.extend(m.notes)
    notes.extend(report.notes)
    out.extend(raw_esc(clip(n, NOTE_CHARS)) for n in dict.fromkeys(notes))
    return out

