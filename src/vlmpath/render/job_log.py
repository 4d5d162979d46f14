"""How does a privileged job print text that a pull request wrote?

``vlmpath ci merge``, ``vlmpath ci alert`` and ``vlmpath comment`` run with a write token
(bench-comment.yml, bench-main.yml), and their logs are read by the Actions runner, which
acts on workflow commands in them. Every print of untrusted text there goes through
``print_untrusted``: each line through ``escape.log_line`` (visible characters only, no
``::`` first, no ``##[``), and the whole between GitHub's own ``::stop-commands::TOKEN`` and
``::TOKEN::`` with a fresh random token, so that the runner processes no command at all
inside, whatever a line holds. The token is new for every block and never appears inside
it, so the text cannot end the block early.
"""

from __future__ import annotations

import secrets
import sys
from typing import TextIO

from vlmpath.render.escape import log_line


def stop_commands_block(text: str, token: str | None = None) -> str:
    """``text`` (any number of lines) escaped line by line and fenced; ends with a newline."""
    lines = [log_line(line) for line in str(text).splitlines()] or [""]
    token = token or secrets.token_hex(16)
    while any(token in line for line in lines):  # a 128-bit guess: never, but never trusted
        token = secrets.token_hex(16)
    return "\n".join([f"::stop-commands::{token}", *lines, f"::{token}::"]) + "\n"


def print_untrusted(text: str, file: TextIO | None = None) -> None:
    """Print ``text`` in a privileged job's log (see the module docstring)."""
    out = file if file is not None else sys.stdout
    out.write(stop_commands_block(text))
    out.flush()
