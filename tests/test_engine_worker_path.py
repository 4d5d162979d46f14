"""Does the engine worker import the engine env's own packages, with vlmpath installed
non-editable beside the host's torch?

Installed non-editable (as in the images), vlmpath sits in the host's site-packages next
to the host's torch. The worker's path must hold vlmpath *alone*: were the directory
vlmpath sits in put on it, the engine env would import the host's torch (seen: a Python
3.11 engine env loading a 3.12 torch and failing; on the same Python the leak passes
silently). Here the host's "site-packages" holds vlmpath and a marker ``torch`` (version
``host-leak``); the engine env holds its own torch. A host process with only that
directory on its path builds the worker's environment (``engine_run.worker_env``) and
runs the engine env's python in it:

- fast: vlmpath *copied* into the directory, and a temporary venv whose own ``torch`` is a
  marker (``engine-own``); the planted old rule (vlmpath's parent directory on the path)
  shows ``host-leak``, the real one ``engine-own``;
- e2e: vlmpath really installed (``pip install --no-deps --target``) and the real sglang
  engine env (its torch 2.13): the probe imports the env's torch, and a real worker run
  through ``measure_cases`` from the non-editable install measures a case at accuracy 1.0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "vlmpath"

PROBE = """
import json, os, subprocess, sys
from pathlib import Path
import vlmpath
from vlmpath.engines.base import EngineSpec
from vlmpath.suite import engine_run
site, engine_python, mode = sys.argv[1:4]
assert Path(vlmpath.__file__).resolve().is_relative_to(Path(site).resolve()), vlmpath.__file__
if mode == "old":  # the rule this test exists to catch: the directory vlmpath is installed in
    engine_run.vlmpath_src = lambda: Path(vlmpath.__file__).resolve().parent.parent
env = engine_run.worker_env(EngineSpec.parse("reference"), base={k: v for k, v in os.environ.items()
                                                             if k != "PYTHONPATH"})
code = ("import json, os, sys, torch, vlmpath; print(json.dumps([torch.__version__, torch.__file__, "
        "os.path.realpath(vlmpath.__file__), sys.path]))")  # realpath while the link exists
out = subprocess.run([engine_python, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
print(out)
"""


def marker_torch(directory: Path, version: str) -> None:
    (directory / "torch").mkdir(parents=True)
    (directory / "torch" / "__init__.py").write_text(f"__version__ = {version!r}\n")


def host_site(tmp_path: Path) -> Path:
    """A host 'site-packages': a copy of vlmpath (non-editable) and the host's marker torch."""
    site = tmp_path / "site-packages"
    shutil.copytree(PACKAGE, site / "vlmpath", ignore=shutil.ignore_patterns("__pycache__"))
    marker_torch(site, "host-leak")
    return site


def probe(site: Path, engine_python: str, mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)  # the host process sees vlmpath only where it is installed
    out = subprocess.run([sys.executable, "-c", PROBE, str(site), engine_python, mode], env=env,
                         capture_output=True, text=True, cwd=site.parent)
    assert out.returncode == 0, out.stderr
    version, torch_file, vlmpath_file, path = json.loads(out.stdout)
    return {"torch": version, "torch_file": torch_file, "vlmpath": vlmpath_file, "path": path}


def test_engine_env_imports_its_own_torch_with_vlmpath_installed_beside_the_hosts(tmp_path):
    site = host_site(tmp_path)
    engine = tmp_path / "engine-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(engine)], check=True)
    (own,) = engine.glob("lib/python*/site-packages")
    marker_torch(own, "engine-own")
    py = str(engine / "bin" / "python")

    got = probe(site, py, "new")
    assert got["torch"] == "engine-own" and got["torch_file"].startswith(str(engine))
    assert Path(got["vlmpath"]).resolve().is_relative_to(site.resolve())  # this vlmpath, through the link
    assert str(site) not in got["path"]  # the host's site-packages is not on the path at all
    assert probe(site, py, "old")["torch"] == "host-leak"  # the planted old rule: the leak, seen


@pytest.mark.e2e
def test_real_install_and_the_real_engine_env_measure_with_its_own_torch(tmp_path):
    from vlmpath.engines import envs

    env = envs.env_for_tests("sglang")
    if env is None:
        pytest.skip("no complete sglang engine environment: run `vlmpath engine install sglang==0.5.23`")
    site = tmp_path / "site-packages"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "--target", str(site), str(ROOT)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    assert not (site / "vlmpath" / "__editable__").exists() and (site / "vlmpath" / "engines").is_dir()
    marker_torch(site, "host-leak")

    got = probe(site, str(env.python), "new")
    assert got["torch_file"].startswith(str(env.path)) and got["torch"] != "host-leak", got
    assert Path(got["vlmpath"]).resolve().is_relative_to(site.resolve())

    # A real worker run from the non-editable install (the host plans the cases with its
    # own torch: the marker goes).
    shutil.rmtree(site / "torch")
    code = ("from vlmpath.suite.engine_run import measure_cases; "
            "from vlmpath.suite.measure import plan_cases; from vlmpath.suite.record import dumps_record; "
            "r, = measure_cases(plan_cases(workloads=['few_large_images'], pipelines=['default']), "
            f"{env.spec.label!r}, repeat=1, count=False); print(dumps_record(r))")
    host_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", code], env=dict(host_env, PYTHONPATH=str(site)),
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    rec = json.loads(run.stdout.strip().splitlines()[-1])
    assert rec["error"] is None and rec["accuracy"] == 1.0 and rec["engine"] == env.spec.label, rec["error"]
