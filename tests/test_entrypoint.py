"""Does docker/entrypoint.sh do what the container needs, run on a CPU host?

The script is run end to end in a temporary directory laid out like the container
(repository, results volume, HOME, image metadata), with every path given by environment
variables. A fake ``vlmpath`` first on PATH records each call (argv and environment), so
the tests see exactly what the container would run without running asv; one test calls
the real ``vlmpath info``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
ENV_KEYS = ("VLMPATH_RESULTS_DIR", "VLMPATH_HTML_DIR", "VLMPATH_MACHINE", "PYTHONPATH",
            "ASV_PYTHONPATH")

FAKE_VLMPATH = """#!{python}
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps({{"argv": sys.argv[1:],
                         "env": {{k: os.environ.get(k) for k in {keys!r}}}}}) + "\\n")
if sys.argv[1:2] == ["info"]:
    print("fake fingerprint")
sub = sys.argv[1] if len(sys.argv) > 1 else ""
sys.exit(int(os.environ.get("FAKE_RC_" + sub.replace("-", "_"), "0")))
"""

FAKE_PYTHON = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_PY_LOG"
exit 0
"""


class Box:
    """A temporary container-like layout plus a runner for the entrypoint."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.repo = tmp / "workspace"
        (self.repo / "src" / "vlmpath").mkdir(parents=True)
        (self.repo / "pyproject.toml").write_text("[project]\nname = 'vlmpath'\n")
        subprocess.run(["git", "init", "-q", str(self.repo)], check=True)
        self.home = tmp / "home"
        self.home.mkdir()
        self.results = tmp / "results"
        self.image = tmp / "opt-vlmpath"  # absent unless a test creates it
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.log = tmp / "calls.jsonl"
        fake = self.bin / "vlmpath"
        fake.write_text(FAKE_VLMPATH.format(python=sys.executable, keys=ENV_KEYS))
        fake.chmod(0o755)
        self.py_log = tmp / "python-calls.txt"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "VLMPATH_REPO": str(self.repo),
            "VLMPATH_RESULTS_DIR": str(self.results / "asv"),
            "VLMPATH_HTML_DIR": str(self.results / "html"),
            "VLMPATH_IMAGE_DIR": str(self.image),
            "VLMPATH_PYTHON": sys.executable,
            "FAKE_LOG": str(self.log),
            "FAKE_PY_LOG": str(self.py_log),
        }
        env.update(extra)
        return env

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(ENTRYPOINT), *args], env=self.env(**extra),
                              cwd=self.repo, capture_output=True, text=True, timeout=120)

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def argvs(self) -> list[list[str]]:
        return [c["argv"] for c in self.calls()]

    def fake_python(self) -> str:
        py = self.bin / "fake-python"
        py.write_text(FAKE_PYTHON)
        py.chmod(0o755)
        return str(py)


@pytest.fixture
def box(tmp_path) -> Box:
    return Box(tmp_path)


def test_default_is_run_into_the_results_volume_after_the_fingerprint(box):
    r = box.run()
    assert r.returncode == 0, r.stderr
    asv, html = str(box.results / "asv"), str(box.results / "html")
    assert box.argvs() == [["info"], ["run", "--results-dir", asv, "--html-dir", html]]
    assert (box.results / "asv").is_dir() and (box.results / "html").is_dir()
    # fingerprint on stderr, stdout left to the command
    assert "fake fingerprint" in r.stderr and "platform fingerprint" in r.stderr
    env = box.calls()[-1]["env"]
    assert env["VLMPATH_RESULTS_DIR"] == asv and env["VLMPATH_HTML_DIR"] == html
    # the mounted checkout's code wins, also inside asv's benchmark processes
    assert env["PYTHONPATH"].split(":")[0] == str(box.repo / "src")
    assert env["ASV_PYTHONPATH"].split(":")[0] == str(box.repo / "src")


def test_results_dirs_default_to_the_volume(box):
    env = box.env()
    del env["VLMPATH_RESULTS_DIR"], env["VLMPATH_HTML_DIR"]
    # "info" creates nothing, so the defaults can be checked on a host without /results
    r = subprocess.run(["bash", str(ENTRYPOINT), "info"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    call = box.calls()[-1]
    assert call["env"]["VLMPATH_RESULTS_DIR"] == "/results/asv"
    assert call["env"]["VLMPATH_HTML_DIR"] == "/results/html"


def test_options_alone_mean_run_and_machine_name_is_passed(box):
    r = box.run("--quick", "--bench", "inject", VLMPATH_MACHINE="cuda-local")
    assert r.returncode == 0, r.stderr
    argv = box.argvs()[-1]
    assert argv[:4] == ["run", "--quick", "--bench", "inject"]
    assert argv[argv.index("--machine") + 1] == "cuda-local"
    assert box.calls()[-1]["env"]["VLMPATH_MACHINE"] == "cuda-local"


def test_explicit_run_options_are_not_overridden(box):
    r = box.run("run", "--results-dir=/elsewhere", "--machine", "mine", VLMPATH_MACHINE="cuda-local")
    assert r.returncode == 0, r.stderr
    argv = box.argvs()[-1]
    assert argv.count("--machine") == 1 and "cuda-local" not in argv
    assert not any(a == "--results-dir" for a in argv)
    assert "--html-dir" in argv


@pytest.mark.parametrize("args,expected", [
    (["compare", "abc123", "def456"], ["compare", "abc123", "def456"]),
    (["vlmpath", "report"], ["report"]),
    (["measure", "--scale", "tiny"], ["measure", "--scale", "tiny"]),
])
def test_any_vlmpath_command_passes_through(box, args, expected):
    r = box.run(*args)
    assert r.returncode == 0, r.stderr
    assert box.argvs() == [["info"], expected]


def test_info_and_serve_are_not_fingerprinted_twice(box):
    assert box.run("info").returncode == 0
    assert box.run("serve", "--bind", "0.0.0.0", "--port", "8080").returncode == 0
    assert box.argvs() == [["info"], ["serve", "--bind", "0.0.0.0", "--port", "8080"]]


def test_exit_status_is_the_commands(box):
    r = box.run("compare", "a", "b", FAKE_RC_compare="3")
    assert r.returncode == 3


def test_failing_fingerprint_stops_before_the_command(box):
    r = box.run(FAKE_RC_info="1")
    assert r.returncode == 2
    assert "'vlmpath info' failed" in r.stderr
    assert box.argvs() == [["info"]]


def test_bash_is_exec_d_with_the_checkout_on_the_path(box):
    r = box.run("bash", "-c", 'echo "pp=$PYTHONPATH"')
    assert r.returncode == 0, r.stderr
    assert f"pp={box.repo / 'src'}" in r.stdout
    assert box.calls() == []


def test_repository_is_git_safe_for_its_processes_and_no_config_file_is_written(box):
    gitconfig = box.home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = host user\n")
    before = gitconfig.read_bytes()
    r = box.run("bash", "-c", "git config --get-all safe.directory")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(box.repo)]
    assert box.run("info").returncode == 0
    assert gitconfig.read_bytes() == before  # the host user's own file, untouched
    assert not (box.home / ".config" / "git").exists()
    # Already marked by an outer entrypoint (nested run): not added twice.
    r = box.run("bash", "-c", "git config --get-all safe.directory", GIT_CONFIG_COUNT="1",
                GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0=str(box.repo))
    assert r.stdout.splitlines() == [str(box.repo)]


def _image_dir(box: Box, pyproject_hash: str, constraints: bool = True) -> None:
    box.image.mkdir()
    (box.image / "pyproject.sha256").write_text(pyproject_hash + "\n")
    if constraints:
        (box.image / "constraints.txt").write_text("torch==2.8.0\n")
    (box.image / "torch_guard.py").write_text("# stand-in\n")


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_changed_pyproject_is_reinstalled_under_the_torch_constraint(box):
    _image_dir(box, "0" * 64)
    r = box.run("info", VLMPATH_PYTHON=box.fake_python())
    assert r.returncode == 0, r.stderr
    calls = box.py_log.read_text().splitlines()
    pip = [c for c in calls if c.startswith("-m pip install")]
    assert len(pip) == 1
    assert f"--constraint {box.image / 'constraints.txt'} {box.repo}" in pip[0]
    assert "torch" not in pip[0].replace("constraints", "")
    assert f"{box.image / 'torch_guard.py'} verify {box.image}" in calls[-1]


def test_unchanged_pyproject_is_not_reinstalled(box):
    _image_dir(box, _sha256(box.repo / "pyproject.toml"))
    r = box.run("info", VLMPATH_PYTHON=box.fake_python())
    assert r.returncode == 0, r.stderr
    assert not box.py_log.exists()


def test_install_refuses_without_a_constraint(box):
    _image_dir(box, "0" * 64, constraints=False)
    r = box.run("info", VLMPATH_PYTHON=box.fake_python())
    assert r.returncode == 2
    assert "refusing to run pip" in r.stderr
    assert not box.py_log.exists()
    assert box.calls() == []


# A python that answers the entrypoint's two questions as a test says: is this a virtual
# environment (FAKE_VENV) and is its site-packages writable (FAKE_WRITABLE)?
FAKE_VENV_PYTHON = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_PY_LOG"
case "$*" in
  *"sys.prefix == sys.base_prefix"*) [ "$FAKE_VENV" = 1 ] && exit 0 || exit 1 ;;
  *purelib*) [ "$FAKE_WRITABLE" = 1 ] && exit 0 || exit 1 ;;
  *"print(sys.prefix)"*) echo /opt/venv ;;
esac
exit 0
"""


@pytest.mark.parametrize("venv, writable, user, rc", [
    ("1", "1", False, 0),   # rocm/pytorch: Python in a writable venv -> no --user
    ("0", "0", True, 0),    # the image's system site-packages, non-root -> --user
    ("0", "1", False, 0),
    ("1", "0", False, 2),   # a venv we cannot write: one clear error, no pip
])
def test_install_inside_a_virtual_environment_never_uses_user(box, venv, writable, user, rc):
    _image_dir(box, "0" * 64)
    py = box.bin / "venv-python"
    py.write_text(FAKE_VENV_PYTHON)
    py.chmod(0o755)
    r = box.run("info", VLMPATH_PYTHON=str(py), FAKE_VENV=venv, FAKE_WRITABLE=writable)
    assert r.returncode == rc, r.stderr
    pip = [c for c in box.py_log.read_text().splitlines() if c.startswith("-m pip install")]
    if rc:
        assert pip == [] and "virtual environment (/opt/venv) is not writable" in r.stderr
    else:
        assert len(pip) == 1 and ("--user" in pip[0]) == user


def test_bad_install_mode_is_rejected(box):
    r = box.run("info", VLMPATH_INSTALL="sometimes")
    assert r.returncode == 2
    assert "VLMPATH_INSTALL=sometimes" in r.stderr


@pytest.mark.e2e
def test_entrypoint_passes_shellcheck():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dockerlint", Path(__file__).with_name("dockerlint.py"))
    dl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dl)
    tool = dl.find_tool("shellcheck")
    if tool is None:
        pytest.fail("shellcheck is not installed; run: pip install -r ci/requirements-lint.txt")
    r = subprocess.run([tool, str(ENTRYPOINT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


@pytest.mark.e2e
def test_real_vlmpath_info_through_the_entrypoint(tmp_path):
    import torch

    box = Box(tmp_path)
    shutil.rmtree(box.repo / "src")
    shutil.copytree(ROOT / "src", box.repo / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = box.env(PATH="/usr/local/bin:/usr/bin:/bin")
    installed = Path(sys.executable).parent / "vlmpath"
    if installed.is_file():
        env["VLMPATH_BIN"] = str(installed)  # the venv's console script
    # else: the entrypoint falls back to "$VLMPATH_PYTHON -m vlmpath.cli"
    env.pop("PYTHONPATH", None)
    r = subprocess.run(["bash", str(ENTRYPOINT), "info"], env=env, cwd=box.repo,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert torch.__version__ in r.stdout
