"""EVS videos through the embedding routine: pre-sized prompts, per-frame re-layout on the
full path, the ``offsets`` counter's ``mask.sum().item()`` fallback, chunking, fidelity at
the re-laid offsets, and clear errors for a wrong total or a mixed batch."""

from __future__ import annotations

import pytest
import torch

from vlmpath.core.errors import LengthMismatchError
from vlmpath.engines.pipelines import DEFAULT_PIPELINE, Pipeline
from vlmpath.engines.reference import EvsBatchError
from vlmpath.measure.evs_layout import EVS_TIMESTAMP, evs_kept_tokens, evs_layout, evs_relayout
from vlmpath.measure.families.qwen2_5_vl import EvsEncoder, tokens_of_grid
from vlmpath.measure.fidelity import Assembler, final_offsets, golden_rows, score
from vlmpath.measure.workload import MediaSpec, RequestSpec, build_requests, build_workload, preset
from vlmpath.paths.count import count_from_offsets, offsets
from vlmpath.paths.encode import RequestChunk, chunk_is_active

NAME = "evs_video"
ENCODES = ["batched", "per_request"]


def _evs_item(wl):
    (req,) = wl.requests
    (item,) = req.items
    return req, item


def _evs_steps(wl, item) -> int:
    """Steps whose chunk path looks at the video (where the engine hands back new ids)."""
    return sum(chunk_is_active(RequestChunk(e.rid, (item,), e.prefix, e.extend))
               for s in wl.steps for e in s.entries)


def _workload(specs, chunk, seed=11):
    return build_workload("evs_test", "tiny", "evs", build_requests(specs, 4096, seed), chunk, 4096, seed)


def _run(runner, wl, pipeline, encoder=None):
    routine = runner.routine(wl, pipeline, encoder=encoder)
    asm = Assembler(wl)
    for step in wl.steps:
        asm.add(step, routine.run_step(step))
    return routine, asm.rows


# --- whole cases ---------------------------------------------------------------------------
@pytest.mark.parametrize("encode", ENCODES)
def test_evs_preset_is_placed_exactly(runner, encode):
    wl = runner.workload(NAME)
    assert wl.model == "evs" and len(wl.steps) > 1  # step boundaries inside the video
    rec = runner.record(NAME, Pipeline(encode=encode), count=False)
    assert rec.error is None and rec.failed_steps == 0
    assert rec.accuracy == 1.0 and rec.placed == rec.items == 1
    # Encoded once (full path, combined-hash entry); the later chunks hit the cache.
    assert rec.encoder_calls == 1 and rec.cache_hits == _evs_steps(wl, _evs_item(wl)[1]) - 1


def test_batched_by_span_gate_sends_evs_to_the_full_path(runner):
    # The replay's gate looks at the batch's first item: an EVS video has one offset per
    # frame, so the gate fails and the step takes the (correct, re-laying) full path.
    wl = runner.workload(NAME)
    assert len(_evs_item(wl)[1].offsets) > 1
    _, rows = runner.run(wl, Pipeline(encode="batched_by_span"))
    assert runner.score(wl, rows).accuracy == 1.0


def test_offsets_counter_falls_back_to_the_mask(runner):
    wl = runner.workload(NAME)
    _, item = _evs_item(wl)
    rec = runner.record(NAME, "default", count=True)
    assert rec.error is None and rec.accuracy == 1.0
    n = _evs_steps(wl, item)
    assert n == len(wl.steps) == 3
    # Exactly the fallback's mask.sum().item(), once per step with the video in its chunk path.
    assert rec.sync_events == {"Tensor.item": n} and rec.syncs == n

    # Cut the prompt where the processor's layout and the re-laid one disagree on how many
    # placeholders came before (the pruning, i.e. the data, decides where that is).
    old = {p for a, b in item.offsets for p in range(a, b + 1)}
    new = {p for a, b in final_offsets(item, runner.golden(wl)) for p in range(a, b + 1)}
    cut = next(c for c in range(item.offsets[0][0], item.offsets[-1][1] + 1)
               if sum(p < c for p in old) != sum(p < c for p in new))
    wl = wl.with_chunk_size(cut)
    routine = runner.routine(wl, DEFAULT_PIPELINE)
    queries = []
    routine.count = lambda q: queries.append(q) or offsets(q)
    for step in wl.steps:
        routine.run_step(step)
    assert len(queries) == len(wl.steps)
    assert sum(q.ids_rewritten for q in queries) == _evs_steps(wl, item)  # video in its chunk
    stale = []
    for q, step in zip(queries, wl.steps):
        (e,) = step.entries
        assert offsets(q) == int(q.mask.sum())
        # The re-laid offsets describe the rewritten ids...
        assert count_from_offsets(q.prefix, q.extend, q.offsets) == int(q.mask.sum())
        # ...the processor's would not: what the fallback protects against.
        stale.append(count_from_offsets([e.prefix], [e.extend], [item.offsets]) != int(q.mask.sum()))
    assert any(stale)


@pytest.mark.parametrize("encode", ENCODES)
def test_chunked_equals_unchunked(runner, encode):
    wl = runner.workload(NAME)
    flat = wl.with_chunk_size(-1)
    assert len(flat.steps) == 1
    _, item = _evs_item(wl)
    cuts = [sum(s.tokens for s in wl.steps[:i]) for i in range(1, len(wl.steps))]
    start, end = item.offsets[0][0], item.offsets[-1][1]
    assert any(start < c <= end for c in cuts)  # a step boundary inside the video
    chunked_routine, chunked = runner.run(wl, Pipeline(encode=encode))
    flat_routine, whole = runner.run(flat, Pipeline(encode=encode))
    assert chunked.keys() == whole.keys()
    for rid in chunked:
        assert torch.equal(chunked[rid], whole[rid])
        assert not bool(torch.isnan(chunked[rid]).any())
    assert torch.equal(chunked_routine.request(0).input_ids, flat_routine.request(0).input_ids)


# --- the re-layout ---------------------------------------------------------------------------
def test_processor_presizes_to_the_pruned_total_with_an_even_split(runner):
    wl = runner.workload(NAME)
    req, item = _evs_item(wl)
    t, h, w = item.grid_thw[0]
    per = h * w // 4
    assert item.span == evs_kept_tokens(t, tokens_of_grid((1, h, w))) == per + round(0.5 * (t - 1) * per)
    assert len(item.frame_tokens) == len(item.offsets) == t
    assert max(item.frame_tokens) - min(item.frame_tokens) <= 1
    for (_, b), (c, _) in zip(item.offsets, item.offsets[1:]):
        assert c - b - 1 == EVS_TIMESTAMP
        assert bool((req.input_ids[b + 1:c] < wl.vocab_size).all())  # timestamp text


def test_relaid_frames_are_contiguous_with_the_timestamps_between(runner):
    wl = runner.workload(NAME)
    req, item = _evs_item(wl)
    routine, _ = runner.run(wl, DEFAULT_PIPELINE)
    new_req = routine.request(0)
    (new,) = new_req.items
    counts = runner.encoder("evs").encode([item]).frame_rows[0]
    assert new.frame_tokens == counts != item.frame_tokens
    assert counts[0] == max(counts)  # frame 0 whole
    # Same region, same total length, same pad value.
    assert new_req.length == req.length and new.span == item.span and new.pad_value == item.pad_value
    start, end = item.offsets[0][0], item.offsets[-1][1]
    assert new.offsets[0][0] == start
    kept = [j for j, n in enumerate(counts) if n]
    # A frame that pruning empties has no offset but keeps its timestamp: the gap below
    # counts one timestamp per boundary crossed (test_relayout_with_an_empty_frame pins it).
    assert [b - a + 1 for a, b in new.offsets] == [counts[j] for j in kept]
    for (i, (_, b)), (j, (c, _)) in zip(zip(kept, new.offsets), zip(kept[1:], new.offsets[1:])):
        assert c - b - 1 == EVS_TIMESTAMP * (j - i)  # one timestamp per frame boundary crossed
    assert new.offsets[-1][1] == end if counts[-1] else new.offsets[-1][1] < end
    ids, new_ids = req.input_ids, new_req.input_ids
    region = slice(start, end + 1)
    # Outside the video nothing moved; inside, the timestamps moved with their frames.
    assert torch.equal(ids[:start], new_ids[:start]) and torch.equal(ids[end + 1:], new_ids[end + 1:])
    old_stamps = ids[region][ids[region] != item.pad_value]
    new_stamps = new_ids[region][new_ids[region] != item.pad_value]
    assert torch.equal(old_stamps, new_stamps)
    pos = torch.tensor([p for a, b in new.offsets for p in range(a, b + 1)])
    assert bool((new_ids[pos] == item.pad_value).all()) and int((new_ids == item.pad_value).sum()) == item.span
    # The scorer places the item at the same offsets, re-laid from its golden encode.
    assert final_offsets(item, runner.golden(wl)) == new.offsets


def test_relayout_with_an_empty_frame():
    # A frame may keep 0 tokens: it gets no offset, its timestamps stay in order.
    (req,) = build_requests([RequestSpec((3, MediaSpec("video", ((4, 4, 4),), evs=True), 2))], 100, 1)
    (item,) = req.items
    assert item.frame_tokens == (3, 3, 2, 2) and item.span == 4 + round(0.5 * 3 * 4)
    assert item.offsets == ((3, 5), (8, 10), (13, 14), (17, 18))
    new = evs_relayout(item, (4, 0, 2, 4))
    assert new.offsets == ((3, 6), (11, 12), (15, 18)) and new.span == item.span
    assert evs_relayout(new, (4, 0, 2, 4)) is new  # idempotent
    again = evs_relayout(new, (3, 3, 2, 2))
    assert again.offsets == item.offsets
    assert evs_layout(3, (4, 0, 2, 4)) == (new.offsets, [7, 8, 9, 10, 13, 14])


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("encode", ENCODES)
def test_presized_total_disagreeing_with_the_encoder_is_a_length_mismatch(runner, encode):
    wl = runner.workload(NAME)
    _, item = _evs_item(wl)
    base = runner.encoder("evs")
    greedy = EvsEncoder(base.qwen.tower, base.qwen.device, keep=0.75)  # keeps more than pre-sized
    t, h, w = item.grid_thw[0]
    kept = evs_kept_tokens(t, tokens_of_grid((1, h, w)), 0.75)
    assert kept != item.span
    routine = runner.routine(wl, Pipeline(encode=encode), encoder=greedy)
    with pytest.raises(LengthMismatchError) as e:
        routine.run_step(wl.steps[0])
    msg = str(e.value)
    assert f"{item.hash:#x}" in msg and f"{item.span} placeholder tokens" in msg
    assert f"{kept} rows" in msg and "refusing to crop" in msg
    assert len(routine.cache) == 0 and routine.request(0) is wl.requests[0]  # nothing half-done


def test_relayout_total_mismatch_names_both_totals(runner):
    _, item = _evs_item(runner.workload(NAME))
    wrong = (item.frame_tokens[0] + 1,) + item.frame_tokens[1:]
    with pytest.raises(LengthMismatchError, match=f"pre-sized {item.span} placeholder tokens .* "
                                                  f"kept {item.span + 1} rows"):
        evs_relayout(item, wrong)


def test_encoder_without_frame_counts_is_a_clear_error(runner):
    wl = runner.workload(NAME)
    routine = runner.routine(wl, DEFAULT_PIPELINE, encoder=runner.encoder("qwen2_5_vl"))
    with pytest.raises(LengthMismatchError, match="reports no per-frame rows; use an EVS encoder"):
        routine.run_step(wl.steps[0])


def _evs(content_id=None):
    return MediaSpec("video", ((4, 4, 4),), evs=True, content_id=content_id)


def test_mixed_batch_with_an_evs_request_is_refused(runner):
    wl = _workload([RequestSpec((4, _evs(), 4)), RequestSpec((5, _evs(), 3))], chunk=-1)
    routine = runner.routine(wl, DEFAULT_PIPELINE)
    with pytest.raises(EvsBatchError, match=r"requests \[0, 1\]: request 0 holds an EVS video.*"
                                            r"len\(input_ids\) == extend_seq_len.*alone"):
        routine.run_step(wl.steps[0])
    assert routine.stats.encoder_calls == 0  # refused before any work


def test_evs_request_past_its_video_may_share_a_step(runner):
    # Request 0's trailing text shares step 1 with request 1 (an image): the EVS video is
    # behind that chunk, so its chunk path does not run and nothing is rewritten there.
    specs = [RequestSpec((4, _evs(), 30)), RequestSpec((4, MediaSpec("image", ((1, 4, 4),)), 2))]
    end = _workload(specs, -1).requests[0].items[0].offsets[-1][1]
    wl = _workload(specs, chunk=end + 11)
    assert [[e.rid for e in s.entries] for s in wl.steps] == [[0], [0, 1]]
    routine, rows = _run(runner, wl, DEFAULT_PIPELINE)
    fid = score(wl, rows, golden_rows(wl, runner.encoder("evs")), exact=True)
    assert fid.accuracy == 1.0 and fid.total == 2
    assert routine.request(0) is not wl.requests[0] and routine.request(1) is wl.requests[1]


def test_same_video_in_a_later_request_is_relaid_from_the_cache(runner):
    specs = [RequestSpec((4, _evs(7), 4)), RequestSpec((4, _evs(7), 4))]
    wl = _workload(specs, chunk=_workload(specs, -1).requests[0].length)
    assert [[e.rid for e in s.entries] for s in wl.steps] == [[0], [1]]
    routine, rows = _run(runner, wl, DEFAULT_PIPELINE)
    assert routine.stats.encoder_calls == 1 and routine.stats.cache_hits == 1
    assert routine.request(1).items[0].offsets == routine.request(0).items[0].offsets
    assert score(wl, rows, golden_rows(wl, runner.encoder("evs")), exact=True).accuracy == 1.0


def test_evs_preset_is_deterministic_and_full_scale_builds():
    a, b = preset(NAME, "tiny", 2), preset(NAME, "tiny", 2)
    assert torch.equal(a.requests[0].input_ids, b.requests[0].input_ids)
    full = preset(NAME, "full")
    (item,) = full.requests[0].items
    t, h, w = item.grid_thw[0]
    assert item.span == evs_kept_tokens(t, tokens_of_grid((1, h, w))) and len(full.steps) > 1
