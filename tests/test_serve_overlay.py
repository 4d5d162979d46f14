"""Do overlays serve a side's changed engine files over the installed build, and do the vLLM
plants land in vLLM's own code (and refuse a release where they no longer fit)?

Cheap: a small package tree stands in for the installed one where the overlay's mechanics
are checked (a real interpreter imports through it); the plants' anchors are checked
against the real installed vLLM of the server env when it is installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineSpec
from vlmpath.engines.envs import env_for
from vlmpath.serving import engine_plants
from vlmpath.serving.launch import recipe
from vlmpath.serving.overlay import build_overlay, changed_from_checkout


def _pkg(tmp_path):
    pkg = tmp_path / "site" / "eng"
    (pkg / "sub" / "deep").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep" / "__init__.py").write_text("")
    (pkg / "sub" / "merge.py").write_text("VALUE = 'base'\n")
    (pkg / "sub" / "deep" / "other.py").write_text("VALUE = 'untouched'\n")
    (pkg / "top.py").write_text("from eng.sub.merge import VALUE\n")
    return pkg


def _run(path, code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(path)}).stdout.strip()


def test_an_overlay_serves_the_changed_file_and_links_everything_else(tmp_path):
    pkg = _pkg(tmp_path)
    out = build_overlay(pkg, {"sub/merge.py": "VALUE = 'head'\n"}, tmp_path / "ov")
    assert _run(out, "import eng.top as t, eng.sub.deep.other as o; print(t.VALUE, o.VALUE)") == "head untouched"
    assert _run(pkg.parent, "import eng.top as t; print(t.VALUE)") == "base"  # installed text unchanged
    assert (out / "eng" / "sub" / "deep").is_symlink() and (out / "eng" / "top.py").is_symlink()
    assert not (out / "eng" / "sub" / "merge.py").is_symlink()
    with pytest.raises(VlmpathError, match="not a file path inside"):
        build_overlay(pkg, {"../escape.py": ""}, tmp_path / "ov2")


def test_changed_files_come_from_two_commits_of_a_checkout(tmp_path):
    repo = tmp_path / "repo"
    (repo / "vllm" / "x").mkdir(parents=True)
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (repo / "vllm" / "x" / "m.py").write_text("A = 1\n")
    (repo / "vllm" / "keep.py").write_text("B = 1\n")
    (repo / "README.md").write_text("r\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (repo / "vllm" / "x" / "m.py").write_text("A = 2\n")
    (repo / "README.md").write_text("s\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "head")
    assert changed_from_checkout(repo, "HEAD~1", "HEAD") == {"x/m.py": "A = 2\n"}
    with pytest.raises(VlmpathError, match="--engine-checkout"):
        changed_from_checkout(repo, "nosuch", "HEAD")


def test_a_plant_inserts_after_its_one_anchor_and_refuses_code_that_moved():
    edit = engine_plants.edits("shift")[0]
    text = f"def f(x):\n    {edit.anchor}\n    return 1\n"
    got = engine_plants.apply(text, edit, "utils.py")
    assert "    # VLMPATH PLANT shift" in got and got.index(edit.anchor) < got.index("torch.roll")
    for moved in ("def f(x):\n    return 1\n", text + text):
        with pytest.raises(VlmpathError, match="this release's code moved"):
            engine_plants.apply(moved, edit, "utils.py")
    for bad in ("nope", "delay:0", "delay:x", "delay:61"):
        with pytest.raises(VlmpathError, match="--plant"):
            engine_plants.edits(bad)
    assert "sleep(0.03)" in "".join(engine_plants.edits("delay:0.03")[0].lines)


def test_the_vllm_server_recipe_turns_off_what_would_skip_the_image_path_and_fits_a_cpu(tmp_path):
    cmd, env = recipe("vllm", "py", "/m", 1234, "cpu", tmp_path)
    assert cmd[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    for flag in ("--no-enable-prefix-caching", "--enforce-eager"):
        assert flag in cmd
    assert cmd[cmd.index("--mm-processor-cache-gb") + 1] == "0" and cmd[cmd.index("--dtype") + 1] == "float32"
    assert env["VLLM_CPU_KVCACHE_SPACE"] and env["VLLM_CACHE_ROOT"] == str(tmp_path)
    gpu, genv = recipe("vllm", "py", "/m", 1234, "cuda", tmp_path)
    assert "--dtype" not in gpu and "VLLM_CPU_KVCACHE_SPACE" not in genv and "--no-enable-prefix-caching" in gpu


SERVER_ENV = env_for(EngineSpec("release", "vllm", "0.32.0+cpu"))


@pytest.mark.skipif(not SERVER_ENV.complete, reason="no vllm==0.32.0+cpu server env installed")
@pytest.mark.parametrize("plant", ["shift", "split", "delay:0.03"])
def test_each_plant_fits_the_installed_vllm_and_compiles(plant, tmp_path):
    out = engine_plants.plant_overlay(str(SERVER_ENV.python), plant, tmp_path / "ov")
    for e in engine_plants.edits(plant):
        planted = out / "vllm" / e.path
        compile(planted.read_text(encoding="utf-8"), str(planted), "exec")
        assert "VLMPATH PLANT" in planted.read_text(encoding="utf-8")
