"""How does a run that cannot finish writing leave the results store as it found it?

A full disk (ENOSPC), a quota or a read-only remount can stop ``vlmpath run`` after asv
wrote new results but before the fingerprint beside them: the store would then pair new
results with an old fingerprint, and a later comparison would trust a platform that did
not measure them. ``unchanged_on_write_error`` remembers the bytes of the store files one
run may touch (they are small: one commit on one machine) and, on an ``OSError``, removes
the files the run created and puts the old bytes back (removals first, so the restore has
the space they freed), then raises one ``VlmpathError`` line (the CLI exits 2).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def _files(root: Path, wanted: Callable[[Path], bool]) -> list[Path]:
    if not root.is_dir():
        return []
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and wanted(p.relative_to(root))]


def snapshot(root: Path, wanted: Callable[[Path], bool]) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in _files(root, wanted)}


def restore(root: Path, wanted: Callable[[Path], bool], before: dict[Path, bytes]) -> list[str]:
    """Put the store back; returns the files that could not be (said in the error)."""
    failed = []
    for p in _files(root, wanted):
        if p not in before:
            try:
                p.unlink()
            except OSError:
                failed.append(str(p))
    for p, data in before.items():
        try:
            if not p.is_file() or p.read_bytes() != data:
                with open(p, "wb") as fh:  # in place: no second copy needs room
                    fh.write(data)
        except OSError:
            failed.append(str(p))
    # Temporary files of atomic writes (".<name>.XXXX.tmp", vlmpath.core.atomic) of the
    # run's own files, left by a failed write; nobody else's.
    def own_tmp(rel: Path) -> bool:
        n = rel.name
        return (n.startswith(".") and n.endswith(".tmp") and "." in n[1:-4]
                and wanted(rel.with_name(n[1:-4].rsplit(".", 1)[0])))

    for p in _files(root, own_tmp):
        try:
            p.unlink()
        except OSError:
            pass
    return failed


@contextmanager
def unchanged_on_write_error(root: str | os.PathLike[str], wanted: Callable[[Path], bool],
                             what: str) -> Iterator[None]:
    """Run the body; on an ``OSError`` restore ``root``'s ``wanted`` files (paths relative
    to ``root``) and raise one line naming ``what``, the error and the fix."""
    base = Path(root)
    before = snapshot(base, wanted)
    try:
        yield
    except OSError as exc:
        failed = restore(base, wanted, before)
        where = f" writing {exc.filename}" if exc.filename else ""
        state = ("the results store is as it was before the run" if not failed else
                 f"could not restore {len(failed)} file(s) of the results store: {', '.join(failed[:3])}")
        raise VlmpathError(f"{what} stopped: {exc.strerror or exc}{where}; {state}. Free space "
                           "(or fix the permissions) and run again") from None
