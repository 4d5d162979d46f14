"""Does ``--tower engine`` run sglang's own Qwen2.5-VL vision tower, and see a change to it?

With a released sglang (the engine environment the adapter tests use):

- ``--tower engine`` (``engines.sglang_tower``: the release's ``Qwen2_5_VisionTransformer``
  with our tower's weights, through sglang's ``load_weights``) places every row of every
  preset the adapter drives (accuracy 1.0), recorded as the ``tower`` seam, with the same
  encoder calls as our tower;
- a cross-item leak planted in sglang's tower (``forward`` undoes the window permutation
  one row off: ``reverse_indices.roll(1)``, so a batched call hands each item a neighbour's
  first row) lowers ``many_small_images``' accuracy with ``--tower engine`` (golden rows come
  through the same tower one item at a time: a single item cannot show it) and is invisible
  with ``--tower ours`` (our tower never runs sglang's code): why ``--tower engine`` exists.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from engine_adapter_env import EVS, engine_env_fixture
from engine_tree import patched_tree

from vlmpath.engines.base import EngineSpec
from vlmpath.measure.presets import PATH_PRESETS, PRESETS
from vlmpath.suite.engine_run import measure_cases
from vlmpath.suite.measure import plan_cases

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

engine_env = engine_env_fixture("sglang", "0.5.23")
TOWER = "srt/models/qwen2_5_vl.py"
REVERSE = "x = x[reverse_indices, :]"
SEAM = "sglang.srt.models.qwen2_5_vl.Qwen2_5_VisionTransformer"


def leak(text: str) -> str:
    assert text.count(REVERSE) == 1, "Qwen2_5_VisionTransformer.forward changed: update the plant"
    return text.replace(REVERSE, "x = x[reverse_indices.roll(1), :]  # vlmpath test: a cross-item leak")


def _package_dir(python) -> Path:
    code = "import importlib.util as u; print(list(u.find_spec('sglang').submodule_search_locations)[0])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def _measure(engine, python, workloads, tower):
    cases = plan_cases(workloads=workloads, pipelines=["default"])
    return {r.workload: r for r in measure_cases(cases, engine, repeat=1, count=False, python=str(python),
                                                  tower=tower)}


@pytest.mark.timeout(1500)
def test_sglangs_own_tower_places_every_row_of_every_preset(engine_env):
    # The placement presets; the path presets (issue 38: key_collision places other rows by
    # design under the engines' hash-only keys) have their own tests (test_engine_sglang/vllm).
    drivable = [w for w in PRESETS if w != EVS and w not in PATH_PRESETS]
    theirs = _measure(engine_env.spec, engine_env.python, drivable, "engine")
    ours = _measure(engine_env.spec, engine_env.python, ["many_small_images", "interleaved_modalities"], "ours")
    assert len(theirs) == len(drivable)
    for w, r in theirs.items():
        assert r.error is None and r.accuracy == 1.0 and r.placed == r.items > 0, (w, r.error)
        assert r.engine_seams["tower"] == SEAM
    for w, r in ours.items():
        assert "tower" not in r.engine_seams
        assert theirs[w].encoder_calls == r.encoder_calls  # the same path around another tower


@pytest.mark.timeout(1500)
def test_a_leak_in_sglangs_tower_is_caught_with_tower_engine_and_invisible_without(engine_env, tmp_path):
    tree = patched_tree(_package_dir(engine_env.python), tmp_path, {TOWER: leak})
    spec = EngineSpec.parse("sglang", src=str(tree))
    engine = _measure(spec, engine_env.python, ["many_small_images"], "engine")["many_small_images"]
    ours = _measure(spec, engine_env.python, ["many_small_images"], "ours")["many_small_images"]
    print(f"FIGURE sglang tower leak: --tower engine {engine.accuracy} ({engine.error}); --tower ours {ours.accuracy}")
    assert engine.engine_seams["tower"] == SEAM and engine.accuracy < 1.0
    assert ours.error is None and ours.accuracy == 1.0
