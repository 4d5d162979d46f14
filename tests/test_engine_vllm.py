"""Does the adapter drive a real vLLM release's embedding path right, and count what it does?

Runs on the newest vLLM engine environment found (``vlmpath engine list``; CI installs one
with ``VLMPATH_ENGINE_INSTALL="sglang==0.5.23 vllm==0.33.0" ci/setup.sh``) and skips, saying
how to get one, when there is none. One worker start measures every case set the tests
need (module fixture: every preset once, the plants, both runners, the device mask, vLLM's
tower); the tests then check:

- every preset the adapter can drive places every item's rows (accuracy 1.0), and the EVS
  preset (model code in vLLM) is one failed case with a message that says so;
- the seams are recorded, and no step syncs outside the tower: with vLLM's host-side mask
  (#34246: ``index_put`` on a mask built with ``device="cpu"``) or with ``masked_scatter_``
  on a device mask (#22105);
- encoder calls match the reference's cross-request batching (vLLM's
  ``group_and_batch_mm_kwargs``: one call per modality group of a step), fewer where an
  item has several spans (``MULTI_SPAN``);
- the runner driven is the one the release's own server picks on this device
  (``VllmConfig.use_v2_model_runner``: v1 on a CPU without Triton), said with its why in
  the ``runner`` seam; the other runner of a release with both (``--vllm-runner``) places
  every row on every preset too, with the same encoder calls;
- a fault planted in the engine's step fails only its case, with the engine's message;
  rows handed to the engine in the wrong order lower the accuracy; the mask treated as
  device memory costs a sync per merge (the sync count is not blind).
"""

from __future__ import annotations

import pytest
from engine_adapter_env import (EVS, by_workload, check_path_counts, check_split_plants, driven, driven_cases,
                                engine_fixtures, reference_records, set_records)

from vlmpath.core.errors import VlmpathError
from vlmpath.engines import registry
from vlmpath.suite.engine_run import CaseSet, measure_cases
from vlmpath.suite.measure import plan_cases

pytestmark = pytest.mark.engine


def _vllm_sets() -> dict[str, CaseSet]:
    """The case sets of this module's tests beside the presets and the plants, all measured
    by the module's one worker start. Both runners are measured: which one is the server's
    is known only once the engine is imported (in the worker), so the other runner's test
    picks the one that is not."""
    return {
        **{runner: CaseSet(driven_cases(), repeat=1, count=False, engine_options={"runner": runner}) for runner in ("v1", "v2")},
        "device_mask": CaseSet(plan_cases(workloads=["many_small_images"], pipelines=["default"]), repeat=1,
                               faults="many_small_images:device_mask"),
        "tower": CaseSet(plan_cases(workloads=["multi_region", "many_small_images"], pipelines=["default"]),
                         repeat=1, tower="engine"),
    }


engine_env, measured, records, planted = engine_fixtures("vllm", "0.33.0", _vllm_sets)


def test_every_drivable_preset_places_every_row(records, engine_env):
    assert len(driven(records)) >= 7
    for w, r in driven(records).items():
        assert r.error is None, (w, r.error)
        assert r.accuracy == 1.0 and r.placed == r.items > 0, w
        assert r.engine == engine_env.spec.label and r.engine_version == engine_env.spec.version
        assert r.tok_per_s > 0


def test_evs_is_one_clear_failed_case(records):
    r = records[EVS]
    assert r.error.startswith("EngineError: workload 'evs_video': EVS frame re-layout is model code")
    assert r.tok_per_s is None


def test_seams_are_recorded_and_the_merge_does_not_sync(records):
    for w, r in driven(records).items():
        seams = r.engine_seams
        assert set(registry.get("vllm").seams) <= set(seams), w  # what its registry entry says it probes
        assert seams["encoder"] in ("v2_encoder_runner", "v1_gpu_model_runner")
        # #34246: index_put on a host mask; #22105: masked_scatter_ (sync-free on any mask)
        if (seams["mask"] == "host" and seams["merge"] == "index_put") or seams["merge"] == "masked_scatter_":
            assert r.syncs == 0, (w, r.sync_events)


def test_the_servers_runner_is_driven_and_said_with_its_why(records):
    for w, r in driven(records).items():
        runner, _, why = r.engine_seams["runner"].partition(" ")
        assert why.startswith("(server's choice: ") and runner in ("v1", "v2"), (w, r.engine_seams["runner"])
        assert r.engine_seams["encoder"] == {"v1": "v1_gpu_model_runner", "v2": "v2_encoder_runner"}[runner]


def test_the_other_runner_places_every_row_on_every_preset_too(records, measured):
    """Both runners of a release that has both (0.33): accuracy 1.0 everywhere, and the same
    encoder calls (both batch with vLLM's group_and_batch_mm_kwargs)."""
    server = records[next(iter(driven(records)))].engine_seams["runner"].split(" ")[0]
    other = "v2" if server == "v1" else "v1"
    try:
        recs = by_workload(set_records(measured, other))  # --vllm-runner OTHER, in the module's worker
    except VlmpathError as exc:  # the release's one runner: refused in one line, naming it
        assert f"has no {other} model runner" in str(exc)
        pytest.skip(str(exc))
    assert list(recs) == list(driven(records))  # every preset the adapter drives, once
    differs = set()
    for w, r in recs.items():
        assert r.error is None and r.accuracy == 1.0 and r.placed == r.items > 0, (w, r.error)
        assert r.engine_seams["runner"].startswith(f"{other} (asked: --vllm-runner {other}")
        assert r.engine_options == {"runner": other} and records[w].engine_options == {"runner": "server"}
        assert r.encoder_calls == records[w].encoder_calls, w  # vLLM's one batching rule in both
        differs |= {k for k, v in r.engine_seams.items() if records[w].engine_seams.get(k) != v}
    print(f"FIGURE runner {other} vs {server}: accuracy {[(w, r.accuracy) for w, r in recs.items()]}; "
          f"labels that differ: {sorted(differs)}")
    assert {"runner", "encoder"} <= differs


# Workloads with an item of several placeholder spans (MiniCPM-like regions). vLLM batches
# such an item with the step's other items (one PlaceholderRange with is_embed, the same
# fields), where the reference (as sglang's chunked full path) encodes it in a call of its
# own: step 1 of multi_region (request 0's one-span image, request 1's three-span image) is
# one vLLM call and two reference calls, so vLLM makes 4 calls to the reference's 5.
MULTI_SPAN = {"multi_region"}


def test_encoder_calls_match_cross_request_batching(records):
    ref = reference_records(driven(records), "batched")
    calls = {w: (r.encoder_calls, ref[w].encoder_calls) for w, r in driven(records).items()}
    assert all(e == f for w, (e, f) in calls.items() if w not in MULTI_SPAN), calls
    assert all(e < f for w, (e, f) in calls.items() if w in MULTI_SPAN), calls


def test_planted_engine_fault_fails_only_its_case(planted):
    bad, good = planted["few_large_images"], planted["video"]  # measured after it, in its process
    assert bad.error == "RuntimeError: engine says no" and bad.accuracy == 0.0
    assert good.error is None and good.accuracy == 1.0


def test_rows_in_the_wrong_order_lower_the_accuracy(planted, records):
    rec = planted["many_small_images"]
    assert rec.error is None and rec.accuracy < 1.0
    assert records["many_small_images"].accuracy == 1.0  # the flip did it, not the preset


def test_a_device_mask_costs_one_sync_per_merge(measured):
    """The host mark is what keeps the count at 0: unmarked, ``index_put_`` on a bool mask
    runs ``nonzero`` in its kernel (a sync per merge), as before #22105."""
    (rec,) = set_records(measured, "device_mask")  # planted: many_small_images:device_mask, its set alone
    if rec.engine_seams["merge"] != "index_put":
        pytest.skip(f"this release merges with {rec['engine_seams']['merge']} (sync-free on any mask)")
    assert rec.error is None and rec.accuracy == 1.0
    assert rec.syncs >= 1 and all("index_put" in k for k in rec.sync_events), rec.sync_events


def test_vllms_own_tower_runs_in_place_of_ours_and_places_every_row(measured, records):
    """``--tower engine``: vLLM's ``Qwen2_5_VisionTransformer`` with our tower's weights
    (its own ``load_weights``), in the release's path; recorded as the ``tower`` seam."""
    ours = records  # the same cases, counted, with our tower (the module's one measured run)
    theirs = by_workload(set_records(measured, "tower"))  # multi_region, many_small_images; --tower engine
    assert list(theirs) == ["multi_region", "many_small_images"]
    for w, r in theirs.items():
        assert r.error is None and r.accuracy == 1.0 and r.placed == r.items > 0, (w, r.error)
        assert r.engine_seams["tower"] == "vllm.model_executor.models.qwen2_5_vl.Qwen2_5_VisionTransformer"
        assert "tower" not in ours[w].engine_seams
        assert r.encoder_calls == ours[w].encoder_calls  # the same path around another tower
        assert r.routine_aten_elements == ours[w].routine_aten_elements  # the routine count excludes the tower


def test_the_reference_has_no_engine_tower():
    from vlmpath.core.errors import VlmpathError

    with pytest.raises(VlmpathError, match="--tower engine runs an engine's own vision tower"):
        measure_cases(plan_cases(workloads=["video"], pipelines=["default"]), None, tower="engine")


def test_a_split_in_the_wrong_order_is_red_on_split_order(measured):
    check_split_plants(measured)


def test_the_path_counts_are_measured_through_the_engines_own_cache(measured):
    recs = check_path_counts(measured)
    # The other way from the reference's full path (which encodes a request's multi-span
    # items together at its first chunk): vLLM's scheduler encodes each item in the step
    # whose chunk first reaches it, so nothing is encoded for a chunk that does not touch it.
    assert recs["multi_span_chunks"].off_chunk_encodes == 0 and recs["multi_span_chunks"].encoder_calls == 3
    # The forced key with half the span: vLLM's scheduler refuses the cached entry whose count
    # differs ("holds 32 embeddings, but request 1 input 1 expects 16") and does not schedule
    # the request (a server ends it with an error); the adapter records the refused step.
    assert recs["key_collision"].accuracy < 1.0 and "trimmed request 1" in recs["key_collision"].error
