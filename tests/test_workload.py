"""Workloads: determinism, bad input, trace replay, chunk arithmetic and the schedule."""

from __future__ import annotations

import json
import random

import pytest
import torch

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.engines.pipelines import Pipeline
from vlmpath.measure.catalog import workload_by_name
from vlmpath.measure.evs_layout import EVS_TIMESTAMP, evs_kept_tokens
from vlmpath.measure.families.qwen2_5_vl import REGION_SEPARATOR, REGION_TOKENS, tokens_of_grid
from vlmpath.measure.presets import PRESETS
from vlmpath.measure.traces import load_trace
from vlmpath.measure.workload import MediaSpec, RequestSpec, build_requests, preset, schedule
from vlmpath.paths.count import count_from_offsets
from vlmpath.paths.encode import chunk_row_range
from vlmpath.paths.registry import COUNTERS, ENCODE_STRATEGIES, INJECTORS


# --- determinism ------------------------------------------------------------------------
def _fingerprint(wl):
    """Everything a workload is made of, as bytes and ints."""
    return [
        (r.rid, r.input_ids.numpy().tobytes(),
         [(it.modality, it.feature.numpy().tobytes(), it.grid_thw, it.offsets, it.hash, it.pad_value)
          for it in r.items])
        for r in wl.requests
    ] + [wl.model, wl.chunk_size, wl.vocab_size, wl.steps]


@pytest.mark.parametrize("name", PRESETS)
def test_same_seed_same_bytes_and_hashes(name):
    a, b = preset(name, "tiny", 3), preset(name, "tiny", 3)
    assert _fingerprint(a) == _fingerprint(b)


@pytest.mark.parametrize("name", PRESETS)
def test_different_seed_differs(name):
    a, b = preset(name, "tiny", 0), preset(name, "tiny", 1)
    assert [r.input_ids.numpy().tobytes() for r in a.requests] != [r.input_ids.numpy().tobytes() for r in b.requests]
    # Image content differs too, shared (content_id) images included.
    ha, hb = {it.hash for it in a.items}, {it.hash for it in b.items}
    assert ha.isdisjoint(hb)


def test_shared_content_is_shared_within_a_workload():
    wl = preset("cache_reuse")
    assert len(wl.items) == 12 and len({it.hash for it in wl.items}) == 2
    by_hash = {}
    for it in wl.items:
        if it.hash in by_hash:
            assert torch.equal(by_hash[it.hash].feature, it.feature)
        by_hash.setdefault(it.hash, it)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_structure(name):
    wl = preset(name)
    for r in wl.requests:
        for it in r.items:
            pos = torch.tensor([p for a, b in it.offsets for p in range(a, b + 1)])
            assert bool((r.input_ids[pos] == it.pad_value).all())
            assert it.pad_value >= 1_000_000  # never a text id
        text = torch.ones(r.length, dtype=torch.bool)
        for it in r.items:
            for a, b in it.offsets:
                text[a:b + 1] = False
        assert bool((r.input_ids[text] < wl.vocab_size).all())


# --- bad input --------------------------------------------------------------------------
def test_unknown_preset_names_the_choices():
    with pytest.raises(UnknownNameError) as e:
        preset("many_large_images")
    msg = str(e.value)
    assert "many_large_images" in msg and all(p in msg for p in PRESETS)
    with pytest.raises(UnknownNameError):
        workload_by_name("nope")


def test_unknown_scale():
    with pytest.raises(VlmpathError, match="tiny, full"):
        Scale.parse("huge")  # refused where it enters (the CLI, VLMPATH_SCALE); preset takes a Scale
    assert preset("video", Scale.parse("tiny")).scale is Scale.TINY


@pytest.mark.parametrize("registry", [ENCODE_STRATEGIES, INJECTORS, COUNTERS])
def test_unknown_strategy_names_the_choices(registry):
    with pytest.raises(UnknownNameError) as e:
        registry["nope"]
    msg = str(e.value)
    assert "'nope'" in msg and all(n in msg for n in registry)


@pytest.mark.parametrize("stage", ["encode", "inject", "count", "hash"])
def test_pipeline_validate_names_the_choices(stage):
    with pytest.raises(UnknownNameError, match="choose one of"):
        Pipeline(**{stage: "nope"}).validate()


GOOD = '{"arrival": 0, "segments": [{"text": 4}, {"image": [56, 56]}]}'


@pytest.mark.parametrize("line, expect", [
    ('{"arrival": 0, "segments": [', "not valid JSON"),
    ('{"arrival": 0}', "missing 'segments'"),
    ('[1, 2]', "missing 'segments'"),
    ('{"segments": [{"audio": 3}]}', "unknown segment kind 'audio'"),
    ('{"segments": [{"text": 2, "image": [1, 1]}]}', "one key"),
    ('{"segments": [{"image_grid": [1, 3, 4]}]}', "multiples of the merge size"),
    ('{"segments": [{"video_grid": [2, 4]}]}', "three positive integers"),
    ('{"segments": [{"image_grid": [0, 4, 4]}]}', "three positive integers"),
    ('{"segments": [{"image": [448]}]}', "[height_px, width_px]"),
    ('{"segments": [{"regions": []}]}', "non-empty list"),
    ('{"segments": [{"text": -1}]}', "non-negative"),
    ('{"arrival": "soon", "segments": []}', "'arrival' must be a number"),
])
def test_malformed_trace_line_names_file_line_and_fix(tmp_path, line, expect):
    path = tmp_path / "trace.jsonl"
    path.write_text(f"{GOOD}\n\n{line}\n{GOOD}\n", encoding="utf-8")
    with pytest.raises(VlmpathError) as e:
        load_trace(path)
    msg = str(e.value)
    assert f"{path}:3" in msg  # the blank line 2 still counts
    assert expect in msg


def test_trace_missing_or_empty(tmp_path):
    with pytest.raises(VlmpathError, match="does not exist"):
        load_trace(tmp_path / "absent.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(VlmpathError, match="no requests"):
        load_trace(empty)


# --- trace replay -----------------------------------------------------------------------
def test_trace_replay_builds_the_expected_requests(tmp_path):
    lines = [
        # arrives last
        {"arrival": 5, "segments": [{"text": 3}, {"regions": [[224, 224], [112, 112]]}, {"text": 1}]},
        # arrives first; 56x56 px -> grid (1, 4, 4) -> 4 tokens
        {"arrival": 0, "segments": [{"text": 5}, {"image": [56, 56]}, {"text": 2},
                                    {"image_grid": [1, 4, 6]}, {"text": 1}]},
        # same arrival as the next line: file order breaks the tie
        {"arrival": 2, "segments": [{"video_grid": [2, 4, 4]}, {"text": 4}]},
        {"arrival": 2, "segments": [{"text": 7}]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    wl = load_trace(path, chunk_size=16)
    assert wl.name == "trace:t" and wl.model == "multi_region"  # regions present
    assert [r.length for r in wl.requests] == [5 + 4 + 2 + 6 + 1, 8 + 4, 7,
                                               3 + 64 + REGION_SEPARATOR + 64 + 1]
    r0, r1, r2, r3 = wl.requests
    assert [(it.modality, it.grid_thw, it.offsets) for it in r0.items] == [
        ("image", ((1, 4, 4),), ((5, 8),)),
        ("image", ((1, 4, 6),), ((11, 16),)),
    ]
    assert [(it.modality, it.grid_thw, it.offsets) for it in r1.items] == [("video", ((2, 4, 4),), ((0, 7),))]
    assert r2.items == ()
    (reg,) = r3.items
    assert reg.grid_thw == ((1, 16, 16), (1, 8, 8))
    assert reg.offsets == ((3, 3 + REGION_TOKENS - 1), (3 + REGION_TOKENS + REGION_SEPARATOR,
                                                         3 + 2 * REGION_TOKENS + REGION_SEPARATOR - 1))
    assert reg.span == 2 * REGION_TOKENS and reg.first_span == REGION_TOKENS
    for r in wl.requests:
        for it in r.items:
            for a, b in it.offsets:
                assert bool((r.input_ids[a:b + 1] == it.pad_value).all())
            assert it.feature.shape == (sum(t * h * w for t, h, w in it.grid_thw), 1176)
    assert all(s.tokens <= 16 for s in wl.steps)
    assert sum(s.tokens for s in wl.steps) == wl.prefill_tokens
    # Default chunk size is the scale's.
    assert load_trace(path).chunk_size == preset("video").chunk_size


def test_trace_by_name(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(GOOD + "\n", encoding="utf-8")
    wl = workload_by_name(f"trace:{path}")
    assert wl.model == "qwen2_5_vl" and len(wl.requests) == 1


# --- chunk arithmetic -------------------------------------------------------------------
def test_chunk_row_range_examples():
    offs = [(2, 5), (9, 14), (20, 24)]  # 4 + 6 + 5 = 15 rows
    assert chunk_row_range(offs, 0, 100) == (0, 15)
    assert chunk_row_range(offs, 8, 16) == (4, 14)   # positions 8..23
    assert chunk_row_range(offs, 3, 3) == (1, 4)     # positions 3..5: rows 1, 2, 3
    assert chunk_row_range(offs, 6, 3) == (4, 4)     # 6..8: no placeholder
    assert chunk_row_range(offs, 30, 0) == (0, 0)
    assert chunk_row_range(offs, 30, 5) == (15, 15)  # after every range
    assert chunk_row_range([], 0, 10) == (0, 0)


def _random_offsets(rng: random.Random, length: int):
    offs, pos = [], rng.randint(0, 3)
    while pos < length - 1:
        end = min(length - 1, pos + rng.randint(0, 6))
        offs.append((pos, end))
        pos = end + 1 + rng.randint(1, 4)
    return offs


def test_chunk_row_range_partitions_rows_and_matches_count():
    rng = random.Random(1)
    for _ in range(200):
        length = rng.randint(1, 60)
        offs = _random_offsets(rng, length)
        rows = sum(b - a + 1 for a, b in offs)
        prefix = 0
        covered = []
        while prefix < length:
            extend = rng.randint(1, 9)
            s, e = chunk_row_range(offs, prefix, extend)
            assert e - s == count_from_offsets([prefix], [extend], [offs])
            covered.append((s, e))
            prefix += extend
        # Consecutive chunks take consecutive, non-overlapping row ranges covering all rows.
        assert covered[0][0] == 0 and covered[-1][1] == rows
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))


# --- schedule ---------------------------------------------------------------------------
@pytest.mark.parametrize("chunk", [1, 7, 48, 256, 10_000])
def test_schedule_every_token_once_within_budget(chunk):
    lengths = [30, 1, 0, 95, 12, 48]
    steps = schedule(lengths, chunk)
    seen = {rid: [] for rid in range(len(lengths))}
    for i, step in enumerate(steps):
        assert step.tokens <= chunk
        if i < len(steps) - 1:
            assert step.tokens == chunk  # only the last step may be short
        for e in step.entries:
            assert e.extend > 0
            seen[e.rid].append((e.prefix, e.extend))
    for rid, n in enumerate(lengths):
        pos = 0
        for prefix, extend in seen[rid]:
            assert prefix == pos  # in order, no gap, no overlap
            pos += extend
        assert pos == n
    # Arrival order: the first entry of each request appears in rid order.
    firsts = [e.rid for s in steps for e in s.entries if e.prefix == 0]
    assert firsts == [r for r, n in enumerate(lengths) if n]


@pytest.mark.parametrize("chunk", [0, -1])
def test_schedule_unchunked_is_one_step(chunk):
    (step,) = schedule([5, 9, 3], chunk)
    assert [(e.rid, e.prefix, e.extend) for e in step.entries] == [(0, 0, 5), (1, 0, 9), (2, 0, 3)]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_schedules_are_consistent(name):
    wl = preset(name)
    assert sum(s.tokens for s in wl.steps) == wl.prefill_tokens
    assert wl.steps == schedule([r.length for r in wl.requests], wl.chunk_size)
    flat = wl.with_chunk_size(-1)
    assert len(flat.steps) == 1 and flat.requests is wl.requests


# --- EVS videos ---------------------------------------------------------------------------
@pytest.mark.parametrize("media, expect", [
    (MediaSpec("video", ((1, 8, 8),), evs=True), "at least 2 temporal patches"),
    (MediaSpec("image", ((2, 8, 8),), evs=True), "one video grid"),
    (MediaSpec("video", ((2, 8, 8), (2, 8, 8)), evs=True), "one video grid"),
    (MediaSpec("video", ((8, 2, 2),), evs=True), "leaves a frame without tokens"),
])
def test_bad_evs_video_names_the_request_and_fix(media, expect):
    with pytest.raises(VlmpathError, match=expect) as e:
        build_requests([RequestSpec((2,)), RequestSpec((3, media))], 100, 0)
    assert "request 1" in str(e.value)


def test_evs_preset_layout():
    wl = preset("evs_video")
    assert wl.model == "evs" and len(wl.requests) == 1
    (it,) = wl.requests[0].items
    t, h, w = it.grid_thw[0]
    assert it.frame_tokens and sum(it.frame_tokens) == it.span == evs_kept_tokens(t, tokens_of_grid((1, h, w)))
    assert [b - a + 1 for a, b in it.offsets] == list(it.frame_tokens)
    assert all(c - b - 1 == EVS_TIMESTAMP for (_, b), (c, _) in zip(it.offsets, it.offsets[1:]))
    # Every other preset's items are not EVS.
    assert not any(i.frame_tokens for p in PRESETS if p != "evs_video" for i in preset(p).items)
