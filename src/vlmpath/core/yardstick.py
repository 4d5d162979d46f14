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


# --- the trusted side's classification (issue 39) ------------------------------------------
#: What a pull request cannot change without moving the yardstick, as the privileged job
#: reads its changed files through the API (``github.pr_files``): the benchmark definitions,
#: everything that measures or judges (the whole of measure/, suite/, runner/, compare/,
#: pr/, selfcheck/, core/, serving/'s bench, the CLI that runs them), the CI itself (ci/,
#: .ci/, .github/), the build (pyproject.toml, setup files, docker/). Prefixes, compared
#: after ``normalise``; a directory ends in "/".
TRUSTED_YARDSTICK: tuple[str, ...] = (
    "benchmarks/", "asv.conf.json",
    "src/vlmpath/measure/", "src/vlmpath/suite/", "src/vlmpath/runner/", "src/vlmpath/compare/",
    "src/vlmpath/pr/", "src/vlmpath/selfcheck/", "src/vlmpath/core/", "src/vlmpath/serving/",
    "src/vlmpath/cli/", "src/vlmpath/github/", "src/vlmpath/__init__.py",
    "ci/", ".ci/", ".github/", "pyproject.toml", "setup.py", "setup.cfg", "requirements", "constraints",
    "docker/", "dockerfile", "docker-compose", "compose", "conftest.py", "tests/conftest.py", ".gitattributes", ".gitmodules",
    "sitecustomize.py", "usercustomize.py",
)
#: The neutral verdict's one line (the check is neither green nor red on its numbers).
YARDSTICK_CHANGED = "yardstick changed, needs a maintainer's review"


def normalise(path: str) -> str:
    """A changed path as compared: NFKC, case-folded (case-insensitive file systems),
    forward slashes, no leading ``./`` or ``/``, ``..`` segments resolved away."""
    import posixpath
    import unicodedata

    text = unicodedata.normalize("NFKC", str(path)).replace("\\", "/").casefold()
    text = posixpath.normpath("/" + text).lstrip("/")
    return "" if text == "." else text


def _in_yardstick(path: str) -> bool:
    p = normalise(path)
    name = p.rsplit("/", 1)[-1]
    return (name.endswith(".pth") or name in ("sitecustomize.py", "usercustomize.py", "conftest.py")
            or any(p == y.rstrip("/") or p.startswith(y if y.endswith("/") else y) for y in TRUSTED_YARDSTICK))


def classify(changed: Iterable[tuple[str, str | None]]) -> tuple[list[str], list[str]]:
    """(the yardstick's files, the code under test's files) among a PR's changed files, each
    ``(path, previous path or None)`` as the API lists them: a rename counts by both names
    (moving a file out of benchmarks/ moves the yardstick too). Sorted, de-duplicated."""
    yard, under = set(), set()
    for path, previous in changed:
        names = [n for n in (path, previous) if n]
        (yard if any(_in_yardstick(n) for n in names) else under).add(str(path))
    return sorted(yard), sorted(under - yard)


def yardstick_withheld(files: Sequence[str], truncated: bool = False) -> tuple[str, ...]:
    """The trusted side's reason to withhold green when the yardstick moved (for
    ``compare.withheld.withhold``), listing the files; () when it did not. ``truncated``:
    the API could not list every changed file, so the yardstick may have moved."""
    if not files and not truncated:
        return ()
    shown = ", ".join(_short(f) for f in files[:MAX_FILES])
    more = f" and {len(files) - MAX_FILES} more" if len(files) > MAX_FILES else ""
    what = f"{len(files)} file(s) of the benchmarks, instruments, judging code or CI ({shown}{more})" if files \
        else "the API did not list every changed file"
    return (f"{YARDSTICK_MARK} {YARDSTICK_CHANGED}: {what}; read from the pull request by the trusted job, "
            "whatever the artifact says",)
