"""Which files are the yardstick a pull request is measured with, and did the PR move it?

The yardstick is what decides what a number means rather than what is measured: the
benchmark definitions (``benchmarks/`` and asv's ``asv.conf.json``), the thresholds (the
packaged ``thresholds.yaml``, the accepted regressions) and the instruments (the timing,
synchronisation, memory and operation counters under ``src/vlmpath/measure/``). The PR
flow measures both sides with the base's definitions and judges with the base's
thresholds, but the instruments are part of the package under test; so whenever a PR
changes any of these files the comment says so at its top and lists them
(``notice``), and a reviewer knows the yardstick moved. ``YARDSTICK_PATHS`` is the one
list of them. An engine PR (``ci pr --engine-src``) never brings a yardstick of its own:
``ENGINE_NOTICE`` says so.

``YARDSTICK_MARK`` starts every such note (``is_top_notice``), so the comment can lift it to the top
(``render.comment``) from the report's notes, wherever the note came from (``ci pr``
itself, or the run.json notes ``ci merge`` folds in with a machine prefix).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Path prefixes (directories end in "/") of the yardstick, relative to the repository root.
YARDSTICK_PATHS: tuple[str, ...] = (
    "benchmarks/",
    "asv.conf.json",
    "src/vlmpath/compare/thresholds.yaml",
    "src/vlmpath/compare/thresholds.py",
    "src/vlmpath/core/metrics.py",
    "src/vlmpath/measure/timing.py",
    "src/vlmpath/measure/syncs.py",
    "src/vlmpath/measure/memory.py",
    "src/vlmpath/measure/op_count.py",
    "src/vlmpath/measure/tower_replay.py",
    "src/vlmpath/measure/gpu_state.py",
    "src/vlmpath/measure/platform.py",
    "src/vlmpath/suite/measure.py",
)
YARDSTICK_MARK = "yardstick moved:"
#: Most file names listed in the notice, and their longest shown length (the notice must
#: fit one note of ``ci merge``, 500 characters with its machine prefix).
MAX_FILES, NAME_CHARS = 5, 50
ENGINE_NOTICE = ("yardstick: vlmpath's own benchmark cases, thresholds and instruments, never the engine "
                 "pull request's (only the engine's code differs between the sides)")


def is_top_notice(note: str) -> bool:
    """Is this report note one the comment shows first (``YARDSTICK_MARK`` or ``ENGINE_NOTICE``)?"""
    return YARDSTICK_MARK in note or ENGINE_NOTICE in note


def is_yardstick(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in YARDSTICK_PATHS)


def yardstick_files(changed: Iterable[str]) -> list[str]:
    """The changed paths that belong to the yardstick, sorted."""
    return sorted({p for p in changed if is_yardstick(p)})


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else "..." + name[-(NAME_CHARS - 3):]


def notice(files: Sequence[str]) -> str | None:
    """The comment's top notice for yardstick files the PR changed (None when none)."""
    if not files:
        return None
    shown = ", ".join(_short(f) for f in files[:MAX_FILES])
    more = f" and {len(files) - MAX_FILES} more" if len(files) > MAX_FILES else ""
    return (f"{YARDSTICK_MARK} head changes {len(files)} file(s) of the benchmarks, thresholds or instruments "
            f"({shown}{more}); both sides ran base's benchmarks/, judged by base's thresholds; head's new or "
            "changed cases are not judged")
