"""How does vlmpath write a file so that nobody ever reads half of it?

Every result, summary, comment body and chart is written to a temporary file in the
target's directory and moved over the target with ``os.replace`` (atomic on POSIX within
one filesystem), so a reader sees the old file or the new one, and an interrupted run
leaves no half-written file behind. Files get mode 0644 (``mkstemp`` makes 0600), because
results are read by other users and by the dashboard server.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on any
    exception it is removed and ``path`` is left as it was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    os.fchmod(fd, 0o644)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    with replacing(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def copy_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    with replacing(dst) as tmp:
        shutil.copyfile(src, tmp)
    return Path(dst)
