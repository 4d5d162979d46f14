"""Are an engine's labels read from what it did, with the name-based guess only a cross-check?

Unit checks of ``engines.behaviour`` (no engine needed): encoder calls per step give the
cross-request or per-request label; a disagreement with the guess is kept and reported;
an agreeing guess is left alone; syncs and receiver digests give sglang's count and hash
forwarding labels. The real-engine check (a cross-request encoder renamed in a released
sglang) is ``test_engine_pr_behaviour_labels.py``.
"""

from __future__ import annotations

from vlmpath.engines.behaviour import StepCalls, labelled, observed


def _calls(*steps) -> StepCalls:
    c = StepCalls()
    for step in steps:
        c.step()
        for call in step:
            c.call(call)
    return c


def test_one_call_holding_two_requests_is_cross_request():
    assert _calls([[0, 0, 1, 1]], [[2]]).chunk_encoding() == "batched_cross_request"


def test_two_requests_missing_in_one_step_served_apart_is_per_request():
    assert _calls([[0, 0], [1]], [[2]]).chunk_encoding() == "per_request"


def test_no_step_with_misses_of_two_requests_says_nothing():
    assert _calls([[0]], [], [[1, 1]]).chunk_encoding() is None
    assert observed(_calls([[0]]), None, {}, None, "vllm") == {}


def test_a_disagreeing_guess_is_replaced_and_reported():
    seams = {"chunk_encoding": "per_request", "scatter": "cumsum_index_copy"}
    out = labelled(seams, observed(_calls([[0, 1]]), None, {}, None, "sglang"))
    assert out["chunk_encoding"] == "batched_cross_request"
    assert out["chunk_encoding_by_name"] == "per_request"
    assert "chunk_encoding: the engine behaved as batched_cross_request" in out["disagreements"]
    assert out["scatter"] == "cumsum_index_copy" and out["labelled_by"] == "behaviour:chunk_encoding"


def test_an_agreeing_guess_stays_and_nothing_is_reported():
    seams = {"chunk_encoding": "batched_cross_request", "count": "host_offsets", "shm": "none"}
    seen = observed(_calls([[0, 1]]), 0, {}, 3, "sglang")
    assert seen == {"chunk_encoding": "batched_cross_request", "count": "host_offsets",
                    "shm": "rehash_after_materialize"}
    out = labelled(seams, seen)
    assert "disagreements" not in out and out["shm"] == "none"  # the receiver hashed: what 'none' does
    assert out["labelled_by"] == "behaviour:chunk_encoding,count,shm"


def test_a_readback_in_the_count_and_a_forwarded_hash_are_seen():
    seen = observed(None, 2, {"Tensor.item": 2}, 0, "sglang")
    assert seen == {"count": "mask_sum_item", "shm": "precomputed_hash"}
    out = labelled({"count": "host_offsets", "shm": "rehash_after_materialize"}, seen)
    assert out["count"] == "mask_sum_item" and out["shm"] == "precomputed_hash"
    assert out["disagreements"].count(";") == 1  # two labels, one line each


# The counted pass's elements written per operator (a record's counts_top["aten"]), shaped as
# sglang 0.5.12 (where + index), 0.5.23 (cumsum + index_copy_) and vLLM 0.33 wrote them.
WHERE_INDEX = {"aten::embedding": 225280, "aten::index_put_": 225280, "aten::nonzero": 704, "aten::cat": 213872}
INDEX_COPY = {"aten::embedding": 225280, "aten::index_copy_": 225280, "aten::scatter_": 708, "aten::cumsum": 880}


def test_the_operator_that_wrote_the_rows_labels_the_scatter():
    assert observed(None, None, {}, None, "sglang", aten=WHERE_INDEX) == {"scatter": "index_put"}
    assert observed(None, None, {}, None, "sglang", aten=INDEX_COPY) == {"scatter": "index_copy"}
    assert observed(None, None, {}, None, "vllm", aten=WHERE_INDEX) == {"merge": "index_put"}
    # the rows' writer, not a smaller scatter beside it (0.5.23's scatter_ of 708 elements)
    assert observed(None, None, {}, None, "sglang", aten={**INDEX_COPY, "aten::masked_scatter_": 12}) == \
        {"scatter": "index_copy"}
    assert observed(None, None, {}, None, "sglang", aten=None) == {}  # no counted pass: nothing said


def test_an_agreeing_scatter_guess_stays_and_a_changed_one_is_reported():
    out = labelled({"scatter": "where_index"}, observed(None, None, {}, None, "sglang", aten=WHERE_INDEX))
    assert out["scatter"] == "where_index" and "disagreements" not in out
    assert out["labelled_by"] == "behaviour:scatter"
    # A release whose source still mentions torch.where but now writes with masked_scatter_:
    moved = {"aten::embedding": 225280, "aten::masked_scatter_": 225280}
    out = labelled({"scatter": "where_index"}, observed(None, None, {}, None, "sglang", aten=moved))
    assert out["scatter"] == "masked_scatter_" and out["scatter_by_name"] == "where_index"
    assert "scatter: the engine behaved as masked_scatter_, its names suggest where_index" in out["disagreements"]
    out = labelled({"merge": "index_put"}, observed(None, None, {}, None, "vllm", aten=moved))
    assert out["merge"] == "masked_scatter_" and out["merge_by_name"] == "index_put"


def test_a_guess_that_found_nothing_is_filled_in_without_a_disagreement():
    out = labelled({"scatter": "unknown"}, observed(None, None, {}, None, "sglang", aten=WHERE_INDEX))
    assert out["scatter"] == "index_put" and "disagreements" not in out and "scatter_by_name" not in out
