"""Did installing vlmpath into a GPU image leave the image's own torch alone?

Used by ``docker/cuda.Dockerfile`` and ``docker/rocm.Dockerfile`` at build time and by
``docker/entrypoint.sh`` when it has to reinstall a changed checkout. Three steps:

``record DIR``
    Before anything is installed: write ``DIR/constraints.txt`` (the exact versions of
    torch and the packages built against it, for ``PIP_CONSTRAINT``) and
    ``DIR/torch-baseline.json`` (torch version plus ``torch.version.cuda``/``hip``).
``verify DIR``
    After installing: exit 1, naming what changed, if torch's version or its CUDA/HIP
    build differs from the baseline. A CUDA wheel from PyPI silently replacing a ROCm
    build is the failure this exists for.
``versions DIR``
    Write ``DIR/versions.json``: base image, backend, torch, CUDA/HIP/ROCm, Python,
    vlmpath and key dependency versions, so every image says what it benchmarks with.

Standard library plus torch only; runs with the image's python (or any, on a CPU host).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from importlib import metadata
from pathlib import Path

# Packages the base image ships built against its torch. pip may never move them: a new
# numpy or triton from PyPI can break the image's torch as surely as a new torch can.
PINNED = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton-rocm", "numpy")
# Reported in versions.json (absent ones are skipped).
REPORTED = PINNED + ("vlmpath", "transformers", "asv", "matplotlib", "blake3", "xxhash")
BASELINE = "torch-baseline.json"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _torch_identity() -> dict[str, str | None]:
    import torch

    return {
        "dist_version": _installed("torch"),
        "torch.__version__": str(torch.__version__),
        "torch.version.cuda": torch.version.cuda,
        "torch.version.hip": getattr(torch.version, "hip", None),
    }


def _write_atomic(path: Path, text: str) -> None:
    # Same directory so os.replace is atomic; a failed build never leaves half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def constraints_text() -> str:
    """``name==version`` lines for every PINNED package that is installed.

    importlib.metadata rather than ``pip freeze | grep ^torch==``: the same pin for a
    normal install, and still a valid pin when freeze would print ``torch @ file://...``
    (conda or direct-URL installs, as in some vendor images).
    """
    lines = [f"{n}=={v}" for n in PINNED if (v := _installed(n)) is not None]
    if not lines or not lines[0].startswith("torch=="):
        raise SystemExit("torch_guard: torch is not installed in this Python; "
                         "the base image must bring its own torch build")
    return "\n".join(lines) + "\n"


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / "constraints.txt", constraints_text())
    _write_atomic(out / BASELINE, json.dumps(_torch_identity(), indent=2, sort_keys=True) + "\n")


def verify(out: Path) -> list[str]:
    """Return the differences between the recorded and the current torch (empty: same)."""
    baseline_path = out / BASELINE
    if not baseline_path.is_file():
        return [f"{baseline_path} is missing: run 'torch_guard.py record {out}' before installing"]
    before = json.loads(baseline_path.read_text(encoding="utf-8"))
    now = _torch_identity()
    return [
        f"{key} changed from {before.get(key)!r} to {now[key]!r}"
        for key in sorted(now)
        if before.get(key) != now[key]
    ]


def versions(out: Path, base_image: str | None) -> dict[str, object]:
    ident = _torch_identity()
    rocm = None
    rocm_info = Path("/opt/rocm/.info/version")
    if rocm_info.is_file():
        rocm = rocm_info.read_text(encoding="utf-8").strip()
    data: dict[str, object] = {
        "base_image": base_image,
        "backend": "rocm" if ident["torch.version.hip"] else
                   "cuda" if ident["torch.version.cuda"] else "cpu",
        "torch": ident["torch.__version__"],
        "cuda": ident["torch.version.cuda"],
        "hip": ident["torch.version.hip"],
        "rocm": rocm,
        "python": platform.python_version(),
        "packages": {n: v for n in REPORTED if (v := _installed(n)) is not None},
    }
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / "versions.json", json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torch_guard.py", description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("record", "verify", "versions"))
    parser.add_argument("dir", type=Path, help="image metadata directory, e.g. /opt/vlmpath")
    parser.add_argument("--base-image", default=os.environ.get("BASE_IMAGE"),
                        help="base image reference to record (default: $BASE_IMAGE)")
    a = parser.parse_args(argv)
    if a.step == "record":
        record(a.dir)
        print((a.dir / "constraints.txt").read_text(encoding="utf-8"), end="")
    elif a.step == "verify":
        problems = verify(a.dir)
        for p in problems:
            print(f"torch_guard: {p}; pip replaced the image's torch. Keep torch out of the "
                  f"requirements and install with PIP_CONSTRAINT={a.dir / 'constraints.txt'}",
                  file=sys.stderr)
        if problems:
            return 1
        print("torch_guard: torch unchanged")
    else:
        print(json.dumps(versions(a.dir, a.base_image), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
