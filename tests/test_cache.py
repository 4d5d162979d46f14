"""The embedding cache: LRU by bytes, no overwrite, owned storage, combined vs single keys,
and what the routine puts into it."""

from __future__ import annotations

import pytest
import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.pipelines import Pipeline
from vlmpath.measure.cache import EmbeddingCache, combine_hashes, owns_storage


def _rows(n: int, fill: float = 1.0, dtype=torch.float32) -> torch.Tensor:
    return torch.full((n, 4), fill, dtype=dtype)


def _present_bytes(cache: EmbeddingCache, keys, tensors) -> int:
    return sum(t.numel() * t.element_size() for k, t in zip(keys, tensors) if cache.has(k))


def test_bytes_are_numel_times_element_size():
    cache = EmbeddingCache(10_000)
    ts = [_rows(3), _rows(5, dtype=torch.bfloat16), _rows(2, dtype=torch.float64)]
    for k, t in enumerate(ts):
        assert cache.set(k, t)
    assert cache.cur_bytes == 3 * 4 * 4 + 5 * 4 * 2 + 2 * 4 * 8 == _present_bytes(cache, range(3), ts)
    assert cache.free(1) and not cache.free(1)
    assert cache.cur_bytes == _present_bytes(cache, range(3), ts) == 3 * 4 * 4 + 2 * 4 * 8
    cache.clear()
    assert cache.cur_bytes == 0 and len(cache) == 0


def test_eviction_is_least_recently_used():
    one = 4 * 4 * 4  # bytes of _rows(4)
    cache = EmbeddingCache(3 * one)
    ts = {k: _rows(4, float(i)) for i, k in enumerate("abcd")}
    for k in "abc":
        assert cache.set(k, ts[k])
    assert cache.get_single("a") is not None  # a is now the most recent: b is the LRU
    assert cache.set("c", ts["c"])            # re-setting refreshes c as well
    assert cache.set("d", ts["d"])
    assert [cache.has(k) for k in "abcd"] == [True, False, True, True]
    assert cache.stats.evictions == 1
    assert cache.cur_bytes == 3 * one == _present_bytes(cache, "abcd", ts.values())
    assert cache.set("e", _rows(8))  # needs two slots: evicts a, then c (LRU order)
    assert [cache.has(k) for k in "acde"] == [False, False, True, True]
    assert cache.cur_bytes == one + 2 * one


def test_set_never_overwrites():
    cache = EmbeddingCache(10_000)
    first, second = _rows(2, 1.0), _rows(3, 2.0)
    assert cache.set(7, first)
    assert cache.set(7, second)  # present: refresh only, still True
    assert torch.equal(cache.get_single(7), first)
    assert cache.cur_bytes == first.numel() * 4 and len(cache) == 1


def test_too_large_entry_is_refused():
    cache = EmbeddingCache(100)
    assert cache.set(1, _rows(1))  # 16 bytes
    assert not cache.set(2, _rows(10))  # 160 bytes: cannot fit even in an empty cache
    assert not cache.has(2) and cache.stats.refused == 1
    # Refused before anything is evicted: the entry already held stays.
    assert cache.has(1) and cache.cur_bytes == 16 and cache.stats.evictions == 0


def test_the_older_loop_flushes_the_cache_before_refusing_an_oversize_entry():
    cache = EmbeddingCache(100, evict_before_refusing=True)
    assert cache.set(1, _rows(1))
    assert not cache.set(2, _rows(10))
    assert len(cache) == 0 and cache.cur_bytes == 0 and cache.stats.evictions == 1


def test_nonpositive_size_is_an_error():
    with pytest.raises(VlmpathError, match="positive"):
        EmbeddingCache(0)


def test_split_view_is_cloned_so_the_batch_is_not_pinned():
    batch = torch.randn(10, 4)
    view = batch[3:6]
    assert not owns_storage(view) and not owns_storage(batch[:5]) and owns_storage(batch)
    cache = EmbeddingCache(10_000)
    assert cache.set(1, view)
    stored = cache.get_single(1)
    assert torch.equal(stored, view)
    assert owns_storage(stored)
    assert stored.untyped_storage().data_ptr() != batch.untyped_storage().data_ptr()
    assert cache.cur_bytes == 3 * 4 * 4  # the view's bytes, which is now all it keeps alive
    # A tensor that owns its storage is stored as is (no needless copy).
    own = torch.randn(2, 4)
    cache.set(2, own)
    assert cache.get_single(2).data_ptr() == own.data_ptr()


def test_combined_and_single_keys_are_separate():
    cache = EmbeddingCache(10_000)
    t = _rows(2)
    assert combine_hashes([]) is None
    assert combine_hashes([11, 22]) == combine_hashes([11, 22]) != combine_hashes([22, 11])
    cache.set(combine_hashes([11, 22]), t)
    assert cache.get([11, 22]) is t
    assert cache.get_single(11) is None and cache.get([22, 11]) is None and cache.get([]) is None
    cache.set(11, _rows(1))
    assert cache.get([11]) is None  # a single key is not the combined key of one item
    assert cache.stats.hits == 1 and cache.stats.misses == 4


@pytest.mark.e2e
def test_combined_key_does_not_depend_on_the_process_hash_seed():
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[1] / "src")
    code = "from vlmpath.measure.cache import combine_hashes; print(combine_hashes([1, 2, 3]))"
    # This process runs under its own (random unless pinned) hash seed; the child under
    # another one. A string in the key would make the two differ.
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": src, "PYTHONHASHSEED": seed}).stdout
    assert out == f"{combine_hashes([1, 2, 3])}\n"


@pytest.mark.parametrize("encode", ["batched", "per_request"])
def test_cache_reuse_hits_and_encodes_each_image_once(runner, encode):
    wl = runner.workload("cache_reuse")
    distinct = {it.hash for it in wl.items}
    routine, _ = runner.run(wl, Pipeline(encode=encode))
    assert len(distinct) == 2 and len(wl.items) == 12
    assert routine.stats.encoded_items == len(distinct)
    assert routine.stats.cache_hits > 0
    assert routine.stats.cache_hits == routine.cache.stats.hits


@pytest.mark.parametrize("name, encode", [("many_small_images", "batched"), ("mixed", "batched"),
                                          ("many_small_images", "per_request")])
def test_routine_cache_entries_own_storage_and_match_spans(runner, name, encode):
    from vlmpath.paths.encode import shape_key

    wl = runner.workload(name)
    routine, _ = runner.run(wl, Pipeline(encode=encode))
    # batched keys its entries by hash and grids (a hash blind to shape cannot collide there)
    key = shape_key if encode == "batched" else (lambda it: it.hash)
    for it in wl.items:
        rows = routine.cache.get_single(key(it))
        assert rows is not None, "every single-offset item is cached under its key"
        assert rows.shape[0] == it.span
        assert owns_storage(rows)
    assert routine.cache.cur_bytes == sum(
        routine.cache.get_single(k).numel() * 4 for k in {key(it) for it in wl.items})
