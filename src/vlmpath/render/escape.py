"""How is a string someone else wrote made safe for each place it is shown?

Benchmark names, parameter values, units, notes, error messages, artifact and machine names
come from code under test. There is one function per sink, each defined by what it lets
through (an allowlist), never by a list of bad prefixes:

- every sink: ``core.visible`` keeps printable code points only (``str.isprintable``:
  letters, marks, digits, punctuation, symbols and the ASCII space). Control characters (C0,
  DEL, C1, ESC), line and paragraph separators, other spaces, and every format character
  (bidi overrides and isolates U+202A-202E, U+2066-2069, U+200E/F, U+061C; zero-width
  U+200B-200D, U+2060, U+FEFF; the rest of category Cf), surrogates, private-use and
  unassigned code points are refused: whitespace and controls become a space, the rest is
  dropped;
- ``md_escape``: a Markdown cell: letters, digits, space, ``"$%',/;=?^`` and non-ASCII
  printable characters as they are; markdown punctuation backslash-escaped; ``<>&@`` as
  entities (no HTML, no mention);
- ``html_escape``: text inside raw HTML in Markdown (``<summary>``): the same, with numeric
  entities instead of backslashes (a backslash would show there);
- ``md_code``: the inside of a code span in a table cell: no backtick, pipes escaped;
- ``log_line`` / ``log_text``: a CI job log line: no line starts a workflow command
  (``::``) and no ``##[`` survives anywhere in it. The privileged jobs also print untrusted
  text between the runner's ``::stop-commands::`` pair (``render.job_log``);
- ``title_text``: an issue title: one clipped line, no live mention;
- ``file_name``: letters, digits and ``._-`` only, never starting with ``.`` or ``-``, bounded;
- ``url_part``: a link target, percent-encoded.
"""

from __future__ import annotations

import hashlib

from vlmpath.core.visible import visible

#: Longest failure message in a table cell (the JSON keeps it whole).
ERROR_CHARS = 120
_MD_SPECIAL = set("\\`*_{}[]()#+-.!|~:")
_HTML_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;"}
_FILE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def md_escape(text: object) -> str:
    """Make an untrusted string inert in GitHub markdown (tables included).

    HTML-significant characters become entities, markdown punctuation gets a backslash,
    newlines become spaces (they would end a table row) and ``@`` cannot mention anyone.
    """
    out = []
    for ch in visible(text):
        if ch.isalnum() or ch == " " or not ch.isascii():
            out.append(ch)
        elif ch in "<>&":
            out.append(_HTML_ENTITIES[ch])
        elif ch == "@":
            out.append("&#64;")
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        else:  # "$%',/;=?^ and the double quote: nothing in markdown text
            out.append(ch)
    return "".join(out)


def html_escape(text: object) -> str:
    """For text inside raw HTML (``<summary>``), where backslash escapes show literally.

    Markdown punctuation becomes numeric entities too, in case a renderer does parse
    inline markdown there.
    """
    out = []
    for ch in visible(text):
        if ch.isalnum() or ch == " " or not ch.isascii():
            out.append(ch)
        elif ch in _HTML_ENTITIES:
            out.append(_HTML_ENTITIES[ch])
        elif ch in _MD_SPECIAL or ch == "@":
            out.append(f"&#{ord(ch)};")
        else:
            out.append(ch)
    return "".join(out)


def md_code(text: object, limit: int = 160) -> str:
    """The inside of a code span in a table cell (C++ and operator names stay readable):
    visible characters, one line, clipped, no backtick (it would end the span), pipes
    escaped (they would end the cell)."""
    return clip(visible(text).replace("`", "'"), limit).replace("|", "\\|")


def clip(text: object, limit: int = ERROR_CHARS) -> str:
    """One line (whitespace runs collapsed), at most ``limit`` characters, "…" when cut.
    Clip before escaping, so that no escape sequence is cut in half."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


# --- the other sinks: log lines, issue titles, file names, link targets ----------------------


def log_line(text: object) -> str:
    """Untrusted text made safe for a CI job log: one line of visible characters, not
    starting with ``::`` (the runner reads a line that starts with it, after leading
    whitespace, as a workflow command) and with no ``##[`` anywhere (the runner's older
    command form, and the log viewer's ``##[error]``/``##[group]`` markup). A ``::`` inside
    stays (pytest ids have one); the privileged jobs' prints are in addition wrapped in
    ``::stop-commands::`` (``render.job_log``)."""
    flat = visible(text).replace("##[", "# #[")
    body = flat.lstrip()
    return ": :" + body[2:] if body.startswith("::") else flat


def log_text(text: object) -> str:
    """``log_line`` for each line of a multi-line text (the line breaks are kept)."""
    return "\n".join(log_line(line) for line in str(text).split("\n"))


def title_text(text: object, limit: int = 200) -> str:
    """An issue title: one line, clipped, no control characters and no live ``@`` mention
    (titles are plain text: a backslash escape would show)."""
    return clip(log_line(text), limit).replace("@", "\uff20")


def file_name(text: object, limit: int = 100) -> str:
    """A file name from untrusted text: letters, digits and ``._-`` only (anything else
    becomes ``_``), never ``.``- or ``-``-first, at most ``limit``
    characters; a longer name keeps a hash of the whole so that two stay apart."""
    s = str(text)
    name = "".join(ch if ch in _FILE_CHARS else "_" for ch in s) or "_"
    if name[0] in ".-":  # no hidden file, no "..", nothing a command line reads as an option
        name = "_" + name[1:]
    if len(name) > limit:
        digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        name = name[: max(limit - 13, 1)] + "-" + digest
    return name


def url_part(text: object) -> str:
    """One validated path part of a link target, percent-encoded (``/`` kept): nothing in
    it can end the link, open HTML or mention anyone."""
    from urllib.parse import quote

    return quote(visible(text), safe="/")
