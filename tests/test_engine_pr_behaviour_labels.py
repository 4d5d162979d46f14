"""Is a released sglang's cross-request encoder labelled by what it does, whatever it is called?

A released sglang (the engine environment the adapter tests use) is run from a tree whose
cross-request encoder, 0.5.23's ``_batch_encode_per_image_misses`` in
``srt/managers/mm_schedule.py``, is renamed (definition and call): the same code under
another name, as a later release may write it. The name-based guess then says
``per_request``; the record must say ``batched_cross_request`` (one encoder call held two
requests' items in one step) and report the disagreement. The release as it is carries the
same label with nothing to report. Skipped on a release without that function (nothing to
rename).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from engine_adapter_env import engine_env_fixture
from engine_tree import patched_tree

from vlmpath.engines.base import EngineSpec
from vlmpath.suite.engine_run import measure_cases
from vlmpath.suite.measure import plan_cases

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

engine_env = engine_env_fixture("sglang", "0.5.23")
NAME, RENAMED = "_batch_encode_per_image_misses", "_encode_cache_misses_together"
SCHEDULE = "srt/managers/mm_schedule.py"


def _package_dir(python) -> Path:
    code = "import importlib.util as u; print(list(u.find_spec('sglang').submodule_search_locations)[0])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def rename(text: str) -> str:
    assert text.count(NAME) >= 2, "the definition and its call"
    return text.replace(NAME, RENAMED)


def _measure(python, engine):
    cases = plan_cases(workloads=["many_small_images"], pipelines=["default"])
    (rec,) = measure_cases(cases, engine, repeat=1, count=False, python=str(python))
    return rec


@pytest.mark.timeout(900)
def test_a_renamed_cross_request_encoder_is_labelled_by_behaviour_and_the_guess_reported(engine_env, tmp_path):
    pkg = _package_dir(engine_env.python)
    if NAME not in (pkg / SCHEDULE).read_text(encoding="utf-8"):
        pytest.skip(f"sglang {engine_env.spec.version} has no {NAME} to rename")
    tree = patched_tree(pkg, tmp_path, {SCHEDULE: rename})
    renamed = _measure(engine_env.python, EngineSpec.parse("sglang", src=str(tree)))
    assert renamed.error is None and renamed.accuracy == 1.0, renamed.error
    seams = renamed.engine_seams
    assert seams["chunk_encoding"] == "batched_cross_request"
    assert seams["chunk_encoding_by_name"] == "per_request"
    assert "chunk_encoding: the engine behaved as batched_cross_request, its names suggest per_request" \
        in seams["disagreements"]
    released = _measure(engine_env.python, engine_env.spec)
    assert released.engine_seams["chunk_encoding"] == "batched_cross_request"
    assert "disagreements" not in released.engine_seams and "chunk_encoding_by_name" not in released.engine_seams
    assert renamed.encoder_calls == released.encoder_calls  # the same code, the same calls
    print(f"FIGURE renamed: {seams['disagreements']}")
