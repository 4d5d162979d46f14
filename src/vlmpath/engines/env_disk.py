"""How much disk do engine environments take, counting a hard-linked file once?

``du`` of one env counts every file it holds; envs installed from one shared cache
(``env_recipe.uv_pip``) hold the same inodes, so their sum overstates the disk they
use. ``disk_bytes(paths)`` is what ``du -s PATH...`` reports for the set: allocated
blocks, each inode counted once across all the paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def disk_bytes(paths: Iterable[str | os.PathLike]) -> int:
    """Allocated bytes under ``paths``, each inode once (as ``du -s`` over them together)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root in paths:
        for dirpath, dirnames, filenames in os.walk(Path(root)):
            for name in filenames + dirnames:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
                total += st.st_blocks * 512
    return total
