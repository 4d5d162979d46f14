"""How does the PR comment show where a regressed case's time went?

``render_profiles`` turns the ``CaseProfile`` records of ``vlmpath.compare.profile_diff``
into a Markdown section: per regressed case, the operators whose self time grew most
between base and head (name, calls and self time per pass on both sides, the growth) and
links to both Chrome traces (open them in https://ui.perfetto.dev).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vlmpath.compare.profile_diff import CaseProfile
from vlmpath.render.escape import md_escape

HEADING = "### Where the time went (torch.profiler, base vs head)"


def _ms(us: float) -> str:
    return f"{us / 1e3:.3f}"


def _calls(n: float) -> str:
    return f"{n:g}"


def render_profiles(profiles: Sequence[CaseProfile], link_base: str = "") -> str:
    """Markdown for every profiled case ("" when there is none); ``link_base`` prefixes the
    trace paths (e.g. the artifact's URL)."""
    if not profiles:
        return ""
    out = [HEADING, ""]
    for p in profiles:
        out.append(f"**{md_escape(p.case)}** on {md_escape(p.machine)} "
                   f"(regressed: {', '.join(md_escape(b) for b in p.benchmarks)})")
        links = [f"[{side} trace]({link_base}{path})" for side, path in (("base", p.base_trace), ("head", p.head_trace))
                 if path]
        if links:
            out.append("traces: " + " · ".join(links) + " (Chrome trace JSON: open in ui.perfetto.dev)")
        if p.note:
            out.append(f"> {md_escape(p.note)}")
        if p.deltas:
            out += ["", "| operator | calls base → head | self ms/pass base | head | Δ ms |",
                    "|---|---|---|---|---|"]
            out += [f"| `{d.name.replace('`', '')}` | {_calls(d.base_calls)} → {_calls(d.head_calls)} | "
                    f"{_ms(d.base_us)} | {_ms(d.head_us)} | {d.delta_us / 1e3:+.3f} |" for d in p.deltas]
        out.append("")
    return "\n".join(out)


def append_to_comment(comment: Path, profiles: Sequence[CaseProfile]) -> None:
    """Add the section to an existing comment.md (atomically); nothing when there is none."""
    from vlmpath.core.atomic import write_text

    section = render_profiles(profiles)
    if section:
        write_text(comment, comment.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + section)
