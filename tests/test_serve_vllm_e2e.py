"""Does vLLM's own OpenAI server, base tree against a head tree whose merge shifts image rows,
give the verdict it should, end to end on this CPU?

End to end (``-m e2e``): the tiny checkpoint written offline; two real vLLM servers from the
``vllm==X+cpu`` server env (``VLMPATH_SERVE_ENGINE``, installed by ``ci/setup.sh``; the
test is skipped when the variable is unset and no such env exists, and fails when the
variable names one that is not installed); base serves the installed vLLM, head the same
build with an overlay whose ``_merge_multimodal_embeddings`` writes the first image's rows
shifted by one (``serving.engine_plants``: vLLM's code, not transformers'). Two
interleaved rounds of a few requests. Base is self-consistent (within-run agreement 1.0,
exactly max_tokens each), head's outputs differ from base's (the across-side agreement red,
naming the workload), and no server process outlives it. One pair, few requests: the
servers' start-up (45-185 s each, side by side) is most of its time.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_serve import compare_serve_runs
from vlmpath.engines.base import EngineSpec
from vlmpath.engines.envs import env_for, require_env
from vlmpath.serving.bench import BenchSettings
from vlmpath.serving.pairs import LaunchSpec, interleaved
from vlmpath.serving.tiny_model import write_tiny_qwen

pytestmark = pytest.mark.e2e

SERVE_ENGINE = "VLMPATH_SERVE_ENGINE"
DEFAULT = "vllm==0.32.0+cpu"


def _server_python() -> str:
    named = os.environ.get(SERVE_ENGINE)
    spec = EngineSpec.parse(named or DEFAULT)
    if not named and not env_for(spec).complete:
        pytest.skip(f"no {DEFAULT} server env (`vlmpath engine install {DEFAULT}`, or set {SERVE_ENGINE})")
    return str(require_env(spec).python)


def _servers_left(model: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [ln for ln in ps.splitlines() if "vllm.entrypoints.openai.api_server" in ln and model in ln]


def test_vllm_cpu_server_pair_is_red_on_agreement_when_head_shifts_rows_in_vllms_merge(tmp_path):
    python = _server_python()
    tiny = str(write_tiny_qwen(tmp_path / "tiny"))
    settings = BenchSettings(("many_small_images",), (2,), max_tokens=6, prompts=4, timeout_s=120.0)
    spec = lambda plant=None: LaunchSpec("vllm", tiny, python, plant=plant, startup_timeout_s=420.0)  # noqa: E731
    files = interleaved({"base": spec(), "head": spec("shift")}, settings, 2, tmp_path / "pair")
    assert _servers_left(tiny) == []
    planted = tmp_path / "pair" / "logs"
    (overlay,) = planted.glob("overlay-shift-*")
    assert "VLMPATH PLANT shift" in (overlay / "vllm/model_executor/models/utils.py").read_text()
    base_doc = json.loads(files["base"][-1].read_text())
    case = base_doc["cases"][0]
    assert case["errors"] == 0 and case["agreement_solo"] == 1.0 and case["early_stops"] == 0
    assert "--no-enable-prefix-caching" in base_doc["server"]["command"]

    report, _ = compare_serve_runs([str(p) for p in files["base"]], [str(p) for p in files["head"]])
    by = {(c.benchmark.rsplit(".", 1)[1], dict(c.params)["workload"]): c.verdict for c in report.all()}
    assert by[("track_serve_agreement_base", "many_small_images")] == Verdict.REGRESSION
    assert by[("track_serve_agreement_solo", "many_small_images")] == Verdict.UNCHANGED  # head self-consistent
    assert report.exit_code() == 1
