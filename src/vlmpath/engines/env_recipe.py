"""How is an engine release's environment built, step by step?

``pip_recipe`` is the default installer of an ``EngineEntry`` (``vlmpath engine install
NAME==X`` calls it inside the environment's lock, see ``vlmpath.engines.envs``):

1. the torch pair. On a GPU image (this python's torch has CUDA or ROCm) the venv sees the
   image's packages (``--system-site-packages``) and a constraint file pins that torch, so
   pip never replaces it. Otherwise the CPU build ``torch==2.13.0`` plus the matched
   ``torchvision==0.28.0 --no-deps`` (the index's torchvision is CUDA-built; the
   measuring process makes it importable with ``torchvision_shim``);
2. ``PACKAGE==X --no-deps`` (an engine's full dependency set pulls the whole GPU stack);
3. the packages of the entry's import-chain file, at the release's own pins where its
   metadata pins them, under the entry's extra ``constraints`` if it has any;
4. vlmpath itself (``--no-deps``, from this checkout), so the env can run the worker.

With a shared cache (``vlmpath engine sweep``; ``install(..., shared_cache=DIR)``) every
step runs ``uv pip install --link-mode=hardlink --cache-dir DIR`` instead of pip: a file
of a wheel that several releases pin (torch, transformers, ...) is downloaded and unpacked
once and hard-linked into each env, so the set of envs holds its blocks once.

An entry with its own ``installer`` gets the same ``InstallContext`` (``run`` a recorded
step, ``pip``, the paths) and returns the manifest fields it wants recorded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vlmpath.core.errors import EngineError
from vlmpath.engines.base import EngineSpec

CPU_TORCH = "torch==2.13.0"
CPU_TORCHVISION = "torchvision==0.28.0"
WHEELS_ENV = "VLMPATH_ENGINE_WHEELS"  # a directory of cached engine wheels (offline machine, CI cache)


@dataclass
class InstallContext:
    """What an installer works with; ``steps`` is what ``run`` did (for the manifest)."""

    spec: EngineSpec
    entry: object                 # the EngineEntry
    path: Path                    # the environment's directory
    project_root: Path            # the vlmpath checkout installed into the env (when it has one)
    log: Callable[[str], None] = print
    steps: list[dict] = field(default_factory=list)
    shared_cache: Path | None = None  # uv's cache dir: install with uv, hard links into it

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def pip(self) -> list[str]:
        if self.shared_cache is not None:
            return uv_pip(self.python, self.shared_cache)
        return [str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]

    @property
    def pip_resolver(self) -> list[str]:
        """pip itself (its ``--dry-run --report``, which uv lacks), whichever installs the steps."""
        return [str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]

    def run(self, name: str, cmd: list[str], **kw) -> None:
        """Run one step; a failure is an ``EngineError`` with the step's last stderr lines."""
        s, c = time.perf_counter(), children_cpu_seconds()
        self.log(f"engine install: {name}: {' '.join(cmd)}")
        proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
        if proc.returncode:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise EngineError(f"vlmpath engine install {self.spec.label}: step {name!r} failed ({cmd[0]} "
                              f"exited {proc.returncode}):\n{tail}")
        # CPU seconds too: on a shared box the wall time says more about the neighbours
        self.steps.append({"step": name, "command": cmd, "seconds": round(time.perf_counter() - s, 1),
                           "cpu_seconds": round(children_cpu_seconds() - c, 1)})


UV_ENV = "VLMPATH_UV"  # the uv binary (else ``uv`` on PATH, else ``python -m uv``)


def uv_command() -> list[str]:
    """How to run uv here; an ``EngineError`` saying how to get it when there is none."""
    import shutil

    named = os.environ.get(UV_ENV)
    if named:
        return [named]
    found = shutil.which("uv")
    if found:
        return [found]
    import importlib.util

    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    raise EngineError(f"a shared install cache needs uv: `pip install uv` (or set {UV_ENV} to its binary)")


def uv_pip(python: Path, cache: Path) -> list[str]:
    """``uv pip install`` into ``python``'s env, hard-linking from the one cache ``cache``.
    uv reads no pip.conf: pip's find-links (a local wheel of the CPU torch) are passed on."""
    links = [x for x in os.environ.get("PIP_FIND_LINKS", "").split() if x]
    return (uv_command() + ["pip", "install", "-q", "--python", str(python), "--link-mode=hardlink",
                            "--cache-dir", str(cache)] + [a for x in links for a in ("--find-links", x)])


def children_cpu_seconds() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def gpu_torch() -> str | None:
    """This python's torch version when it is a GPU build (an image's torch), else None."""
    try:
        import torch
    except ImportError:
        return None
    if getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None):
        return torch.__version__
    return None


def release_requires(python: Path, package: str) -> list[str]:
    """The installed release's own ``Requires-Dist`` lines, without extras."""
    code = ("import importlib.metadata as m, json, sys; print(json.dumps([r for r in (m.requires(sys.argv[1]) "
            "or []) if 'extra ==' not in r]))")
    out = subprocess.run([str(python), "-c", code, package], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def exact_pins(requires: list[str]) -> dict[str, str]:
    """``name -> version`` of the ``name==version`` requirements (names normalised)."""
    out = {}
    for r in requires:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*==\s*([^;\s]+)", r)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def pip_recipe(ctx: InstallContext) -> dict:
    """The default installer (see the module docstring); returns its manifest fields."""
    image_torch = gpu_torch()
    venv = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if image_torch else []) + [str(ctx.path)]
    if ctx.shared_cache is not None:  # ensurepip unpacks pip afresh (40 s on a busy box); uv links it
        venv = (uv_command() + ["venv", "-q", "--seed", "--python", sys.executable, "--link-mode=hardlink",
                                "--cache-dir", str(ctx.shared_cache)]
                + (["--system-site-packages"] if image_torch else []) + [str(ctx.path)])
    if not ctx.python.exists():
        ctx.run("venv", venv)
    penv = dict(os.environ)
    if image_torch:  # the image's torch is never replaced
        (ctx.path / "torch-constraint.txt").write_text(f"torch=={image_torch}\n", encoding="utf-8")
        penv["PIP_CONSTRAINT"] = penv["UV_CONSTRAINT"] = str(ctx.path / "torch-constraint.txt")
    else:
        ctx.run("torch", ctx.pip + [os.environ.get("VLMPATH_CPU_TORCH", CPU_TORCH)], env=penv)
        ctx.run("torchvision", ctx.pip + ["--no-deps", CPU_TORCHVISION], env=penv)
    wheels = os.environ.get(WHEELS_ENV)
    links = ["--find-links", wheels] if wheels else []
    entry, spec = ctx.entry, ctx.spec
    ctx.run(entry.package, ctx.pip + links + ["--no-deps", f"{entry.package}=={spec.version}"], env=penv)
    requires = release_requires(ctx.python, entry.package)
    pins = exact_pins(requires)
    chain = [f"{p}=={pins[p.lower()]}" if p.lower() in pins else p for p in entry.chain()]
    extra: list[str] = []
    if entry.constraints is not None:
        lines = list(entry.constraints(requires))
        (ctx.path / "chain-constraints.txt").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
        extra = ["-c", str(ctx.path / "chain-constraints.txt")]
    if chain:
        ctx.run("import-chain", ctx.pip + extra + chain, env=penv)
    if (ctx.project_root / "pyproject.toml").exists():
        ctx.run("vlmpath", ctx.pip + ["--no-deps", "-e", str(ctx.project_root)], env=penv)
    return {"installer": "uv (shared cache, hard links)" if ctx.shared_cache is not None else "pip",
            "torch": f"image {image_torch}" if image_torch
            else f"{CPU_TORCH} (CPU) + {CPU_TORCHVISION} --no-deps + vlmpath torchvision_shim",
            "import_chain": chain}
