"""Does the adapter run sglang's embedding path inside the state sglang's own server holds at TP=1?

A released sglang (the engine environment the adapter tests use) is run from a tree whose
``embed_mm_inputs`` asks what code in that path may ask a server: the tensor-parallel world
size and group (``get_tensor_model_parallel_world_size()``, ``get_tp_group()``). With the
adapter's set-up (``sglang_server_state``) every item is placed (accuracy 1.0) and no case
fails; the same tree run without it (``VLMPATH_ENGINE_FAULT=*:bare``) fails on every
step that reaches the engine's function, with sglang's own assertion: the set-up is what
makes the difference. The server state is also taken down cleanly (``close``).
"""

from __future__ import annotations

import re
import subprocess

import pytest
from engine_adapter_env import engine_env_fixture
from engine_tree import patched_tree

from vlmpath.engines.base import EngineSpec
from vlmpath.suite.engine_run import measure_cases
from vlmpath.suite.measure import plan_cases

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

engine_env = engine_env_fixture("sglang", "0.5.23")
WORKLOADS = ["many_small_images", "mixed"]  # cross-request steps; image and video
SIGNATURE_END = re.compile(r"^def embed_mm_inputs\(.*?^\)[^\n]*:\n", re.M | re.S)
QUERY = ("    from sglang.srt.distributed.parallel_state import get_tensor_model_parallel_world_size, "
         "get_tp_group  # vlmpath test\n"
         "    if get_tensor_model_parallel_world_size() != get_tp_group().world_size:  # vlmpath test\n"
         "        raise RuntimeError('inconsistent TP group')\n")


def plant_tp_query(text: str) -> str:
    m = SIGNATURE_END.search(text)
    assert m is not None, "embed_mm_inputs' signature not found in mm_utils.py"
    return text[:m.end()] + QUERY + text[m.end():]


def _package_dir(python) -> str:
    code = "import importlib.util as u; print(list(u.find_spec('sglang').submodule_search_locations)[0])"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def tp_query_tree(engine_env, tmp_path_factory):
    from pathlib import Path

    return patched_tree(Path(_package_dir(engine_env.python)), tmp_path_factory.mktemp("sglang-tp"),
                        {"srt/managers/mm_utils.py": plant_tp_query})


def _measure(tree, engine_env):
    cases = plan_cases(workloads=WORKLOADS, pipelines=["default"])
    return {r.workload: r for r in measure_cases(cases, EngineSpec.parse("sglang", src=str(tree)), repeat=1,
                                                  count=False, python=str(engine_env.python))}


@pytest.mark.timeout(900)
def test_a_tp_query_in_the_embed_path_runs_as_in_a_tp1_server_and_fails_without_the_set_up(
        tp_query_tree, engine_env, monkeypatch):
    served = _measure(tp_query_tree, engine_env)
    for w, r in served.items():
        assert r.error is None and r.failed_steps == 0, (w, r.error)
        assert r.accuracy == 1.0 and r.placed == r.items > 0, w
        assert r.engine_seams["server_state"].startswith(("runtime_context", "set_global", "global_server")), \
            r.engine_seams["server_state"]
        assert "groups(tp=1,gloo)" in r.engine_seams["server_state"]
    monkeypatch.setenv("VLMPATH_ENGINE_FAULT", "*:bare")
    bare = _measure(tp_query_tree, engine_env)
    for w, r in bare.items():
        # sglang's own refusal: "... is not initialized" (0.5.1x), "... has not been written in
        # this process" (0.5.23's runtime context)
        assert r.error is not None and re.search(r"not (been )?(initialized|written)", r.error), (w, r.error)
        assert r.accuracy < 1.0 and r.failed_steps > 0, w
        assert r.engine_seams["server_state"] == "none (planted: bare)"
    print(f"FIGURE server state: with it {[(w, r.accuracy) for w, r in served.items()]}; "
          f"bare {[(w, r.error) for w, r in bare.items()]}")


TEARDOWN = r'''
import importlib, sys, torch
from vlmpath.suite.worker import load_engine
e = load_engine(sys.argv[1])  # imports the release (after vlmpath's torchvision shim)
ps = importlib.import_module(sys.argv[2])
before = ps.model_parallel_is_initialized(), torch.distributed.is_initialized()
e.ensure_server_state(torch.device("cpu"))
during = ps.get_tensor_model_parallel_world_size(), ps.get_tp_group().world_size, e.seams["server_state"]
e.close()
after = ps.model_parallel_is_initialized(), torch.distributed.is_initialized(), "server_state" in e.seams
if sys.argv[1].startswith("sglang"):
    from sglang.srt import runtime_context as rc
    published = rc.get_context()._server_args is not None
else:
    from vllm.config import get_current_vllm_config_or_none as current
    published = current() is not None
print(repr((before, during, after, published)))
'''


@pytest.mark.parametrize("name,module", [("sglang", "sglang.srt.distributed.parallel_state"),
                                         ("vllm", "vllm.distributed.parallel_state")])
def test_the_server_state_is_taken_down_and_the_globals_restored(name, module):
    from vlmpath.engines import envs
    from vlmpath.suite.engine_run import vlmpath_src

    env = envs.env_for_tests(name)
    if env is None:
        pytest.skip(f"no complete {name} engine environment: `vlmpath engine install {name}==X`")
    r = subprocess.run([str(env.python), "-c", TEARDOWN, env.spec.label, module], capture_output=True, text=True,
                       env={"PYTHONPATH": str(vlmpath_src()), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-3000:]
    before, during, after, published = eval(r.stdout.strip().splitlines()[-1])
    assert before == (False, False)
    assert during[:2] == (1, 1) and "groups(tp=1,gloo)" in during[2], during
    assert after == (False, False, False)
    assert published is False  # the process's own context / current config is as it was
