"""Can every line vlmpath prints reach a terminal whatever its encoding?

A job's stdout may be ASCII (``LANG=C``, ``PYTHONIOENCODING=ascii``, a bare runner): one
``±`` or ``—`` in a table would raise ``UnicodeEncodeError`` and turn a finished merge into
a traceback with nothing posted. ``tolerate(streams)`` keeps each stream's encoding and
makes characters it cannot hold print as ``?`` instead of raising. Files vlmpath writes
(comments, JSON) are UTF-8 regardless and are not touched.

Entry point: ``tolerate()``, the first line of ``cli.main``.
"""

from __future__ import annotations

import sys


def tolerate(streams=None) -> None:
    """Make ``streams`` (default: stdout and stderr) replace what their encoding cannot
    encode, where they can be reconfigured; a UTF-8 stream is left as it is."""
    for stream in streams if streams is not None else (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if encoding in ("utf-8", "utf8") or not hasattr(stream, "reconfigure"):
            continue
        try:
            stream.reconfigure(errors="replace")
        except (ValueError, OSError):  # a detached or closed stream: nothing to print to anyway
            pass
