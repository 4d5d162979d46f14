"""How do engine tests run a released engine with one of its files changed, without a git repository?

``patched_tree(package_dir, dest, {relpath: transform})`` builds ``dest/<package>/``: a
directory tree of symbolic links to every file of the installed package except those
named, which are written out transformed (``transform(text) -> text``, which must change
it). ``dest`` is then an ``--engine-src`` tree (seconds, no copy of a 200 MB package).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def patched_tree(package_dir: Path, dest: Path, patches: dict[str, Callable[[str], str]]) -> Path:
    root = dest / package_dir.name
    for here, dirs, files in os.walk(package_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(here).relative_to(package_dir)
        (root / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            if f.endswith(".pyc"):
                continue
            key = (rel / f).as_posix()
            if key in patches:
                text = (Path(here) / f).read_text(encoding="utf-8")
                new = patches[key](text)
                assert new != text, f"the patch of {key} changed nothing"
                (root / rel / f).write_text(new, encoding="utf-8")
            else:
                (root / rel / f).symlink_to(Path(here) / f)
    missing = [k for k in patches if not (root / k).is_file() or (root / k).is_symlink()]
    assert not missing, f"not in {package_dir}: {missing}"
    return dest
