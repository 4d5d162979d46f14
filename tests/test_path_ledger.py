"""Do the embedding path's exact counts (re-encodes, off-chunk encodes, evictions, retained
cache storage) and the split-order preset catch the mistakes they exist for, on the reference?

Each planted mistake (a split by the right sizes in the wrong order, a cache that keeps views
of a batched output, a cache whose hits do not refresh, an oversize entry that flushes the
cache, a path that encodes a request's items for a chunk that does not touch them) turns its
count or the accuracy red on its preset; the unchanged routine, run twice, reads the same.
The engines' twins (through sglang's and vLLM's own cache classes, and the wrong-order splits
planted where each engine splits) are in tests/test_engine_sglang.py and test_engine_vllm.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from vlmpath.engines import adapter_common
from vlmpath.engines.pipelines import DEFAULT_PIPELINE
from vlmpath.engines.reference import DEFAULT_CACHE_BYTES, EmbedRoutine, text_table
from vlmpath.measure import cache as cache_mod
from vlmpath.measure.fidelity import score
from vlmpath.measure.path_ledger import PathLedger, retained_bytes
from vlmpath.measure.workload import preset
from vlmpath.paths import encode as encode_mod
from vlmpath.suite.measure import Session, _run_schedule


@pytest.fixture(scope="module")
def session():
    return Session("cpu")


def run(session, name: str, encode: str = "batched"):
    """(accuracy, the ledger's summary with ``foreign_rows``, the first error) of one pass of
    the reference."""
    wl = preset(name, "tiny")
    enc = session.encoder(wl.model, "tiny")
    table = text_table(wl.vocab_size, enc.out_dim, enc.dtype, "cpu", wl.seed)
    nbytes = wl.cache_rows * enc.out_dim * table.element_size() if wl.cache_rows else DEFAULT_CACHE_BYTES
    routine = EmbedRoutine(wl, enc, replace(DEFAULT_PIPELINE, encode=encode), table, cache_bytes=nbytes)
    asm, _, failed, error, _ = _run_schedule(routine, wl, "cpu", timed=False)
    fid = score(wl, asm.rows, session.golden(wl, enc), failed=failed, encoder=enc.name)
    return fid.accuracy, {**routine.ledger.summary(), "foreign_rows": fid.foreign}, error


#: What the reference reads on each new preset (tiny, both encode strategies agree).
EXPECTED = {
    "split_order": {"reencodes": 0, "off_chunk_encodes": 0, "cache_evictions": 0,
                    "cache_unaccounted_bytes": 0, "cache_over_budget_bytes": 0},
    "cache_oversize": {"reencodes": 0, "off_chunk_encodes": 0, "cache_evictions": 0,
                       "cache_unaccounted_bytes": 0, "cache_over_budget_bytes": 0},
    "cache_dup_chunked": {"reencodes": 0, "off_chunk_encodes": 0, "cache_evictions": 1,
                          "cache_unaccounted_bytes": 0, "cache_over_budget_bytes": 0},
    # The full path encodes a request's multi-span items together, at the first chunk that
    # reaches the request: the second item (and the second request's, whose first chunk stops
    # before its first span) are encoded for chunks that do not touch them.
    "multi_span_chunks": {"reencodes": 0, "off_chunk_encodes": 2, "cache_evictions": 0,
                          "cache_unaccounted_bytes": 0, "cache_over_budget_bytes": 0},
    # X, W, Z, X in a cache of 2.5 items: an LRU that does not know the request still needs X
    # drops it for Z and encodes it again (what sglang's cache does; vLLM 0.33 too: its
    # per-request reference only covers occurrences already scheduled).
    "cache_dup_pressure": {"reencodes": 1, "off_chunk_encodes": 0, "cache_evictions": 2,
                           "cache_unaccounted_bytes": 0, "cache_over_budget_bytes": 0},
    "key_collision": {"reencodes": 0, "off_chunk_encodes": 0, "cache_evictions": 0,
                      "cache_unaccounted_bytes": 0, "cache_over_budget_bytes": 0},
}


def _sub(summary: dict) -> dict:
    return {k: summary[k] for k in EXPECTED["split_order"]}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_reference_reads_its_expectation_and_an_unchanged_pair_reads_the_same(session, name):
    first, second = run(session, name), run(session, name)
    assert first[0] == 1.0 and first[2] is None
    assert _sub(first[1]) == EXPECTED[name]
    assert first == second  # A/A: exact counts, nothing to judge


def test_split_order_holds_distinct_counts_in_an_order_no_reversal_or_rotation_keeps():
    wl = preset("split_order", "tiny")
    [step] = wl.steps
    spans = [it.span for e in step.entries for it in wl.requests[e.rid].items]
    assert len(set(spans)) == len(spans) >= 5
    assert max(len(r.items) for r in wl.requests) >= 3  # within one request too
    for order in ("reversed", "rotated"):
        assert adapter_common.reorder_sizes(spans, order) != spans
        first = [it.span for it in wl.requests[0].items]
        assert adapter_common.reorder_sizes(first, order) != first
    # The blind spot it closes: the calls of an older preset hold uniform counts.
    old = preset("many_small_images", "tiny")
    counts = [it.span for r in old.requests for it in r.items]
    assert adapter_common.reorder_sizes(counts, "reversed") == counts


@pytest.mark.parametrize("order", ["reversed", "rotated"])
@pytest.mark.parametrize("encode", ["batched", "per_request"])
def test_a_split_in_the_wrong_order_is_red_on_split_order(session, monkeypatch, encode, order):
    monkeypatch.setattr(encode_mod, "torch", adapter_common.SplitPlant(torch, order))
    accuracy, _, error = run(session, "split_order", encode)
    assert accuracy < 1.0 and error is not None


def test_the_reversed_split_is_green_where_the_counts_are_uniform(session, monkeypatch):
    """Why the preset exists: the same plant leaves an older preset's figures unchanged."""
    monkeypatch.setattr(encode_mod, "torch", adapter_common.SplitPlant(torch, "reversed"))
    assert run(session, "cache_reuse")[0] == 1.0


def test_a_cache_keeping_views_of_the_batched_output_is_red(session, monkeypatch):
    clean = run(session, "cache_oversize", "per_request")[1]
    assert clean["cache_unaccounted_bytes"] == clean["cache_over_budget_bytes"] == 0
    monkeypatch.setattr(cache_mod, "owns_storage", lambda t: True)
    accuracy, got, _ = run(session, "cache_oversize", "per_request")
    assert accuracy == 1.0  # the rows are right: only the retained storage shows it
    # A and B are views of the one output that also holds the refused oversize item's rows.
    assert got["cache_unaccounted_bytes"] > 0 and got["cache_over_budget_bytes"] > 0
    assert got["cache_retained_bytes"] > clean["cache_retained_bytes"]


def test_a_cache_whose_hits_do_not_refresh_re_encodes(session, monkeypatch):
    def lookup(self, key):  # FIFO: a hit leaves the entry where it was
        if key is None or key not in self._entries:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return self._entries[key]

    monkeypatch.setattr(cache_mod.EmbeddingCache, "_lookup", lookup)
    accuracy, got, _ = run(session, "cache_dup_chunked")
    assert accuracy == 1.0 and got["reencodes"] >= 1 and got["cache_evictions"] > 1


def test_an_oversize_entry_that_flushes_the_cache_is_red(session, monkeypatch):
    init = cache_mod.EmbeddingCache.__init__
    monkeypatch.setattr(cache_mod.EmbeddingCache, "__init__",
                        lambda self, n: init(self, n, evict_before_refusing=True))
    accuracy, got, _ = run(session, "cache_oversize")
    assert accuracy == 1.0 and got["cache_evictions"] == 2 and got["reencodes"] == 2


def test_encoding_items_for_chunks_that_do_not_touch_them_is_red(session, monkeypatch):
    monkeypatch.setattr(encode_mod, "_by_item", encode_mod._full)  # the whole request, at its first chunk
    accuracy, got, _ = run(session, "cache_dup_chunked", "per_request")
    assert accuracy == 1.0 and got["off_chunk_encodes"] >= 1


def test_retained_bytes_count_a_storage_once_and_a_view_by_its_storage():
    batch = torch.zeros(10, 4)
    a, b = torch.split(batch, [3, 7])
    assert retained_bytes([a, b]) == batch.untyped_storage().nbytes() == 160
    assert retained_bytes([a.clone()]) == 48
    ledger = PathLedger(preset("split_order", "tiny"))
    ledger.observe([a], budget=100)
    assert ledger.summary()["cache_unaccounted_bytes"] == 160 - 48
    assert ledger.summary()["cache_over_budget_bytes"] == 60


def test_items_under_one_key_get_their_own_rows_unless_the_key_ignores_the_shape(session, monkeypatch):
    """``key_collision``: the correct design keys its cache by hash and grids; keyed by the
    hash alone (planted, and the engines' per-request path) the transposed grid is served
    the other item's rows, and the forced key with half the span is refused as a hit."""
    accuracy, got, error = run(session, "key_collision")
    assert accuracy == 1.0 and got["foreign_rows"] == 0 and error is None
    accuracy, got, error = run(session, "key_collision", "per_request")  # hash-only keys, faithful
    assert got["foreign_rows"] == 1 and accuracy == 2 / 3 and error is None
    monkeypatch.setattr(encode_mod, "shape_key", lambda it: it.hash)
    accuracy, got, error = run(session, "key_collision")
    assert got["foreign_rows"] == 1 and accuracy == 2 / 3 and error is None


@pytest.mark.parametrize("metric, base, head", [("reencodes", 0, 2), ("cache_evictions", 0, 2),
                                                ("off_chunk_encodes", 1, 2), ("cache_unaccounted_bytes", 0, 118784),
                                                ("foreign_rows", 0, 1)])
def test_a_rise_in_a_path_count_is_judged_a_regression_and_an_unchanged_pair_is_not(metric, base, head):
    """The table's rows are what the comparison reads: exact, lower is better."""
    from asv_fixtures import sha

    from vlmpath.compare.from_records import run_from_records
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.compare.verdict import compare
    from vlmpath.suite.record import CaseRecord

    def rec(v):
        return CaseRecord(workload="cache_oversize", tok_per_s=100.0, accuracy=1.0, encoder_calls=1,
                          samples=(0.01,) * 7, prefill_tokens=1, **{metric: v})

    def judged(a, b):
        return compare(run_from_records([rec(a)], machine="cpu-a", commit=sha("base")),
                       run_from_records([rec(b)], machine="cpu-a", commit=sha("head")), Thresholds.default())

    worse = judged(base, head)
    assert [(c.benchmark.rsplit(".", 1)[-1], c.method) for c in worse.regressions] == [(f"track_{metric}", "exact")]
    assert worse.exit_code() == 1
    same = judged(base, base)
    assert not same.regressions and not same.improvements and same.exit_code() == 0
