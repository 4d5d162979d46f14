"""Encode strategies: per-request vs batched give the same rows, chunking changes nothing,
batching saves calls, the #25910 replay fails as it did, and bad encoders fail clearly."""

from __future__ import annotations

import pytest
import torch

from vlmpath.core.errors import LengthMismatchError
from vlmpath.engines.pipelines import Pipeline
from vlmpath.measure.cache import EmbeddingCache
from vlmpath.measure.families import EncodeOutput
from vlmpath.measure.families.qwen2_5_vl import REGION_TOKENS
from vlmpath.measure.fidelity import TOLERANCES, relative_error
from vlmpath.measure.presets import PRESETS
from vlmpath.paths.encode import EncodeContext, RequestChunk
from vlmpath.paths.registry import ENCODE_STRATEGIES

QWEN_PRESETS = [p for p in PRESETS if p != "multi_region"]


def _assert_same_rows(a: dict, b: dict, exact: bool = True) -> None:
    """Equal rows per request: bit for bit, or within the fp32 placement tolerance where
    the two runs batch different items into a tower call (matmuls tile differently; a
    misplaced row is ~1.0 away)."""
    assert a.keys() == b.keys()
    for rid in a:
        assert not bool(torch.isnan(a[rid]).any()), f"request {rid} has unwritten rows"
        if exact:
            assert torch.equal(a[rid], b[rid]), f"request {rid} differs"
        else:
            assert relative_error(a[rid], b[rid]) <= TOLERANCES[torch.float32], f"request {rid} differs"


#: Presets whose batched calls mix items of different sizes (matmuls tile differently from
#: an item alone: equal within the fp32 tolerance, not bit for bit).
MIXED_SIZE_BATCHES = ("split_order",)
#: Presets on which per-request and batched differ by design: ``key_collision``'s
#: per-request path keys its cache by the hash alone, as the engines do, and serves the
#: transposed grid the other's rows (tests/test_path_ledger.py pins both sides).
DIFFER_BY_DESIGN = ("key_collision",)


@pytest.mark.parametrize("name", [p for p in PRESETS if p not in DIFFER_BY_DESIGN])
def test_batched_equals_per_request_bit_for_bit(runner, name):
    wl = runner.workload(name)
    _, per_request = runner.run(wl, Pipeline(encode="per_request"))
    _, batched = runner.run(wl, Pipeline(encode="batched"))
    exact = name not in MIXED_SIZE_BATCHES
    _assert_same_rows(batched, per_request, exact=exact)
    assert runner.score(wl, batched, exact=exact).accuracy == 1.0  # bit for bit on the uniform presets


@pytest.mark.parametrize("encode", ENCODE_STRATEGIES.default_names())
def test_chunked_equals_unchunked(runner, encode):
    wl = runner.workload("chunked_long")
    flat = wl.with_chunk_size(-1)
    assert len(wl.steps) > 1 and len(flat.steps) == 1
    # Some step boundary falls inside an image: the interesting case.
    starts = [sum(r.length for r in wl.requests[:i]) for i in range(len(wl.requests))]
    cuts = [sum(s.tokens for s in wl.steps[:i]) for i in range(1, len(wl.steps))]
    assert any(starts[r.rid] + a < c <= starts[r.rid] + b
               for r in wl.requests for it in r.items for a, b in it.offsets for c in cuts)
    _, chunked = runner.run(wl, Pipeline(encode=encode))
    _, whole = runner.run(flat, Pipeline(encode=encode))
    # The unchunked step encodes every item in one call, the chunked ones a few at a time.
    _assert_same_rows(chunked, whole, exact=False)
    assert runner.score(flat, whole).accuracy == runner.score(wl, chunked).accuracy == 1.0


def test_batched_makes_fewer_encoder_calls(runner):
    wl = runner.workload("many_small_images")
    per, _ = runner.run(wl, Pipeline(encode="per_request"))
    bat, _ = runner.run(wl, Pipeline(encode="batched"))
    assert bat.stats.encoder_calls < per.stats.encoder_calls
    # At most one call per step for the batched path; the same items get encoded.
    assert bat.stats.encoder_calls <= len(wl.steps)
    assert bat.stats.encoded_items == per.stats.encoded_items


def test_batched_by_span_fails_on_multi_region_as_on_amd_ci(runner):
    # Why it fails, and why only partly: the first request of multi_region is a
    # single-region image, so the first item of the first step has one offset and the
    # batch-level gate of #25910 lets the whole step through. The next request is one item
    # with 3 regions (3 x 64 = 192 encoder rows), but the replay zips items with the
    # flattened offsets and counts it by its first 64-token span: split sizes [64, 64]
    # against 64 + 192 = 256 rows, so torch.split raises and both requests of that step
    # fail (2 of 5 items misplaced: accuracy 0.6). Later steps start with a multi-region
    # item, the gate fails and they take the correct full path.
    first = runner.workload("multi_region").steps[0]
    reqs = runner.workload("multi_region").requests
    assert [len(reqs[e.rid].items[0].offsets) for e in first.entries] == [1, 3]
    rec = runner.record("multi_region", Pipeline(encode="batched_by_span"), count=False)
    assert rec.error is not None and "split_with_sizes" in rec.error
    assert f"got split_sizes=[{REGION_TOKENS}, {REGION_TOKENS}]" in rec.error
    assert rec.accuracy < 1 and rec.accuracy == pytest.approx(0.6)
    assert rec.placed == 3 and rec.items == 5 and rec.failed_steps == 1
    assert rec.tok_per_s is None  # a failing strategy is never reported as fast


@pytest.mark.parametrize("name", QWEN_PRESETS)
def test_batched_by_span_is_right_on_qwen_presets(runner, name):
    # Qwen items have one offset and rows == span, so the span split happens to be right
    # (as in reality: Qwen models passed, MiniCPM failed).
    wl = runner.workload(name)
    _, rows = runner.run(wl, Pipeline(encode="batched_by_span"))
    assert runner.score(wl, rows).accuracy == 1.0


# --- an encoder that returns the wrong number of rows ----------------------------------
class ShortEncoder:
    """Returns one row too few for the last item of every call. ``lie`` keeps item_rows
    at the true counts (so only the total disagrees with the output)."""

    out_dim = 8
    dtype = torch.float32

    def __init__(self, lie: bool = False):
        self.lie = lie
        self.calls: list[list] = []

    def expected_rows(self, item):
        return item.span

    def encode(self, items):
        self.calls.append(list(items))
        rows = [it.span for it in items]
        rows[-1] -= 1
        emb = torch.zeros(sum(rows), self.out_dim)
        return EncodeOutput(emb, tuple(it.span for it in items) if self.lie else tuple(rows))


@pytest.mark.parametrize("name", ["many_small_images", "multi_region"])
@pytest.mark.parametrize("encode", ["batched", "per_request"])
def test_short_encoder_is_a_clear_error(runner, name, encode):
    wl = runner.workload(name)
    enc = ShortEncoder()
    routine = runner.routine(wl, Pipeline(encode=encode), encoder=enc)
    with pytest.raises(LengthMismatchError) as e:
        routine.run_step(wl.steps[0])
    short = enc.calls[-1][-1]
    msg = str(e.value)
    assert f"{short.hash:#x}" in msg
    assert f"{short.span} placeholder tokens" in msg and f"{short.span - 1} rows" in msg
    assert "refusing to crop" in msg


@pytest.mark.parametrize("encode", ["batched", "per_request"])
def test_encoder_whose_total_disagrees_is_a_clear_error(runner, encode):
    wl = runner.workload("many_small_images")
    enc = ShortEncoder(lie=True)
    step = wl.steps[0]
    chunks = [RequestChunk(e.rid, wl.requests[e.rid].items, e.prefix, e.extend) for e in step.entries]
    ctx = EncodeContext(enc, EmbeddingCache(2**20))
    with pytest.raises(LengthMismatchError) as e:
        ENCODE_STRATEGIES[encode](chunks, ctx)
    total = sum(it.span for it in enc.calls[-1])
    assert f"returned {total - 1} rows" in str(e.value) and f"summing to {total}" in str(e.value)
    assert len(ctx.cache) == 0  # nothing wrong was cached


def test_no_placeholders_in_step_gives_none(runner):
    wl = runner.workload("mixed")
    text_only = [r for r in wl.requests if not r.items]
    assert text_only
    ctx = EncodeContext(ShortEncoder(), EmbeddingCache(2**20))
    chunk = [RequestChunk(text_only[0].rid, (), 0, text_only[0].length)]
    for name in ENCODE_STRATEGIES:
        assert ENCODE_STRATEGIES[name](chunk, ctx) is None
    assert ctx.stats.encoder_calls == 0
