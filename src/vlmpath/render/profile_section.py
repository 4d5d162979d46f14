"""How does the PR comment show where a regressed case's time went?

``render_profiles`` turns the ``CaseProfile`` records of ``vlmpath.compare.profile_diff``
into a Markdown section: per regressed case, the operators whose self time grew most
between base and head (name, calls and self time per pass on both sides, the growth) and
links to both Chrome traces (open them in https://ui.perfetto.dev).
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.compare.profile_diff import CaseProfile
from vlmpath.render.escape import clip, md_code, md_escape, url_part

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
    return "\n".join([HEADING, "", *profile_chunks(profiles, link_base)])


def profile_chunks(profiles: Sequence[CaseProfile], link_base: str = "") -> list[str]:
    """One markdown chunk per profiled case (the PR comment drops whole chunks to fit).
    Trace link targets are built from validated paths (``profile_diff``), percent-encoded."""
    chunks = []
    for p in profiles:
        out = [f"**{md_escape(clip(p.case, 160))}** on {md_escape(clip(p.machine, 64))} "
               f"(regressed: {', '.join(md_escape(clip(b, 120)) for b in p.benchmarks[:8])})"]
        links = [f"[{side} trace]({link_base}{url_part(path)})"
                 for side, path in (("base", p.base_trace), ("head", p.head_trace)) if path]
        if links:
            out.append("traces: " + " · ".join(links) + " (Chrome trace JSON: open in ui.perfetto.dev)")
        if p.note:
            out.append(f"> {md_escape(clip(p.note, 500))}")
        if p.deltas:
            out += ["", "| operator | calls base → head | self ms/pass base | head | Δ ms |",
                    "|---|---|---|---|---|"]
            out += [f"| `{md_code(d.name, 120)}` | {_calls(d.base_calls)} → {_calls(d.head_calls)} | "
                    f"{_ms(d.base_us)} | {_ms(d.head_us)} | {d.delta_us / 1e3:+.3f} |" for d in p.deltas]
        out.append("")
        chunks.append("\n".join(out))
    return chunks

