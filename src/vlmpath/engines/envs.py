"""Where is the engine environment for ``sglang==X``, and how is one built?

An engine environment is a virtual environment under the engine home (``--home``, else
``VLMPATH_ENGINE_HOME``, else ``~/.cache/vlmpath/engines``), one directory per release
(``sglang-0.5.23/``), with a ``manifest.json`` saying what went in, its disk size and how
long the install took. ``install`` builds one (idempotent: a complete env is reused):

1. the torch pair. On a GPU image (this python's torch has CUDA or ROCm) the venv sees the
   image's packages (``--system-site-packages``) and a constraint file pins that torch, so
   pip never replaces it. Otherwise the CPU build ``torch==2.13.0`` plus the matched
   ``torchvision==0.28.0 --no-deps`` (the index's torchvision is CUDA-built; the
   measuring process makes it importable with ``torchvision_shim``);
2. ``sglang==X --no-deps`` (its full dependency set pulls the whole GPU stack, ~11 GB);
3. the import-chain packages of ``data/sglang_import_chain.txt`` (each with why), at the
   release's own pins where its metadata pins them;
4. vlmpath itself (``--no-deps``, from this checkout), so the env can run the worker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vlmpath.engines.base import EngineError, EngineSpec, parse_engine

HOME_ENV = "VLMPATH_ENGINE_HOME"
CPU_TORCH = "torch==2.13.0"
CPU_TORCHVISION = "torchvision==0.28.0"
MANIFEST = "manifest.json"


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
            return json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    @property
    def ready(self) -> bool:
        return self.python.exists()


def _version_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.+-]", v))


def env_for(spec: EngineSpec, home=None) -> EngineEnv:
    if spec.kind != "release":
        raise EngineError(f"{spec.label} is not a release: engine environments hold releases (sglang==X)")
    return EngineEnv(spec, engine_home(home) / spec.slug)


def list_envs(home=None) -> list[EngineEnv]:
    """Installed environments, oldest release first."""
    root = engine_home(home)
    out = []
    for d in sorted(root.glob("*-*")) if root.is_dir() else []:
        name, _, version = d.name.partition("-")
        if (d / "bin" / "python").exists() and version[:1].isdigit():
            out.append(EngineEnv(EngineSpec("release", name, version), d))
    return sorted(out, key=lambda e: _version_key(e.spec.version))


def newest_env(home=None, name: str | None = None) -> EngineEnv | None:
    """The newest installed release (of engine ``name`` when given)."""
    envs = [e for e in list_envs(home) if name is None or e.spec.name == name]
    return envs[-1] if envs else None


def require_env(spec: EngineSpec, home=None) -> EngineEnv:
    env = env_for(spec, home)
    if not env.ready:
        raise EngineError(f"no engine environment for {spec.label} at {env.path}: run "
                          f"`vlmpath engine install {spec.label}` (or pass --home / set {HOME_ENV})")
    return env


def chain_entries(name: str = "sglang") -> list[tuple[str, bool]]:
    """``(package, no_deps)`` for each line of ``data/<name>_import_chain.txt`` (a line
    tagged ``no-deps`` is installed without its own dependencies)."""
    path = resources.files("vlmpath.engines").joinpath(f"data/{name}_import_chain.txt")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.split("#")[0].split()
        if words and not words[0].startswith("!"):
            out.append((words[0], "no-deps" in words[1:]))
    return out


def chain_options(name: str = "sglang") -> set[str]:
    """The ``!option`` lines of ``data/<name>_import_chain.txt``."""
    path = resources.files("vlmpath.engines").joinpath(f"data/{name}_import_chain.txt")
    return {w[0] for line in path.read_text(encoding="utf-8").splitlines()
            if (w := line.split("#")[0].split()) and w[0].startswith("!")}


def import_chain(name: str = "sglang") -> list[str]:
    """The package names of ``data/<name>_import_chain.txt``."""
    return [p for p, _ in chain_entries(name)]


def _gpu_torch() -> str | None:
    """This python's torch version when it is a GPU build (an image's torch), else None."""
    try:
        import torch
    except ImportError:
        return None
    if getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None):
        return torch.__version__
    return None


def _requires(python: Path, name: str) -> list[str]:
    """The release's own ``Requires-Dist`` (no extras), read from its installed metadata."""
    code = (f"import importlib.metadata as m, json; print(json.dumps([r for r in (m.requires({name!r}) or [])"
            " if 'extra ==' not in r]))")
    return json.loads(subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout)


# The torch family stays the CPU pair (or the image's): never constrained by the release.
_TORCH_FAMILY = {"torch", "torchvision", "torchaudio"}


def _constraints(python: Path, name: str) -> str:
    """The release's ``Requires-Dist`` as a pip constraints file (extras dropped, which pip
    refuses in constraints; the torch family left out)."""
    lines = []
    for r in _requires(python, name):
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$", r)
        if m and m.group(1).lower() not in _TORCH_FAMILY and m.group(3).strip():
            lines.append(m.group(1) + m.group(3))
    return "\n".join(lines) + "\n"


def _pins(python: Path, name: str = "sglang") -> dict[str, str]:
    """The release's own ``name==version`` pins, read from its installed metadata."""
    reqs = _requires(python, name)
    out = {}
    for r in reqs:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*==\s*([^;\s]+)", r)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def _resolved(pip: list[str], args: list[str], names: list[str], env: dict) -> list[str]:
    """``name==version`` as pip's resolver picks each of ``names`` (a dry run, no download of
    the dependencies' files); a name it does not report stays as given."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run(pip + ["--dry-run", "--report", str(report)] + args, capture_output=True, text=True,
                              env=env)
        if proc.returncode or not report.exists():
            return [a for a in args if not a.startswith("-") and not a.endswith(".txt")]
        got = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
               for i in json.loads(report.read_text(encoding="utf-8")).get("install", [])}
    return [f"{n}=={got[n.lower()]}" if n.lower() in got else n for n in names]


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def install(text: str, home=None, *, project_root: str | os.PathLike | None = None, log=print) -> EngineEnv:
    """Build (or reuse) the engine environment for ``text`` (``sglang==X``)."""
    spec = parse_engine(text)
    if spec.kind != "release":
        raise EngineError(f"vlmpath engine install {text!r}: give a release, e.g. sglang==0.5.23")
    env = env_for(spec, home)
    if env.ready and env.manifest.get("complete"):
        log(f"engine env {spec.label}: already installed at {env.path}")
        return env
    t0 = time.perf_counter()
    env.path.parent.mkdir(parents=True, exist_ok=True)
    gpu_torch = _gpu_torch()
    steps: list[dict] = []

    def run(name: str, cmd: list[str], **kw) -> None:
        s = time.perf_counter()
        log(f"engine install: {name}: {' '.join(cmd)}")
        proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
        if proc.returncode:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise EngineError(f"vlmpath engine install {spec.label}: step {name!r} failed ({cmd[0]} exited "
                              f"{proc.returncode}):\n{tail}")
        steps.append({"step": name, "command": cmd, "seconds": round(time.perf_counter() - s, 1)})

    venv = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if gpu_torch else []) + [str(env.path)]
    if not env.python.exists():
        run("venv", venv)
    pip = [str(env.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    penv = dict(os.environ)
    if gpu_torch:  # the image's torch is never replaced
        (env.path / "torch-constraint.txt").write_text(f"torch=={gpu_torch}\n", encoding="utf-8")
        penv["PIP_CONSTRAINT"] = str(env.path / "torch-constraint.txt")
    else:
        run("torch", pip + [os.environ.get("VLMPATH_CPU_TORCH", CPU_TORCH)], env=penv)
        run("torchvision", pip + ["--no-deps", CPU_TORCHVISION], env=penv)
    # VLMPATH_ENGINE_WHEELS: a directory of cached engine wheels (an offline machine, a CI cache).
    wheels = os.environ.get("VLMPATH_ENGINE_WHEELS")
    links = ["--find-links", wheels] if wheels else []
    run(spec.name, pip + links + ["--no-deps", f"{spec.name}=={spec.version}"], env=penv)
    pins = _pins(env.python, spec.name)
    entries = chain_entries(spec.name)
    chain = [f"{p}=={pins[p.lower()]}" if p.lower() in pins else p for p, _ in entries]
    # The release's own requirements constrain its import chain (vLLM's ranges, not just pins).
    # A chain file with a ``!release-constraints`` line asks for it; sglang's pins suffice.
    constrain = []
    if "!release-constraints" in chain_options(spec.name):
        cons = env.path / "release-constraints.txt"
        cons.write_text(_constraints(env.python, spec.name), encoding="utf-8")
        constrain = ["-c", str(cons)]
    no_deps = [c for c, (_, nd) in zip(chain, entries) if nd]
    if no_deps:
        # The version pip would choose *with* the package's own requirements (vLLM 0.21 pins
        # apache-tvm-ffi==0.1.9, which the newest xgrammar outgrew), installed without them.
        no_deps = _resolved(pip, constrain + no_deps, [p for p, nd in entries if nd], penv)
        run("import-chain-no-deps", pip + ["--no-deps"] + constrain + no_deps, env=penv)
    run("import-chain", pip + constrain + [c for c, (_, nd) in zip(chain, entries) if not nd], env=penv)
    root = Path(project_root) if project_root else Path(__file__).resolve().parents[3]
    if (root / "pyproject.toml").exists():
        run("vlmpath", pip + ["--no-deps", "-e", str(root)], env=penv)
    freeze = subprocess.run([str(env.python), "-m", "pip", "freeze", "--disable-pip-version-check"],
                            capture_output=True, text=True).stdout.split()
    manifest = {"engine": spec.label, "python": str(env.python), "torch": f"image {gpu_torch}" if gpu_torch
                else f"{CPU_TORCH} (CPU) + {CPU_TORCHVISION} --no-deps + vlmpath torchvision_shim",
                "import_chain": chain, "steps": steps, "packages": freeze, "disk_bytes": _du(env.path),
                "install_seconds": round(time.perf_counter() - t0, 1), "complete": True}
    from vlmpath.core import atomic

    atomic.write_text(env.path / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    log(f"engine env {spec.label}: {env.path} ({manifest['disk_bytes'] / 2**30:.2f} GiB, "
        f"{manifest['install_seconds']:.0f} s)")
    return env


def remove(spec: EngineSpec, home=None) -> None:
    env = env_for(spec, home)
    if env.path.exists():
        shutil.rmtree(env.path)
