"""Does the adapter drive a real sglang release's embedding path right, and count what it does?

Runs on the release ``VLMPATH_ENGINE_INSTALL`` names (CI installs it with
``VLMPATH_ENGINE_INSTALL=sglang==0.5.23 ci/setup.sh``; it must be complete), else on the
newest *complete* sglang environment (``vlmpath engine list``), and names it in every
test id; skips, saying how to get one, when there is none. One worker start measures every
preset once and the planted cases (module fixture); the tests then check:

- every preset the adapter can drive places every item's rows (accuracy 1.0), and the EVS
  preset (model code in sglang) is one failed case with a message that says so;
- syncs outside the encoder follow the seams found by inspection: none where the release
  counts from offsets and scatters without a readback, at least one per step where it
  calls ``mask.sum().item()``;
- encoder calls match the reference routine's strategy of the same shape (cross-request
  batching or per request) on each preset;
- a fault planted in the engine's function fails only its case, with the engine's message;
  rows handed to the engine in the wrong order lower the accuracy (the gate is not blind).
"""

from __future__ import annotations

import pytest
from engine_adapter_env import check_path_counts, check_split_plants, EVS, driven, engine_fixtures, reference_records

from vlmpath.engines import registry

pytestmark = pytest.mark.engine

# One worker start measures both of the module's case sets (the presets, the plants).
engine_env, measured, records, planted = engine_fixtures("sglang", "0.5.23")


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


def test_seams_are_recorded_and_syncs_follow_them(records):
    drivable = driven(records)
    assert len(drivable) >= 7  # every preset is checked below, none passes by falling through
    for w, r in drivable.items():
        seams = r.engine_seams
        assert set(registry.get("sglang").seams) <= set(seams), w  # what its registry entry says it probes
        seam = (seams["count"], seams["scatter"])
        if seam == ("host_offsets", "cumsum_index_copy"):
            assert r.syncs == 0, (w, r.sync_events)
        elif seams["count"] == "mask_sum_item":
            assert r.syncs >= 1 and "item" in " ".join(r.sync_events), (w, r.sync_events)
        else:  # a release with seams this test has no expectation for must not pass silently
            pytest.fail(f"{w}: no expected sync count for seams count={seam[0]} scatter={seam[1]}; "
                        "read the release's embed_mm_inputs and add one here")


def test_encoder_calls_match_the_reference_strategy_of_the_same_shape(records):
    seams = next(iter(driven(records).values())).engine_seams
    strategy = "batched" if seams["chunk_encoding"] == "batched_cross_request" else "per_request"
    ref = reference_records(driven(records), strategy)
    calls = {w: (r.encoder_calls, ref[w].encoder_calls) for w, r in driven(records).items()}
    assert all(e == f for e, f in calls.values()), calls


def test_planted_engine_fault_fails_only_its_case(planted):
    bad, good = planted["few_large_images"], planted["video"]  # measured after it, in its process
    assert bad.error == "RuntimeError: engine says no" and bad.accuracy == 0.0
    assert good.error is None and good.accuracy == 1.0


def test_rows_in_the_wrong_order_lower_the_accuracy(planted, records):
    rec = planted["many_small_images"]
    assert rec.error is None and rec.accuracy < 1.0
    assert records["many_small_images"].accuracy == 1.0  # the flip did it, not the preset


def test_a_split_in_the_wrong_order_is_red_on_split_order(measured):
    check_split_plants(measured)


def test_the_path_counts_are_measured_through_the_engines_own_cache(measured):
    check_path_counts(measured)
