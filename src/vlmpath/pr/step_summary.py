"""What may a job write to its GitHub job summary (``$GITHUB_STEP_SUMMARY``) from a ``ci pr`` output?

The job summary is Markdown that GitHub renders on the run's page. ``ci pr`` leaves
``comment.md`` (the rendered comparison) and, when it failed, ``error.txt`` (one message,
which can hold any name a pull request wrote). ``step_summary`` is the one way the
workflows put them there (``vlmpath ci summary DIR``):

- ``error.txt`` always goes through the Markdown sink's allowlist (``render.escape.md_escape``,
  line by line, at most ``MAX_ERROR_LINES`` lines): no HTML, no mention, no link, no
  heading, no control or bidi character.
- ``comment.md`` is shown rendered only when the process that wrote it is the one asking
  (``comment_trusted``: the CPU PR job, whose vlmpath rendered it). A comment written by
  another process (the GPU job's container, which runs the pull request's code) is shown
  as escaped text, like the error.

Both are read within a cap (``MAX_SUMMARY_BYTES``, GitHub's own limit for one step's
summary is 1 MiB); a file over it is cut, and the cut said.
"""

from __future__ import annotations

from pathlib import Path

from vlmpath.pr.artifact import ERROR_FILE
from vlmpath.pr.outputs import COMMENT_FILE
from vlmpath.render.escape import md_escape

MAX_SUMMARY_BYTES = 512 << 10
MAX_ERROR_LINES = 200


def _read(path: Path, limit: int) -> tuple[str, bool]:
    """(text, was it cut) of a regular file (not a link), at most ``limit`` bytes read."""
    if path.is_symlink() or not path.is_file():
        return "", False
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def escaped_lines(text: str, max_lines: int = MAX_ERROR_LINES) -> str:
    """Untrusted text as inert Markdown: each line through ``md_escape``, joined by hard breaks."""
    lines = text.splitlines()
    shown = [md_escape(ln) for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"({len(lines) - max_lines} more lines not shown)")
    return "<br>\n".join(shown) + "\n"


def step_summary(out_dir: str | Path, *, comment_trusted: bool) -> str:
    """The job summary for one ``ci pr`` output directory ('' when it holds neither file)."""
    out = Path(out_dir)
    parts: list[str] = []
    comment, error = out / COMMENT_FILE, out / ERROR_FILE
    if comment.exists():
        text, cut = _read(comment, MAX_SUMMARY_BYTES)
        parts.append(text if comment_trusted and not cut else escaped_lines(text))
        if cut:
            parts.append(f"({COMMENT_FILE} is over {MAX_SUMMARY_BYTES} bytes: cut)\n")
    if error.exists():
        text, cut = _read(error, 64 << 10)
        parts.append("**The benchmark run failed:**<br>\n" + escaped_lines(text))
    return "\n".join(parts)
