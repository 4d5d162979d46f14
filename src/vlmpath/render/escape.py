"""How is a string from a benchmark made safe to show in markdown, HTML or one line?

Benchmark names, parameter values and error messages come from code under test: a PR
comment must never let them open HTML, break a table row or mention anyone. Used by the
PR comment, the run summary and the report.
"""

from __future__ import annotations

#: Longest failure message in a table cell (the JSON keeps it whole).
ERROR_CHARS = 120
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


def clip(text: object, limit: int = ERROR_CHARS) -> str:
    """One line (whitespace runs collapsed), at most ``limit`` characters, "…" when cut.
    Clip before escaping, so that no escape sequence is cut in half."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"

