"""How does a server run a side's changed engine files over the one installed build?

An *overlay* is a folder put first on the server's ``PYTHONPATH`` holding the engine's
import package (``vllm/``) as a mirror of the installed one: every directory on the way
to a changed file is a real directory, everything else a symbolic link to the installed
file or directory (the compiled extension included), and each changed file a real copy
with the side's text. Every process the server starts (API server, engine core, worker)
inherits ``PYTHONPATH`` and imports the side's files; the installed env is never edited.

``build_overlay(package_dir, changed, out)`` builds one from ``{relative path: text}``;
``changed_from_checkout(checkout, base, head)`` reads a PR's changed ``.py`` files of the
package from two commits of an engine checkout (the head side's text);
``installed_package(python, name)`` finds the installed package without importing it.

Plants (``engine_plants``) are overlays too: a planted head is the installed text with one
edit, so the mistake sits in the engine's own code in every server process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def installed_package(python: str, name: str) -> Path:
    """The directory of package ``name`` in ``python``'s env (found, not imported: fast)."""
    code = "import importlib.util as u, sys; s = u.find_spec(sys.argv[1]); print(s.origin if s else '')"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([python, "-c", code, name], capture_output=True, text=True, env=env, timeout=120)
    origin = proc.stdout.strip()
    if proc.returncode or not origin:
        raise VlmpathError(f"--python {python}: no {name} package installed there (`vlmpath engine install "
                           f"{name}==X`; on a CPU machine `{name}==0.32.0+cpu`)")
    return Path(origin).parent


def build_overlay(package_dir: str | os.PathLike[str], changed: Mapping[str, str],
                  out: str | os.PathLike[str]) -> Path:
    """The overlay folder ``out`` (replaced) holding ``package_dir``'s package with the
    ``changed`` files (paths relative to the package directory); returns ``out``."""
    src = Path(package_dir).resolve()
    root = Path(out)
    if root.exists():
        shutil.rmtree(root)
    pkg = root / src.name
    real_dirs = {Path(".")}
    for rel in changed:
        p = Path(rel)
        if p.is_absolute() or ".." in p.parts or not (src / p).parent.is_dir():
            raise VlmpathError(f"overlay: {rel!r} is not a file path inside {src}")
        real_dirs.update(p.parents)
    for d in sorted(real_dirs, key=lambda x: len(x.parts)):
        (pkg / d).mkdir(parents=True, exist_ok=True)
        for child in (src / d).iterdir():
            rel = d / child.name
            if rel in real_dirs or rel.as_posix() in changed or child.name == "__pycache__":
                continue
            (pkg / rel).symlink_to(child)
    for rel, text in changed.items():
        (pkg / rel).write_text(text, encoding="utf-8")
    return root


def changed_from_checkout(checkout: str | os.PathLike[str], base: str, head: str,
                          package: str = "vllm") -> dict[str, str]:
    """The head text of the ``.py`` files of ``package/`` that differ between ``base`` and ``head``
    of the git checkout (paths relative to the package directory)."""
    from vlmpath.core.git import git_out

    def git(*args: str) -> str:
        try:
            return git_out(checkout, *args)
        except VlmpathError as exc:
            raise VlmpathError(f"--engine-checkout {checkout}: {exc}") from None

    names = git("diff", "--name-only", "--diff-filter=AM", base, head, "--", f"{package}/").split()
    return {n[len(package) + 1:]: git("show", f"{head}:{n}") for n in names if n.endswith(".py")}
