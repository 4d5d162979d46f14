"""Does ``ci/setup.sh`` ask for the CPU build of torch when no local build is present?

A bare ``torch==2.13.0`` from PyPI is the multi-GB CUDA build on a hosted runner; the
script's comment promised the CPU build, which it got only from a local wheel directory.
``VLMPATH_SETUP_DRY_RUN=1`` prints the pip command the script would run (and stops); the
environment decides which: no local wheel -> the PyTorch CPU index, a local wheel in the
configured find-links -> that one, and ``VLMPATH_TORCH_INDEX`` overrides both.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
pytestmark = pytest.mark.e2e


def _python_without_torch(tmp_path: Path) -> str:
    # A venv with pip and without site packages: no torch, so the script would install one.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    return str(venv / "bin" / "python")


def _dry_run(tmp_path: Path, find_links: Path, **extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VLMPATH_"))}
    # Only what the test configures: no user/global pip config, find-links = find_links.
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": str(find_links),
            "VLMPATH_SETUP_DRY_RUN": "1", "PYTHON": sys.executable, **extra}
    r = subprocess.run(["bash", str(ROOT / "ci" / "setup.sh")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _fake_torch_wheel(where: Path) -> None:
    """A minimal valid wheel named torch 2.13.0 (pip resolves it from its metadata)."""
    name = "torch-2.13.0.dist-info"
    files = {f"{name}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n",
             f"{name}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(t.encode())}\n" for p, t in files.items()) + f"{name}/RECORD,,\n"
    with zipfile.ZipFile(where / "torch-2.13.0-py3-none-any.whl", "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
        z.writestr(f"{name}/RECORD", record)


@pytest.fixture(scope="module")
def no_torch_python(tmp_path_factory):
    if shutil.which("bash") is None:
        pytest.skip("bash is needed")
    return _python_without_torch(tmp_path_factory.mktemp("py"))


def test_no_local_build_asks_the_cpu_index(tmp_path, no_torch_python):
    (tmp_path / "empty").mkdir()
    out = _dry_run(tmp_path, tmp_path / "empty", PYTHON=no_torch_python)
    assert out == f"setup: would run: pip install --index-url {CPU_INDEX} torch==2.13.0"


def test_a_local_build_in_find_links_is_used(tmp_path, no_torch_python):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _fake_torch_wheel(wheels)
    out = _dry_run(tmp_path, wheels, PYTHON=no_torch_python)
    assert out == "setup: would run: pip install torch==2.13.0"


def test_the_index_override(tmp_path, no_torch_python):
    (tmp_path / "empty").mkdir()
    assert _dry_run(tmp_path, tmp_path / "empty", PYTHON=no_torch_python, VLMPATH_TORCH_INDEX="local") == \
        "setup: would run: pip install torch==2.13.0"
    assert _dry_run(tmp_path, tmp_path / "empty", PYTHON=no_torch_python,
                    VLMPATH_TORCH_INDEX="https://example.org/whl") == \
        "setup: would run: pip install --index-url https://example.org/whl torch==2.13.0"
