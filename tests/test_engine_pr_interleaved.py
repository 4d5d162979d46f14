"""Does the interleaved-modalities preset catch a runner that hands encoder outputs back grouped?

Engines group encoder inputs by modality and must give the outputs back in prompt order
(vLLM #15605, #32249). Per engine, a released tree with that step undone (``engine_tree``):

- sglang: ``embed_mm_inputs`` scatters every modality's rows at once, concatenated in
  modality order, into the union of the modalities' masks (prompt order);
- vLLM, v2 runner (``--vllm-runner v2``): ``EncoderRunner.execute_mm_encoder`` returns its
  outputs in the sorted (grouped) order instead of restoring the input order;
- vLLM, v1 runner (``--vllm-runner v1``, what 0.33's server runs without Triton):
  ``GPUModelRunner._batch_mm_inputs_from_scheduler`` sorts the items by modality but
  leaves the hashes in prompt order, so the grouped outputs are cached under the wrong
  hashes. Measured on the presets that hold both modalities and one control (the v2 plant
  measures every preset; ``interleaves`` shows from the workloads that no other preset
  has a step the plant can act on).

Each must read below 1.00 accuracy on ``interleaved_modalities`` and 1.00 on every preset
the adapter drives whose steps do not interleave modalities where the plant acts: vLLM's
runner sees a step's cache *misses* (only the new preset interleaves those); sglang's scatter
sees every placeholder of a step, hits included, and ``mixed`` has a cache-hit image after
a video in one step, so the sglang plant is red there too (``interleaves``, computed from
the workloads). Skipped per engine without a complete engine environment, or where the
release lacks the code to plant in.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from engine_adapter_env import EVS
from engine_tree import patched_tree

from vlmpath.engines.base import EngineSpec
from vlmpath.measure.presets import PATH_PRESETS, PRESETS
from vlmpath.measure.workload import preset
from vlmpath.suite.engine_run import measure_cases
from vlmpath.suite.measure import plan_cases

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

INTERLEAVED = "interleaved_modalities"
SCATTER = "    # 4. scatter embeddings into input embedding\n"
GROUPED_SCATTER = SCATTER.replace("# 4.", "# vlmpath test: one scatter, rows in modality order (grouped);") + (
    "    keep = [(e, m) for e, m in zip(embeddings, masks) if e is not None and m is not None]\n"
    "    if len(keep) > 1:\n"
    "        embeddings = [torch.cat([e for e, _ in keep])]\n"
    "        masks = [torch.stack([m for _, m in keep]).any(0)]\n"
    "        modalities = modalities[:1]\n")
RESTORE = re.compile(r"return \[encoder_outputs\[i\] for i in np\.argsort\(order\)\]")


def sglang_grouped(text: str) -> str:
    assert text.count(SCATTER) == 1, "embed_mm_inputs' scatter step not found"
    return text.replace(SCATTER, GROUPED_SCATTER)


V1_SORTED_HASHES = "            [mm_hashes[i] for i in order],\n"


def vllm_v1_grouped(text: str) -> str:
    assert text.count(V1_SORTED_HASHES) == 1, "_batch_mm_inputs_from_scheduler's sorted hashes not found"
    return text.replace(V1_SORTED_HASHES, "            mm_hashes,  # vlmpath test: hashes in prompt order\n")


def vllm_grouped(text: str) -> str:
    assert len(RESTORE.findall(text)) == 1, "execute_mm_encoder's order restore not found"
    return RESTORE.sub("return encoder_outputs  # vlmpath test: grouped order", text)


# case -> (engine, file, plant, what the plant reorders: "misses" or "placeholders" of a step,
# the runner to drive (vLLM's engine option; None: an engine that declares none), the presets
# measured (None: every drivable one))
PLANTS = {"sglang": ("sglang", "srt/managers/mm_utils.py", sglang_grouped, "placeholders", None, None),
          "vllm-v2": ("vllm", "v1/worker/gpu/mm/encoder_runner.py", vllm_grouped, "misses", "v2", None),
          "vllm-v1": ("vllm", "v1/worker/gpu_model_runner.py", vllm_v1_grouped, "misses", "v1",
                      (INTERLEAVED, "mixed", "video", "many_small_images"))}


def interleaves(wl, what: str) -> bool:
    """Whether some step holds items (``misses``: first sight of a hash) whose modalities, in
    prompt order, are not in grouped order (images before videos: vLLM sorts by the modality's
    name, sglang walks ``Modality.all()``, images first)."""
    seen: set[int] = set()
    by_rid = {r.rid: r for r in wl.requests}
    for step in wl.steps:
        order = []
        for e in step.entries:
            for it in sorted(by_rid[e.rid].items, key=lambda x: x.offsets[0][0]):
                if it.offsets[0][0] < e.prefix + e.extend and it.offsets[-1][1] >= e.prefix:
                    if what == "placeholders" or it.hash not in seen:
                        order.append(it.modality)
                    seen.add(it.hash)
        if order != sorted(order):  # "image" < "video"
            return True
    return False


def _package_dir(python, name: str) -> Path:
    code = f"import importlib.util as u; print(list(u.find_spec('{name}').submodule_search_locations)[0])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("case", sorted(PLANTS))
def test_a_runner_returning_grouped_order_is_red_on_interleaved_only(case, tmp_path):
    from vlmpath.engines import envs

    name, path, plant, acts_on, runner, measured = PLANTS[case]
    env = envs.env_for_tests(name)
    if env is None:
        pytest.skip(f"no complete {name} engine environment: `vlmpath engine install {name}==X`")
    pkg = _package_dir(env.python, name)
    if not (pkg / path).is_file():
        pytest.skip(f"{name} {env.spec.version} has no {path} to plant in")
    if case == "vllm-v1" and V1_SORTED_HASHES not in (pkg / path).read_text(encoding="utf-8"):
        pytest.skip(f"{name} {env.spec.version}'s v1 runner does not sort a step's items by modality")
    tree = patched_tree(pkg, tmp_path, {path: plant})
    # The placement presets; the path presets (issue 38: key_collision places other rows by
    # design under the engines' hash-only keys) have their own tests (test_engine_sglang/vllm).
    drivable = [w for w in PRESETS if w != EVS and w not in PATH_PRESETS]
    cases = plan_cases(workloads=list(measured or drivable), pipelines=["default"])
    recs = {r.workload: r for r in measure_cases(cases, EngineSpec.parse(name, src=str(tree)), repeat=1, count=False,
                                                  python=str(env.python),
                                                  engine_options={"runner": runner} if runner else {})}
    acc = {w: r.accuracy for w, r in recs.items()}
    print(f"FIGURE {case} grouped-order plant: {acc}")
    if name == "vllm":  # the planted runner is the one that ran
        assert all(r.engine_seams["runner"].startswith(f"{runner} (asked") for r in recs.values()), recs
    # red: rows misplaced, or the engine's own row-count check refusing them (a failed case)
    assert acc[INTERLEAVED] < 1.0, acc
    caught = {w for w in drivable if interleaves(preset(w), acts_on)}
    assert INTERLEAVED in caught and len(caught) <= 2, caught
    assert all(acc[w] < 1.0 for w in caught if w in acc), (acc, caught)
    others = {w: acc[w] for w in acc if w not in caught}
    assert len(others) >= len(acc) - 2 and all(a == 1.0 for a in others.values()), others
