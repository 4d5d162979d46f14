"""Does ``vlmpath ci pr --engine-src`` catch a silent misplacement in vLLM's own code, and stay
green on a change that changes nothing?

A git repository is built from a released vLLM source: the ``vllm/`` package installed in
the vLLM engine environment (the wheel's files; compiled objects and the vendored C++
headers left out, none of which the embedding path imports) at the repository root, the
layout of vLLM's own repository, committed as released. Two commits on top of it:

- ``mistake``: ``EncoderRunner.gather_mm_embeddings``
  (``vllm/v1/worker/gpu/mm/encoder_runner.py``, the v2 runner) and
  ``GPUModelRunner._gather_mm_embeddings`` (``vllm/v1/worker/gpu_model_runner.py``, the v1
  runner 0.33's server runs without Triton, so the adapter by default) take a chunk's rows of an item from the
  start of the item's encoder output instead of from the chunk's offset into it
  (``encoder_output[:end_idx - start_idx]``): the bug of forgetting where chunked prefill
  split an image. It is *silent*: the slice has exactly as many rows as the mask has
  places, so vLLM's merge (``inputs_embeds[is_multimodal] = rows``, which raises on a count
  mismatch since #34246) accepts it, and the rows are real rows of the right item, finite
  and of the right shape; only an item split across chunks (``chunked_long``) gets its first
  rows twice, while items inside one chunk (``cache_reuse``) are untouched;
- ``tower``: vLLM's own vision tower (``Qwen2_5_VisionTransformer.forward`` in
  ``vllm/model_executor/models/qwen2_5_vl.py``) undoes its window permutation off by one
  row (``reverse_indices.roll(1)``): each call's last row lands first. An item encoded
  alone keeps all its own rows, only rotated, and a batched call hands one item's row to
  the next: a cross-item leak that only batching shows. With ``--tower engine`` the golden
  rows come through the same tower one item at a time, so ``many_small_images`` (several
  items per call) drops in accuracy; with our tower (``--tower ours``) the change is never
  run and the flow stays green: why ``--tower engine`` exists.

``vlmpath ci pr --engine-src`` between release and ``mistake`` must exit 1 and name the
accuracy drop on ``chunked_long``. Between release and ``tower`` with ``--tower ours`` the
code measured is the release's, so that flow is also the unchanged pair (two separate vLLM
processes on unchanged code, as a whitespace-only commit would be), run on ``chunked_long``
and ``cache_reuse`` as well: it must exit 0 with every accuracy unchanged. tok/s is given a
band no timing can leave (``--config``): timings never decide a pass/fail test.

Needs a vLLM engine environment (``vlmpath engine install vllm==0.33.0``); skipped, with
the install command, where there is none.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from engine_pr_repo import ci_pr as run_ci_pr
from engine_pr_repo import git

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

RUNNER = "vllm/v1/worker/gpu/mm/encoder_runner.py"
V1_RUNNER = "vllm/v1/worker/gpu_model_runner.py"  # the same gather line: planted in whichever runs
# chunked_long: 5 of its 6 images are split across chunks; cache_reuse: none of its 12 is
# (many_small_images has 2 of 16 split: it drops too).
WORKLOADS = ("chunked_long", "cache_reuse")
TOWER = "vllm/model_executor/models/qwen2_5_vl.py"
REVERSE = "hidden_states = hidden_states[reverse_indices, :]"
CORRECT = "mm_embeds_item = encoder_output[start_idx:end_idx]"
MISTAKE = "mm_embeds_item = encoder_output[: end_idx - start_idx]  # rows from the item's start"
# Not needed by any module the adapter imports, and most of the package's bytes.
SKIP = ("__pycache__", "*.pyc", "*.so", "third_party", "vllm-rs", "*.hpp", "*.h", "*.cuh", "*.cu")


def _engine():
    from vlmpath.engines import envs

    return envs.env_for_tests("vllm")


def _installed_package(python: Path) -> Path | None:
    """The ``vllm/`` package installed in the environment, found without importing it."""
    code = "import importlib.util as u; print(list(u.find_spec('vllm').submodule_search_locations)[0])"
    r = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return Path(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None


def plant_mistake(text: str) -> str:
    """``encoder_runner.py`` with the chunk offset forgotten; fails loudly if the line moved."""
    assert text.count(CORRECT) == 1, "anchor not found: gather_mm_embeddings changed in this release"
    return text.replace(CORRECT, MISTAKE)


@pytest.fixture(scope="module")
def vllm_repo(tmp_path_factory):
    env = _engine()
    if env is None:
        pytest.skip("no vLLM engine environment: run `vlmpath engine install vllm==0.33.0` "
                    "(or VLMPATH_ENGINE_INSTALL for ci/setup.sh)")
    pkg = _installed_package(env.python)
    if pkg is None or not (pkg / RUNNER.split("/", 1)[1]).is_file():
        pytest.skip(f"vllm in {env.python} has no {RUNNER} (the v2 EncoderRunner, from 0.15)")
    repo = tmp_path_factory.mktemp("vllm") / "vllm"
    repo.mkdir()
    shutil.copytree(pkg, repo / "vllm", ignore=shutil.ignore_patterns(*SKIP))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"vllm {env.spec.version} as released")
    release = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "mistake")
    for runner in (RUNNER, V1_RUNNER):
        path = repo / runner
        path.write_text(plant_mistake(path.read_text(encoding="utf-8")), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "model runners: slice the chunk's rows of an item")
    mistake = git(repo, "rev-parse", "HEAD")
    stat = git(repo, "diff", "--stat", release, mistake)
    assert stat.count("encoder_runner.py") == 1 and stat.count("gpu_model_runner.py") == 1

    git(repo, "checkout", "-q", "-b", "tower", release)
    tower_py = repo / TOWER
    text = tower_py.read_text(encoding="utf-8")
    assert text.count(REVERSE) == 1, "Qwen2_5_VisionTransformer.forward changed: update the plant"
    tower_py.write_text(text.replace(REVERSE, REVERSE.replace("reverse_indices,", "reverse_indices.roll(1),")),
                        encoding="utf-8")
    git(repo, "commit", "-q", "-am", "qwen2.5-vl tower: undo the window permutation")
    tower = git(repo, "rev-parse", "HEAD")
    return repo, str(env.python), {"release": release, "mistake": mistake, "tower": tower}


def ci_pr(repo: Path, python: str, base: str, head: str, out: Path, tmp: Path,
          workloads: tuple[str, ...] = WORKLOADS, tower: str = "ours") -> tuple[int, str, float]:
    return run_ci_pr(repo, python, base, head, out, tmp, workloads, "--tower", tower)


# Two engine processes per comparison, each importing vLLM and building the tower.
@pytest.mark.timeout(1500)
def test_a_forgotten_chunk_offset_is_caught_as_an_accuracy_drop(vllm_repo, tmp_path):
    repo, python, c = vllm_repo
    code, comment, took = ci_pr(repo, python, c["release"], c["mistake"], tmp_path / "out", tmp_path)
    headline = comment.splitlines()[1].replace("\\", "") if comment else ""
    print(f"FIGURE mistake: exit {code} in {took:.0f}s; headline: {headline}")
    assert code == 1, comment
    assert "accuracy chunked_long fraction 1.00 ->" in headline
    report = json.loads((tmp_path / "out" / "comparison.json").read_text())
    rows = [r for m in report["machines"] for r in m["comparisons"]]
    acc = {dict(r["params"])["workload"]: r for r in rows if r["benchmark"].endswith("track_accuracy")}
    assert acc["chunked_long"]["verdict"] == "regression" and acc["chunked_long"]["head"] < 1.0
    assert acc["cache_reuse"]["verdict"] == "unchanged"  # no item split across chunks
    records = [json.loads(x) for x in (tmp_path / "out" / "records" / "head.jsonl").read_text().splitlines()]
    assert all(r["error"] is None for r in records), [r["error"] for r in records]  # silent: nothing raised
    assert {r["engine"].split("@")[0] for r in records} == {"vllm"}
    assert git(repo, "worktree", "list").count("\n") == 0  # the side worktrees are gone


@pytest.mark.timeout(1500)
def test_a_change_to_vllms_own_tower_is_caught_with_tower_engine_and_invisible_without(vllm_repo, tmp_path):
    repo, python, c = vllm_repo
    code, comment, took = ci_pr(repo, python, c["release"], c["tower"], tmp_path / "engine", tmp_path,
                                workloads=("many_small_images",), tower="engine")
    headline = comment.splitlines()[1].replace("\\", "") if comment else ""
    print(f"FIGURE tower (--tower engine): exit {code} in {took:.0f}s; headline: {headline}")
    assert code == 1, comment
    assert "accuracy many_small_images fraction 1.00 ->" in headline
    records = [json.loads(x) for x in (tmp_path / "engine" / "records" / "head.jsonl").read_text().splitlines()]
    assert all(r["engine_seams"]["tower"].endswith("Qwen2_5_VisionTransformer") for r in records)
    # Our tower never runs vLLM's: blind to the change, as expected. So this is also the
    # unchanged pair of the flow (two separate vLLM processes measuring the same code path),
    # on the mistake's workloads too: every row judged, none moved, exit 0.
    ours = (*WORKLOADS, "many_small_images")
    code, comment, took = ci_pr(repo, python, c["release"], c["tower"], tmp_path / "ours", tmp_path,
                                workloads=ours, tower="ours")
    print(f"FIGURE tower (--tower ours): exit {code} in {took:.0f}s; headline: {comment.splitlines()[1] if comment else ''}")
    assert code == 0, comment
    assert comment.splitlines()[1].startswith("**No regressions**")
    report = json.loads((tmp_path / "ours" / "comparison.json").read_text())
    rows = [r for m in report["machines"] for r in m["comparisons"]]
    acc = {dict(r["params"])["workload"]: r["verdict"] for r in rows if r["benchmark"].endswith("track_accuracy")}
    assert acc == dict.fromkeys(ours, "unchanged"), acc
