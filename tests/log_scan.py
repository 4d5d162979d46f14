"""Read a job log as the Actions runner does: which lines would it act on?

The runner acts on a line that starts (after leading whitespace) with ``::`` and on ``##[``
anywhere in a line, except between ``::stop-commands::TOKEN`` and ``::TOKEN::`` (or
``##[TOKEN]``), where it acts on nothing but the resume. ``scan`` walks a log line by line
with that state and returns the lines the runner would act on (``exposed``) and the
content lines with the fences removed (``content``); tests assert ``exposed == []``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How the runner splits output into lines (every break Python's splitlines knows, to be safe).
_BREAKS = re.compile(r"\r\n|\r|\n|\u2028|\u2029|\x85|\x0b|\x0c|\x1c|\x1d|\x1e")
_STOP = re.compile(r"^::stop-commands::([0-9a-f]{32})$")  # render.job_log's tokens only


@dataclass
class Scan:
    exposed: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    fences: int = 0
    unclosed: bool = False


def _acts(line: str) -> bool:
    return line.lstrip().startswith("::") or "##[" in line


def scan(text: str) -> Scan:
    out = Scan()
    token = None
    for line in _BREAKS.split(text):
        if token is None:
            m = _STOP.match(line.strip())
            if m:
                token = m.group(1)
                out.fences += 1
                continue
            if _acts(line):
                out.exposed.append(line)
            out.content.append(line)
        else:
            if line.strip().lower() in (f"::{token}::".lower(), f"##[{token}]".lower()):
                token = None
                continue
            out.content.append(line)
    out.unclosed = token is not None
    return out


def assert_inert(*texts: str) -> Scan:
    """Every text: no line the runner would act on, every fence closed; the last scan."""
    last = Scan()
    for text in texts:
        last = scan(text)
        assert not last.exposed, last.exposed[:5]
        assert not last.unclosed, "a stop-commands block is never resumed"
    return last


def content_lines(text: str) -> list[str]:
    """The non-blank lines of a log with its fences removed (what a reader sees)."""
    return [ln for ln in scan(text).content if ln.strip()]
