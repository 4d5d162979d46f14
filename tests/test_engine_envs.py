"""Are engine environments complete or invisible, and do two installs of one never race?

- An environment counts only when its manifest, written last, says it is complete for
  that release: a half-installed one (interpreter but no manifest, a manifest saying
  otherwise, or another release's manifest) is listed as incomplete with the repair
  command, skipped by the newest-environment lookups and refused by ``--engine`` (exit 2,
  naming ``vlmpath engine install``).
- An install that fails leaves no manifest (so: incomplete); the next install repairs it;
  an install of a complete env runs no step.
- Two real processes installing the same release (the toy engine's cheap fake installer,
  held open by a gate file) are serialized by the lock: the second waits, then finds the
  env complete and runs nothing; meanwhile the env is "being installed" and refused. With
  the lock planted away, the two installs overlap.
- The adapter tests' environment: ``VLMPATH_ENGINE_INSTALL``'s release when it names one
  of the engine's (refused when incomplete), else the newest complete one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toy_engine import write_toy

from vlmpath.cli import main
from vlmpath.core.errors import EngineError
from vlmpath.engines import envs
from vlmpath.engines.base import EngineSpec


def plant(home: Path, label: str, manifest: dict | None) -> Path:
    name, version = label.split("==")
    d = home / f"{name}-{version}"
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "python").write_text("")
    if manifest is not None:
        (d / envs.MANIFEST).write_text(json.dumps(manifest))
    return d


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "engines"
    plant(h, "sglang==0.5.14", {"engine": "sglang==0.5.14", "complete": True, "disk_bytes": 2**30})
    plant(h, "sglang==0.5.23", None)                                              # interrupted
    plant(h, "sglang==0.6.0", {"engine": "sglang==0.6.0", "complete": False})     # said so
    plant(h, "sglang==0.7.0", {"engine": "sglang==0.5.14", "complete": True})     # another's manifest
    return h


def test_incomplete_envs_are_listed_as_such_with_the_repair_command(home, capsys):
    assert main(["engine", "list", "--home", str(home)]) == 0
    rows = {ln.split("\t")[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert rows["sglang==0.5.14"].endswith("\tcomplete")
    for label in ("sglang==0.5.23", "sglang==0.6.0", "sglang==0.7.0"):
        assert f"incomplete\t(repair: vlmpath engine install {label})" in rows[label]


def test_lookups_skip_incomplete_envs(home):
    assert envs.newest_env(home).spec.label == "sglang==0.5.14"
    assert envs.newest_env(home, "sglang").spec.label == "sglang==0.5.14"
    assert envs.newest_env(home, "vllm") is None
    assert [e.spec.version for e in envs.list_envs(home, complete_only=True)] == ["0.5.14"]


@pytest.mark.parametrize("label", ["sglang==0.5.23", "sglang==0.6.0", "sglang==0.7.0"])
def test_engine_refuses_an_incomplete_env_with_the_repair_command(home, label, capsys):
    with pytest.raises(EngineError, match="is incomplete"):
        envs.require_env(EngineSpec.parse(label), home)
    assert main(["measure", "--engine", label, "--engine-home", str(home), "--workload", "multi_region"]) == 2
    err = capsys.readouterr().err
    assert "is incomplete" in err and f"run `vlmpath engine install {label}` to repair it" in err


def test_adapter_tests_run_the_named_release_else_the_newest_complete(home, monkeypatch):
    monkeypatch.delenv(envs.INSTALL_ENV, raising=False)
    assert envs.env_for_tests("sglang", home).spec.label == "sglang==0.5.14"
    monkeypatch.setenv(envs.INSTALL_ENV, "sglang==0.5.14")
    assert envs.env_for_tests("sglang", home).spec.label == "sglang==0.5.14"
    monkeypatch.setenv(envs.INSTALL_ENV, "sglang==0.5.23")  # named but incomplete: refused, not skipped
    with pytest.raises(EngineError, match="vlmpath engine install sglang==0.5.23"):
        envs.env_for_tests("sglang", home)
    monkeypatch.setenv(envs.INSTALL_ENV, "reference")  # not a release of this engine: the newest
    assert envs.env_for_tests("sglang", home).spec.label == "sglang==0.5.14"


# --- installs: failure, repair, reuse, the lock (the toy engine's fake installer) -----------
@pytest.fixture
def toy(tmp_path, monkeypatch):
    plug = write_toy(tmp_path / "toy")
    monkeypatch.syspath_prepend(str(plug))
    yield plug
    sys.modules.pop("toy_vlmpath", None)


def test_a_failed_install_stays_incomplete_and_the_next_one_repairs_it(toy, tmp_path, monkeypatch):
    home, log = tmp_path / "engines", tmp_path / "steps.log"
    monkeypatch.setenv("TOY_LOG", str(log))
    monkeypatch.setenv("TOY_FAIL", "1")  # everything in place, then the last step fails
    with pytest.raises(EngineError, match=r"the toy installer failed \(RuntimeError: toy: the last step "
                       r"failed\); the environment stays incomplete: run the same command again to repair it"):
        envs.install(EngineSpec.parse("toy==1.0"), home, log=lambda m: None)
    env = envs.env_for(EngineSpec.parse("toy==1.0"), home)
    assert env.python.exists() and env.state == "incomplete"
    monkeypatch.delenv("TOY_FAIL")
    envs.install(EngineSpec.parse("toy==1.0"), home, log=lambda m: None)
    assert env.state == "complete" and env.manifest["steps"][0]["step"] == "toy"
    said: list[str] = []
    envs.install(EngineSpec.parse("toy==1.0"), home, log=said.append)  # complete: no step runs
    assert log.read_text().split()[::2] == ["start", "start", "end"]
    assert "already installed" in said[0]


CHILD = """
import sys
from contextlib import contextmanager
from vlmpath.engines import envs
from vlmpath.engines.base import EngineSpec
if sys.argv[2] == "nolock":  # the mistake the lock exists to catch
    @contextmanager
    def no_lock(env, log=print):
        yield
    envs.install_lock = no_lock
envs.install(EngineSpec.parse("toy==1.0"), sys.argv[1], log=lambda m: print(m, flush=True))
"""


def wait_for(cond, what: str, procs, timeout: float = 180) -> None:
    """Poll ``cond`` (a state, never a duration, decides); fail naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in procs):
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.02)


def two_installs(tmp_path: Path, plug: Path, mode: str) -> tuple[list[str], str, list[subprocess.Popen]]:
    """Install A held open by the gate, then install B; open the gate once B waits (or,
    unlocked, has started its own install); returns the step log, B's output, the procs."""
    home, log, gate = tmp_path / f"engines-{mode}", tmp_path / f"{mode}.log", tmp_path / f"{mode}.gate"
    env = dict(os.environ, TOY_LOG=str(log), TOY_GATE=str(gate),
               PYTHONPATH=os.pathsep.join([str(plug), *filter(None, [os.environ.get("PYTHONPATH")])]))
    lines = lambda: log.read_text().splitlines() if log.exists() else []  # noqa: E731
    outs = [tmp_path / f"{mode}-{n}.out" for n in "ab"]
    procs: list[subprocess.Popen] = []
    try:
        for out in outs:
            with open(out, "w") as f:
                procs.append(subprocess.Popen([sys.executable, "-c", CHILD, str(home), mode], env=env,
                                              stdout=f, stderr=subprocess.STDOUT))
            if len(procs) == 1:
                wait_for(lambda: any(x == f"start {procs[0].pid}" for x in lines()), "start of install A", procs)
        wait_for(lambda: "waiting for it" in outs[1].read_text() or len(lines()) >= 2,
                 "sign of install B (waiting, or started)", procs)
        if mode == "lock":  # meanwhile the env is incomplete, seen as being installed, refused
            env = envs.env_for(EngineSpec.parse("toy==1.0"), home)
            assert env.state == "incomplete" and envs.installing(env)
            with pytest.raises(EngineError, match="is being installed by another process: wait for it"):
                envs.require_env(env.spec, home)
        gate.mkdir()
        for p in procs:
            rc = p.wait(timeout=180)
            # Unlocked, the two installs may trip over each other's files (that is the race
            # the lock exists to stop), so only the locked pair must both succeed.
            assert rc == 0 or mode == "nolock", (outs[0].read_text(), outs[1].read_text())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return lines(), outs[1].read_text(), procs


def test_two_concurrent_installs_of_one_env_are_serialized(toy, tmp_path):
    steps, b_out, (a, b) = two_installs(tmp_path, toy, "lock")
    assert steps == [f"start {a.pid}", f"end {a.pid}"]  # B's installer never ran
    assert "another install holds" in b_out and "already installed" in b_out
    assert json.loads((tmp_path / "engines-lock" / "toy-1.0" / envs.MANIFEST).read_text())["complete"] is True
    assert not envs.installing(envs.env_for(EngineSpec.parse("toy==1.0"), tmp_path / "engines-lock"))


def test_without_the_lock_the_two_installs_overlap(toy, tmp_path):
    steps, b_out, (a, b) = two_installs(tmp_path, toy, "nolock")
    assert steps[:2] == [f"start {a.pid}", f"start {b.pid}"]  # both inside the install at once
    assert "already installed" not in b_out
