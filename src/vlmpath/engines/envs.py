"""Where is the engine environment for ``NAME==X``, is it complete, and how is one built?

An engine environment is a directory under the engine home (``--home``, else
``VLMPATH_ENGINE_HOME``, else ``~/.cache/vlmpath/engines``), one per release
(``sglang-0.5.23/``). It is *complete* only when its ``manifest.json`` says so: the
manifest (what went in, disk size, install time) is written last, atomically, so an
install that was interrupted, failed or is still running leaves an *incomplete*
environment. ``engine list`` shows those as incomplete (``installing now`` while an
install holds the lock); ``--engine`` refuses them with the command that repairs them (or,
during an install, says to wait); the newest-environment lookups skip them.

``install`` builds one (idempotent: a complete env is reused) inside a file lock per
environment (``<home>/.locks/<slug>.lock``), so two installs of the same release never
race: the second waits, then finds it complete. The steps are the engine entry's
installer (``vlmpath.engines.registry``; by default ``env_recipe.pip_recipe``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import EngineError
from vlmpath.engines.base import EngineSpec

HOME_ENV = "VLMPATH_ENGINE_HOME"
INSTALL_ENV = "VLMPATH_ENGINE_INSTALL"  # the release ci/setup.sh installed (adapter tests run it)
MANIFEST = "manifest.json"
LOCKS = ".locks"


def engine_home(home: str | os.PathLike | None = None) -> Path:
    return Path(home or os.environ.get(HOME_ENV) or Path.home() / ".cache" / "vlmpath" / "engines").expanduser()


@dataclass(frozen=True)
class EngineEnv:
    spec: EngineSpec
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def manifest(self) -> dict:
        try:
            data = json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def complete(self) -> bool:
        """The manifest, written last, marks this release's environment complete."""
        m = self.manifest
        return m.get("complete") is True and m.get("engine") == self.spec.label and self.python.exists()

    @property
    def state(self) -> str:
        return "complete" if self.complete else "incomplete"


def _version_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.+-]", v))


def env_for(spec: EngineSpec, home=None) -> EngineEnv:
    if spec.kind != "release":
        raise EngineError(f"{spec.label} is not a release: engine environments hold releases (NAME==X)")
    return EngineEnv(spec, engine_home(home) / spec.slug)


def list_envs(home=None, engine: str | None = None, *, complete_only: bool = False) -> list[EngineEnv]:
    """Environments (complete and incomplete), by engine, oldest release first."""
    root = engine_home(home)
    out = []
    for d in sorted(root.glob("*-*")) if root.is_dir() else []:
        name, _, version = d.name.partition("-")
        if d.is_dir() and version[:1].isdigit() and engine in (None, name):
            out.append(EngineEnv(EngineSpec("release", name, version), d))
    if complete_only:
        out = [e for e in out if e.complete]
    return sorted(out, key=lambda e: (e.spec.name, _version_key(e.spec.version)))


def newest_env(home=None, engine: str | None = None) -> EngineEnv | None:
    """The newest *complete* environment (of ``engine`` when given; else of the first engine
    by name that has one)."""
    envs = list_envs(home, engine, complete_only=True)
    if engine is None and envs:
        envs = [e for e in envs if e.spec.name == envs[0].spec.name]
    return envs[-1] if envs else None


def repair_hint(spec: EngineSpec) -> str:
    return f"run `vlmpath engine install {spec.label}` (or pass --home / set {HOME_ENV})"


def require_env(spec: EngineSpec, home=None) -> EngineEnv:
    """The complete environment of ``spec``; a missing or incomplete one says how to fix it."""
    env = env_for(spec, home)
    if not env.complete and installing(env):
        raise EngineError(f"the engine environment for {spec.label} at {env.path} is being installed by another "
                          "process: wait for it to finish (`vlmpath engine list` says complete), then run again")
    if not env.path.exists():
        raise EngineError(f"no engine environment for {spec.label} at {env.path}: {repair_hint(spec)}")
    if not env.complete:
        raise EngineError(f"the engine environment for {spec.label} at {env.path} is incomplete (an install "
                          f"was interrupted, failed or is running; no complete {MANIFEST}): "
                          f"run `vlmpath engine install {spec.label}` to repair it")
    return env


def env_for_tests(engine: str, home=None) -> EngineEnv | None:
    """The environment an engine's adapter tests run: the release ``VLMPATH_ENGINE_INSTALL``
    names when it is one of ``engine``'s (it must be complete), else the newest complete one.
    ``VLMPATH_ENGINE_INSTALL`` may name several releases, space separated (one per engine)."""
    for named in os.environ.get(INSTALL_ENV, "").split():
        spec = EngineSpec.parse(named)  # the variable is read here: a boundary, as --engine is
        if spec.kind == "release" and spec.name == engine:
            return require_env(spec, home)
    return newest_env(home, engine)


def _lock_path(env: EngineEnv) -> Path:
    return env.path.parent / LOCKS / f"{env.path.name}.lock"


def installing(env: EngineEnv) -> bool:
    """Is an install of this environment running now (its lock held by a live process)?"""
    lock = _lock_path(env)
    if not lock.exists():
        return False
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


@contextmanager
def install_lock(env: EngineEnv, log=print) -> Iterator[None]:
    """Hold the environment's install lock (an ``flock``: released when the process dies)."""
    lock = _lock_path(env)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"engine env {env.spec.label}: another install holds {lock}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def install(spec: EngineSpec, home=None, *, project_root: str | os.PathLike | None = None, log=print,
            shared_cache: str | os.PathLike | None = None) -> EngineEnv:
    """Build (or reuse) the engine environment of the release ``spec`` (``NAME==X``, parsed
    by the CLI); with ``shared_cache`` the steps install with uv, hard-linking from that one
    cache (``env_recipe``)."""
    from vlmpath.core import atomic
    from vlmpath.engines import env_recipe, registry

    if spec.kind != "release":
        raise EngineError(f"vlmpath engine install {spec.label!r}: give a release, e.g. "
                          f"{registry.get(registry.names()[0]).example}")
    entry = registry.get(spec.name)
    env = env_for(spec, home)
    env.path.parent.mkdir(parents=True, exist_ok=True)
    with install_lock(env, log):
        if env.complete:
            log(f"engine env {spec.label}: already installed at {env.path}")
            return env
        # From here until the manifest is written again the environment is incomplete.
        (env.path / MANIFEST).unlink(missing_ok=True)
        t0 = time.perf_counter()
        root = Path(project_root) if project_root else Path(__file__).resolve().parents[3]
        ctx = env_recipe.InstallContext(spec, entry, env.path, root, log,
                                        shared_cache=Path(shared_cache) if shared_cache else None)
        try:
            fields = (entry.installer or env_recipe.pip_recipe)(ctx)
        except EngineError:
            raise
        except Exception as exc:  # a plug-in's installer: one line naming it, not a traceback
            raise EngineError(f"vlmpath engine install {spec.label}: the {entry.name} installer failed "
                              f"({type(exc).__name__}: {exc}); the environment stays incomplete: run the "
                              "same command again to repair it") from exc
        freeze = []
        if env.python.exists():
            import subprocess

            freeze = subprocess.run([str(env.python), "-m", "pip", "freeze", "--disable-pip-version-check"],
                                    capture_output=True, text=True).stdout.split()
        manifest = {"engine": spec.label, "python": str(env.python), **dict(fields or {}), "steps": ctx.steps,
                    "packages": freeze, "disk_bytes": _du(env.path),
                    "install_seconds": round(time.perf_counter() - t0, 1), "complete": True}
        atomic.write_text(env.path / MANIFEST, json.dumps(manifest, indent=2) + "\n")  # last: marks it complete
    log(f"engine env {spec.label}: {env.path} ({manifest['disk_bytes'] / 2**30:.2f} GiB, "
        f"{manifest['install_seconds']:.0f} s)")
    return env


def remove(spec: EngineSpec, home=None) -> None:
    env = env_for(spec, home)
    with install_lock(env):  # never under a running install
        if env.path.exists():
            shutil.rmtree(env.path)


def import_chain(engine: str = "sglang") -> list[str]:
    """The package names of ``engine``'s import-chain data file."""
    from vlmpath.engines import registry

    return registry.get(engine).chain()
