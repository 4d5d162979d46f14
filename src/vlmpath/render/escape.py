"""How is a string from a benchmark made safe to show in markdown, HTML or one line?

Benchmark names, parameter values and error messages come from code under test: a PR
comment must never let them open HTML, break a table row or mention anyone. Used by the
PR comment, the run summary and the report.
"""

from __future__ import annotations

#: Longest failure message in a table cell (the JSON keeps it whole).
ERROR_CHARS = 120
_MD_SPECIAL = set("\\`*_{}[]()#+-.!|~:")


# Control and format characters (C0, DEL, C1, line/paragraph separators, bidi overrides):
# they end lines, move the cursor or reorder text in a terminal or a job log.
_CONTROL = {c: " " for c in [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029,
                             *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
_HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;"}


def md_escape(text: object) -> str:
    """Make an untrusted string inert in GitHub markdown (tables included).

    HTML-significant characters become entities, markdown punctuation gets a backslash,
    newlines become spaces (they would end a table row) and ``@`` cannot mention anyone.
    """
    out = []
    for ch in str(text).translate(_CONTROL):
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
    for ch in str(text).translate(_CONTROL):
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



# --- the other sinks: log lines, issue titles, link targets ----------------------------------


def log_line(text: object) -> str:
    """Untrusted text made safe for a CI job log (the privileged comment job prints it):
    one line, no control characters, and not starting with ``::`` (the runner reads a line
    that starts with it, after leading whitespace, as a workflow command: ``::add-mask::``,
    ``::error::``, ``::stop-commands::``). A ``::`` inside stays (pytest ids have one);
    every printed line goes through here, so text placed first is covered too."""
    flat = str(text).translate(_CONTROL)
    body = flat.lstrip()
    return ": :" + body[2:] if body.startswith("::") else flat


def log_text(text: object) -> str:
    """``log_line`` for each line of a multi-line text (the line breaks are kept)."""
    return "\n".join(log_line(line) for line in str(text).split("\n"))


def title_text(text: object, limit: int = 200) -> str:
    """An issue title: one line, clipped, no control characters and no live ``@`` mention
    (titles are plain text: a backslash escape would show)."""
    return clip(log_line(text), limit).replace("@", "\uff20")


def url_part(text: object) -> str:
    """One validated path part of a link target, percent-encoded (``/`` kept): nothing in
    it can end the link, open HTML or mention anyone."""
    from urllib.parse import quote

    return quote(str(text), safe="/")


def md_link(label: str, target: str) -> str:
    """``[label](target)`` with the label escaped and the target percent-encoded."""
    return f"[{md_escape(label)}]({url_part(target)})"
