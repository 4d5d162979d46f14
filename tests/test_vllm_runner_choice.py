"""Which of vLLM's model runners does the adapter drive, and is a runner a release lacks refused?

Without vLLM (fast): ``vllm_runner_choice`` over a stand-in ``vllm`` whose
``VllmConfig.use_v2_model_runner`` answers as 0.33's does: the server's choice is the
property's answer (never a second copy of its rule), the why names the input that decided;
a release before the property reads ``VLLM_USE_V2_MODEL_RUNNER`` (v2 opt-in); a release with
one runner drives it; asking for a runner the release lacks is one line naming the release
and the runners it has, refused by the worker before any case and by the CLI with exit 2
(a stand-in worker); the runner is the option ``runner`` of vLLM's registry entry (its own
flag ``--vllm-runner``, or ``--engine-option runner=X``), and asking it of an engine that does
not declare it (sglang, the reference) is refused in one line; the table and the engine
flow's ``measured by`` show the runner.
"""

from __future__ import annotations

import stat
import sys
import types
from types import SimpleNamespace

import pytest

from vlmpath.cli import main
from vlmpath.core.errors import EngineOptionError, VlmpathError
from vlmpath.engines.vllm_runner_choice import choose

BOTH = SimpleNamespace(runners=("v1", "v2"), version="9.9.9")


def fake_vllm(monkeypatch, *, triton: bool, env=None, unsupported=(), prop: bool = True, answer=None):
    """A stand-in ``vllm`` (config, envs, triton_utils) whose property answers as 0.33's does,
    or ``answer`` when given (an input this module does not read decided)."""
    def use_v2(self):
        if answer is not None:
            return answer
        if env is not None:
            return env
        return bool(triton) and not unsupported

    cfg = type("VllmConfig", (), {"_get_v2_model_runner_unsupported_features": lambda self: list(unsupported)})
    if prop:
        cfg.use_v2_model_runner = property(use_v2)
    mods = {"vllm": types.ModuleType("vllm"), "vllm.config": types.ModuleType("vllm.config"),
            "vllm.envs": types.ModuleType("vllm.envs"), "vllm.triton_utils": types.ModuleType("vllm.triton_utils")}
    mods["vllm.config"].VllmConfig = cfg
    mods["vllm.envs"].VLLM_USE_V2_MODEL_RUNNER = env if prop else bool(env)
    mods["vllm.triton_utils"].HAS_TRITON = triton
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
        if "." in name:
            setattr(mods["vllm"], name.split(".")[1], mod)


@pytest.mark.parametrize("kw, want", [
    (dict(triton=False), ("v1", "server's choice: no Triton")),
    (dict(triton=True), ("v2", "server's choice: its default")),
    (dict(triton=True, unsupported=["speculative method 'suffix'"]),
     ("v1", "server's choice: v2 lacks speculative method 'suffix'")),
    (dict(triton=False, env=True), ("v2", "server's choice: VLLM_USE_V2_MODEL_RUNNER=1")),
    (dict(triton=True, env=False), ("v1", "server's choice: VLLM_USE_V2_MODEL_RUNNER=0")),
    (dict(triton=False, prop=False), ("v1", "server's choice: VLLM_USE_V2_MODEL_RUNNER unset: v2 is opt-in")),
    (dict(triton=False, prop=False, env=True), ("v2", "server's choice: VLLM_USE_V2_MODEL_RUNNER=1")),
])
def test_the_servers_choice_and_why(monkeypatch, kw, want):
    fake_vllm(monkeypatch, **kw)
    assert choose(BOTH, "server") == want


def test_the_property_decides_even_where_its_inputs_here_would_not(monkeypatch):
    fake_vllm(monkeypatch, triton=False, answer=True)  # e.g. HiSparse: v2 whatever Triton says
    assert choose(BOTH, "server") == ("v2", "server's choice: VllmConfig.use_v2_model_runner")


def test_an_asked_runner_is_driven_and_says_the_servers_choice(monkeypatch):
    fake_vllm(monkeypatch, triton=False)
    assert choose(BOTH, "v2") == ("v2", "asked: --vllm-runner v2; the server's choice here: v1")
    assert choose(BOTH, "v1") == ("v1", "asked: --vllm-runner v1; the server's choice here: v1")


def test_a_release_with_one_runner_drives_it_and_refuses_the_other():
    old = SimpleNamespace(runners=("v1",), version="0.11.1")
    assert choose(old, "server") == ("v1", "server's choice: its only runner in vllm 0.11.1")
    assert choose(old, "v1")[0] == "v1"
    with pytest.raises(EngineOptionError) as e:
        choose(old, "v2")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--vllm-runner v2: vllm 0.11.1 has no v2 model runner")
    assert "(it has v1)" in msg


def test_the_worker_refuses_an_engine_option_before_any_case(monkeypatch, capsys):
    from vlmpath.suite import worker

    def refuse(label, options, faults=None):
        assert options == {"runner": "v2"}  # the set's mapping, checked against vLLM's entry, untouched
        raise EngineOptionError(f"--vllm-runner {options['runner']}: vllm 0.11.1 has no v2 model runner (it has v1)")

    monkeypatch.setattr(worker, "load_engine", refuse)
    out = []
    job = {"engine": "vllm==0.11.1", "sets": [{"cases": [{"workload": "mixed", "pipeline": {}}], "engine_options": {"runner": "v2"}}]}
    (result,) = worker.run_job(job, [SimpleNamespace(write=out.append, flush=lambda: None)])
    assert result < 0
    assert out == []  # no failed record: bad input, not a result
    mark, line = capsys.readouterr().err.splitlines()
    assert mark == f"{worker.SET_LINE}1 of 1"
    assert line.startswith(worker.REFUSED) and "has no v2 model runner" in line


def test_the_worker_refuses_a_runner_choice_for_an_engine_without_runners():
    from vlmpath.suite.worker import load_engine

    with pytest.raises(EngineOptionError, match=r"^--engine-option runner=v1: engine sglang==0.5.23 has no "
                       r"option 'runner' \(it takes no engine options\); leave it out$"):
        load_engine("sglang==0.5.23", {"runner": "v1"})
    with pytest.raises(EngineOptionError, match=r"^--engine-option runner=servr: engine vllm's option 'runner' "
                       r"is one of server, v1, v2 \(did you mean 'server'\?\)$"):
        load_engine("vllm==0.33.0", {"runner": "servr"})  # refused before vLLM is imported


def _fake_worker(tmp_path, rc: int):
    """An engine python that answers every job with the worker's refusal line and ``rc``."""
    py = tmp_path / f"python-{rc}"
    py.write_text("#!/bin/sh\ncat >/dev/null\n"
                  "echo 'vlmpath worker refused: --vllm-runner v2: vllm 0.11.1 has no v2 model runner (it has v1)' >&2\n"
                  f"exit {rc}\n", encoding="utf-8")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return str(py)


def _tree(tmp_path):
    (tmp_path / "tree" / "vllm").mkdir(parents=True)  # a vLLM checkout's layout: its package at the root
    return str(tmp_path / "tree")


def test_a_refusing_worker_is_one_line_and_exit_2_at_the_cli(tmp_path, capsys):
    argv = ["measure", "--engine", "vllm", "--engine-src", _tree(tmp_path), "--vllm-runner", "v2",
            "--workload", "mixed", "--repeat", "1", "--engine-python", _fake_worker(tmp_path, 2)]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == ["vlmpath measure: error: --vllm-runner v2: vllm 0.11.1 has no v2 model runner (it has v1)"]


def test_the_refusal_line_alone_is_no_refusal_without_the_workers_exit_status(tmp_path):
    from vlmpath.engines.base import EngineSpec
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.measure import plan_cases

    (rec,) = measure_cases(plan_cases(workloads=["mixed"], pipelines=["default"]),
                           EngineSpec.parse("vllm", src=_tree(tmp_path)), python=_fake_worker(tmp_path, 1), repeat=1)
    assert rec.error and "exited with 1" in rec.error  # a crash: a failed case, not bad input


@pytest.mark.parametrize("flag", [["--vllm-runner", "v1"], ["--engine-option", "runner=v1"]])
@pytest.mark.parametrize("engine, why", [
    ("sglang==0.5.23", "engine sglang==0.5.23 has no option 'runner' (it takes no engine options); leave it out"),
    (None, "the reference routine takes no engine options; name an engine that declares 'runner' "
           "(--engine vllm==X)")])
def test_vllm_runner_with_another_engine_is_refused_at_the_cli(flag, engine, why, capsys):
    argv = ["measure", *flag, "--workload", "mixed"] + (["--engine", engine] if engine else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"vlmpath measure: error: --engine-option runner=v1: {why}"]


def test_the_table_and_the_engine_flow_show_the_runner_and_why():
    from vlmpath.compare.from_records import engines_of
    from vlmpath.render.tables import measure_table, pipeline_name
    from vlmpath.suite.record import CaseRecord

    seams = {"runner": "v1 (server's choice: no Triton)", "batching": "group_and_batch_mm_kwargs",
             "merge": "index_put", "mask": "host", "prepare": "trusts_scheduler"}
    r = CaseRecord(workload="mixed", scale="tiny", pipeline={}, engine="vllm==0.33.0", engine_version="0.33.0",
                   engine_seams=seams, accuracy=1.0)
    assert pipeline_name(r) == "runner=v1"
    assert "vllm==0.33.0: runner v1 (server's choice: no Triton)" in measure_table([r]).splitlines()
    assert engines_of([r]) == ["vllm==0.33.0 0.33.0 runner v1 (server's choice: no Triton)"]
    plain = CaseRecord(workload="mixed", scale="tiny", pipeline={}, engine="sglang==0.5.23",
                       engine_version="0.5.23", engine_seams={"scatter": "x"})
    assert pipeline_name(plain) == "-" and engines_of([plain]) == ["sglang==0.5.23 0.5.23"]
