"""Are the presets a table whose every entry carries its own seed, so that the table's order
changes no workload, and is every workload byte for byte what it was when the seed was
the preset's position?

``GOLDEN`` holds a digest of every preset's workload (token ids, features, offsets, hashes,
pad values, schedule, cache budget) at tiny scale under seeds 0 and 3 and at full scale
under seed 0, computed by the position-seeded code this table replaced (b7e9fa6:
``seed * 7919 + PRESETS.index(name)``); ``HISTORICAL_ORDER`` is that code's order, from which
the test derives each preset's old stream. A preset added since is not in either: it has a
seed of its own above theirs (``preset_table`` refuses a shared one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random

import pytest

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.registry import Lazy
from vlmpath.measure.presets import PATH_PRESETS, PRESETS, SEED_STRIDE, PresetEntry, preset_table
from vlmpath.measure.workload import Workload, build_preset, preset

#: The dict order whose positions seeded the presets before the table (frozen history).
HISTORICAL_ORDER = ("many_small_images", "few_large_images", "video", "multi_region", "chunked_long",
                    "cache_reuse", "mixed", "evs_video", "interleaved_modalities", "split_order",
                    "cache_oversize", "cache_dup_chunked", "multi_span_chunks", "cache_dup_pressure",
                    "key_collision")
GOLDEN = {
    ("tiny", 0, "many_small_images"): "b68d601fd5e8506d",
    ("tiny", 0, "few_large_images"): "927aba7b8f0a3724",
    ("tiny", 0, "video"): "4a9b49c2d4bc6ee3",
    ("tiny", 0, "multi_region"): "d82f0147086983f7",
    ("tiny", 0, "chunked_long"): "d00147b5fb50d04a",
    ("tiny", 0, "cache_reuse"): "c7946ef23760a562",
    ("tiny", 0, "mixed"): "868d61c4e5501e97",
    ("tiny", 0, "evs_video"): "03ee8355a66312ca",
    ("tiny", 0, "interleaved_modalities"): "06644be55a88a3e1",
    ("tiny", 0, "split_order"): "d500ad825b5cb0ca",
    ("tiny", 0, "cache_oversize"): "9ade29865d84a2d7",
    ("tiny", 0, "cache_dup_chunked"): "ef0793bc318f4888",
    ("tiny", 0, "multi_span_chunks"): "c27aed9ef730f796",
    ("tiny", 0, "cache_dup_pressure"): "b136a30c3a052976",
    ("tiny", 0, "key_collision"): "46021d3bb7c9d15b",
    ("tiny", 3, "many_small_images"): "0189913fbf46ea1a",
    ("tiny", 3, "few_large_images"): "9fd29c844eb7d7e7",
    ("tiny", 3, "video"): "6441ca3fa10c2dc6",
    ("tiny", 3, "multi_region"): "8e15cf29ec644cca",
    ("tiny", 3, "chunked_long"): "558c3438d779c78f",
    ("tiny", 3, "cache_reuse"): "3c98918a50350f78",
    ("tiny", 3, "mixed"): "78db4dc5bcd7ff89",
    ("tiny", 3, "evs_video"): "cfe97202d4008884",
    ("tiny", 3, "interleaved_modalities"): "ddc7e29d2a39a001",
    ("tiny", 3, "split_order"): "ff4bfc47d2fe0df1",
    ("tiny", 3, "cache_oversize"): "6a02c51a65939263",
    ("tiny", 3, "cache_dup_chunked"): "3cd3d09c81b0ccc4",
    ("tiny", 3, "multi_span_chunks"): "65018c96a8f60008",
    ("tiny", 3, "cache_dup_pressure"): "83f5437c42bc9f38",
    ("tiny", 3, "key_collision"): "dcdfa05a7b963ff0",
    ("full", 0, "many_small_images"): "5d6408c7e84e326a",
    ("full", 0, "few_large_images"): "131f65da0554d2a9",
    ("full", 0, "video"): "48833d0d4bc2b4c6",
    ("full", 0, "multi_region"): "8c77ff7fb149699f",
    ("full", 0, "chunked_long"): "e9fa9e24e960133e",
    ("full", 0, "cache_reuse"): "376ac85e9e967638",
    ("full", 0, "mixed"): "401a840f164ddb01",
    ("full", 0, "evs_video"): "8a292db231aed7cb",
    ("full", 0, "interleaved_modalities"): "32609efab60b453a",
    ("full", 0, "split_order"): "dbf32b8d6bfb18f2",
    ("full", 0, "cache_oversize"): "95e5dccc38c49b98",
    ("full", 0, "cache_dup_chunked"): "a92c864cdc7fd5eb",
    ("full", 0, "multi_span_chunks"): "0223cb4f035f8309",
    ("full", 0, "cache_dup_pressure"): "7ee3a1b51a40f385",
    ("full", 0, "key_collision"): "af2c47ed9ea62732",
}


def digest(wl: Workload) -> str:
    """Every byte and number a workload hands a routine."""
    h = hashlib.sha256()

    def put(*xs) -> None:
        for x in xs:
            h.update(repr(x).encode())
            h.update(b"|")

    put(wl.name, wl.scale, wl.model, wl.chunk_size, wl.vocab_size, wl.seed, wl.cache_rows,
        [[(e.rid, e.prefix, e.extend) for e in s.entries] for s in wl.steps])
    for r in wl.requests:
        put(r.rid)
        h.update(r.input_ids.numpy().tobytes())
        for it in r.items:
            put(it.modality, it.grid_thw, it.offsets, it.hash, it.pad_value, it.frame_tokens, it.regions,
                tuple(it.feature.shape), str(it.feature.dtype))
            h.update(it.feature.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("scale, seed", [("tiny", 0), ("tiny", 3), ("full", 0)])
def test_every_preset_is_byte_identical_to_the_position_seeded_one(scale, seed):
    for name in HISTORICAL_ORDER:
        # The entry's own seed gives the stream its position gave.
        assert PRESETS[name].stream(seed) == seed * SEED_STRIDE + HISTORICAL_ORDER.index(name), name
        assert digest(preset(name, scale, seed)) == GOLDEN[(scale, seed, name)], (scale, seed, name)


def test_presets_added_since_have_seeds_of_their_own():
    added = [e for n, e in PRESETS.items() if n not in HISTORICAL_ORDER]
    assert all(e.seed >= len(HISTORICAL_ORDER) for e in added), [(e.name, e.seed) for e in added]
    assert len({e.seed for e in PRESETS.values()}) == len(PRESETS)


def _digests(table) -> dict[str, str]:
    return {name: digest(build_preset(table[name], "tiny", 1)) for name in table}


def test_reordering_the_table_changes_no_workload():
    entries = list(PRESETS.values())
    shuffled = entries[:]
    random.Random(37).shuffle(shuffled)
    assert [e.name for e in shuffled] != [e.name for e in entries]
    want = _digests(PRESETS)
    assert _digests(preset_table(reversed(entries))) == want
    assert _digests(preset_table(shuffled)) == want
    # Planted: were the stream still the position (here: in the reversed table), the same
    # reversal would change every preset but the middle one.
    by_position = [dataclasses.replace(e, seed=i) for i, e in enumerate(reversed(entries))]
    moved = {n for n, d in _digests(preset_table(by_position)).items() if d != want[n]}
    assert moved == set(PRESETS) - {entries[len(entries) // 2].name}


def test_a_new_entry_is_a_new_workload_and_a_shared_seed_or_name_is_refused():
    video = PRESETS["video"]
    toy = PresetEntry("toy_video", "the video builder on a stream of its own", video.encoder, 99, video.specs)
    table = preset_table([*PRESETS.values(), toy])
    wl = build_preset(table["toy_video"], "tiny", 0)
    assert wl.name == "toy_video" and digest(wl) != digest(preset("video"))
    assert [r.items[0].grid_thw for r in wl.requests] == [r.items[0].grid_thw for r in preset("video").requests]
    with pytest.raises(VlmpathError, match="presets 'video' and 'toy_video' share the seed 2: give 'toy_video' its own "
                                           r"\(the next free seed is 15\)"):
        preset_table([*PRESETS.values(), dataclasses.replace(toy, seed=2)])
    with pytest.raises(VlmpathError, match="presets 'video' and 'video' share the name 'video'"):
        preset_table([*PRESETS.values(), dataclasses.replace(toy, name="video")])
    with pytest.raises(VlmpathError, match=f"seed {SEED_STRIDE} must be in"):
        dataclasses.replace(toy, seed=SEED_STRIDE)


def test_every_entry_names_a_builder_that_loads_and_the_path_presets_are_marked():
    for name, e in PRESETS.items():
        specs, after = e.builders()
        assert callable(specs) and (after is None) == (e.after_build is None), name
        assert e.summary and e.specs.target.rsplit(":", 1)[1] == name
    assert PATH_PRESETS == ("split_order", "cache_oversize", "cache_dup_chunked", "multi_span_chunks",
                            "cache_dup_pressure", "key_collision")
    assert {n for n, e in PRESETS.items() if e.after_build} == {"cache_oversize", "cache_dup_chunked",
                                                                 "cache_dup_pressure"}


def test_an_unknown_preset_is_refused_with_the_choices():
    with pytest.raises(UnknownNameError, match="unknown workload preset 'vidoe' \\(did you mean 'video'"):
        preset("vidoe")
    bad = PresetEntry("broken", "names a builder that does not exist", "qwen2_5_vl", 98,
                      Lazy("vlmpath.measure.preset_specs:no_such_builder"))
    with pytest.raises(VlmpathError, match="defines no 'no_such_builder'"):
        build_preset(bad)
