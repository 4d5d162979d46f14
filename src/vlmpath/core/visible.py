"""Which characters of an untrusted string may be shown anywhere at all?

The one character allowlist under every sink of ``render.escape`` (and the readers that
clean artifact text before it is stored): printable code points only (``str.isprintable``:
letters, marks, digits, punctuation, symbols and the ASCII space). Refused: control
characters (C0, DEL, C1, ESC), line and paragraph separators and other spaces, every format
character (category Cf: bidi overrides and isolates U+202A-202E, U+2066-2069, marks
U+200E/F and U+061C; zero-width U+200B-200D, U+2060, U+FEFF; soft hyphen, tags),
surrogates, private-use and unassigned code points. Whitespace and controls become a space
(they still separate words); the rest is dropped.
"""

from __future__ import annotations

import unicodedata


def _refused(ch: str) -> str:
    return " " if ch.isspace() or unicodedata.category(ch) == "Cc" else ""


def visible(text: object) -> str:
    """``text`` with printable code points only (see the module docstring)."""
    s = str(text)
    if s.isprintable():  # the common case, in C
        return s
    return "".join(ch if ch.isprintable() else _refused(ch) for ch in s)
