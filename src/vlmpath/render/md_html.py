"""How does the landing page show a summary's Markdown as a page, not as Markdown source?

The few block forms ``render.summary.render_markdown`` (and the PR comment) write:
headings (``#``..``######``), pipe tables, ``>`` quotes, ``-`` lists and paragraphs; inline
code, ``**bold**`` and the backslash escapes ``render.escape.md_escape`` adds. Everything
is HTML-escaped first (the text quotes benchmark messages: hostile input), so only these
tags can come out; anything else stays as text. Not a general Markdown renderer.
"""

from __future__ import annotations

import html
import re

_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~:])")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")


def inline(text: str) -> str:
    """One line's inline Markdown as safe HTML (code spans kept verbatim)."""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_plain(text[last:m.start()]))
        out.append(f"<code>{html.escape(m.group(1))}</code>")
        last = m.end()
    out.append(_plain(text[last:]))
    return "".join(out)


def _plain(text: str) -> str:
    # Bold first (on the escaped form, so an escaped \* stays a star), then undo escapes.
    marked = _BOLD.sub(lambda m: "\x00" + m.group(1) + "\x01", text)
    # Entities as GitHub shows them (md_escape writes "<" as "&lt;"), then escaped once.
    text = html.unescape(_ESCAPED.sub(r"\1", marked))
    return html.escape(text).replace("\x00", "<strong>").replace("\x01", "</strong>")


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def to_html(markdown: str) -> str:
    """The Markdown's blocks as HTML."""
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("<!--"):
            i += 1
            continue
        h = _HEADING.match(line)
        if h:
            level = min(6, len(h.group(1)) + 1)  # under the page's own headings
            out.append(f"<h{level}>{inline(h.group(2))}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
            head = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append("<table class=md><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head)
                       + "</tr></thead><tbody>" + "".join(
                           "<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in rows)
                       + "</tbody></table>")
        elif line.startswith(">"):
            quote = []
            while i < len(lines) and lines[i].startswith(">"):
                quote.append(inline(lines[i][1:].strip()))
                i += 1
            out.append("<blockquote>" + "<br>".join(quote) + "</blockquote>")
        elif re.match(r"^\s*[-*]\s+", line):
            items = []
            while i < len(lines) and re.match(r"^\s*[-*]\s+", lines[i]):
                items.append("<li>" + inline(re.sub(r'^\s*[-*]\s+', '', lines[i])) + "</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            # The first line always joins the paragraph: a "|" line with no rule under it is
            # text, and a paragraph that took no line would never move past it.
            para = [inline(line.strip())]
            i += 1
            while i < len(lines) and lines[i].strip() and not _HEADING.match(lines[i]) \
                    and not lines[i].lstrip().startswith(("|", ">")):
                para.append(inline(lines[i].strip()))
                i += 1
            out.append("<p>" + " ".join(para) + "</p>")
    return "\n".join(out)
