"""Which items did the encoder see, for which chunk, and what does the embedding cache really hold?

A ``PathLedger`` follows one pass of a routine (the reference's or an engine adapter's)
over a workload's schedule and gives its exact, deterministic counts:

- *re-encodes*: encodes of an item's content beyond the first (the same content twice in a
  request, or again after its cache entry was dropped). Content is the item's feature
  tensor and its grids (equal content ids share one tensor; equal bytes under another
  grid are other content);
- *off-chunk encodes*: an item encoded in a step whose chunk of its request touches none
  of its spans (a multi-span item encoded for a chunk before its first span);
- *evictions*: entries the cache dropped to make room;
- *retained bytes*: the bytes of storage the cache's tensors keep alive, each storage
  counted once (``untyped_storage().nbytes()``), at its peak over the pass; beside it the
  peak of what the cache does not account for (retained minus the payload
  ``numel * element_size`` of what it holds: a split view pins the whole batched output)
  and of what it holds beyond its budget.

The routine calls ``begin_step`` before each step, ``encoded`` for every item handed to the
encoder and ``observe`` / ``observe_entries`` with what its cache holds (after each step;
``observed_store`` around each store). The ledger's work stays in this module, which the
engine routine counts (``suite.routine_counts``) leave out as harness: the engine's
``routine_bytecodes`` count the engine's code and the adapter's glue, not the ledger.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch


def content_key(item) -> tuple:
    """The content an item is: its feature tensor (shared by equal content) and its grids."""
    return (id(item.feature), tuple(item.grid_thw))


def payload_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """What a cache that counts ``numel * element_size`` accounts for these tensors."""
    return sum(t.numel() * t.element_size() for t in tensors)


def retained_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of storage these tensors keep alive, each storage once."""
    seen: dict[tuple, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[(t.device.type, t.device.index, s.data_ptr())] = s.nbytes()
    return sum(seen.values())


@dataclass
class PathLedger:
    """The counts of one pass (see the module docstring)."""

    workload: object
    encodes: Counter = field(default_factory=Counter)
    off_chunk_encodes: int = 0
    evictions: int = 0
    retained_peak: int = 0
    unaccounted_peak: int = 0
    over_budget_peak: int = 0
    cache_observed: bool = False
    _chunks: dict = field(default_factory=dict)
    _rid_of: dict = field(default_factory=dict)
    _rid_by_hash: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.workload.requests:
            for it in r.items:
                self._rid_of[id(it)] = r.rid
                self._rid_by_hash.setdefault(it.hash, r.rid)

    def begin_step(self, step) -> None:
        self._chunks = {e.rid: (e.prefix, e.prefix + e.extend) for e in step.entries}

    def encoded(self, items: Iterable, rids: Iterable[int | None] | None = None) -> None:
        """Items handed to the encoder now (``rids``: their requests, where the caller knows
        them better than the item's identity does, e.g. an engine's own item objects)."""
        items = list(items)
        rids = list(rids) if rids is not None else [None] * len(items)
        for it, rid in zip(items, rids):
            self.encodes[content_key(it)] += 1
            if rid is None:
                rid = self._rid_of.get(id(it), self._rid_by_hash.get(it.hash))
            chunk = self._chunks.get(rid)
            if chunk is None or not any(a < chunk[1] and b >= chunk[0] for a, b in it.offsets):
                self.off_chunk_encodes += 1

    def observe(self, held: Iterable[torch.Tensor], budget: int | None = None) -> None:
        """What the cache holds now (its tensors; ``budget`` its size in bytes)."""
        held = [t for t in held if isinstance(t, torch.Tensor)]
        kept, paid = retained_bytes(held), payload_bytes(held)
        self.cache_observed = True
        self.retained_peak = max(self.retained_peak, kept)
        self.unaccounted_peak = max(self.unaccounted_peak, kept - paid)
        if budget is not None:
            self.over_budget_peak = max(self.over_budget_peak, kept - budget)

    def observe_entries(self, entries: Mapping | None, budget: int | None = None) -> None:
        """What a cache holds now, as its ``{key: entry}``: a tensor, or an object holding one
        as ``embedding`` (sglang's ``EmbeddingResult``)."""
        self.observe([getattr(v, "embedding", v) for v in (entries or {}).values()], budget)

    def observed_store(self, cache, put: Callable, key, *args, **kwargs):
        """``put(*args, **kwargs)``, a store of ``key`` into ``cache`` (an engine cache with
        its entries as ``mm_cache`` and its budget as ``max_size``, as sglang's), with the
        keys it dropped counted as evictions and what the cache holds after it observed."""
        before = set(getattr(cache, "mm_cache", None) or {})
        out = put(*args, **kwargs)
        self.observe_keys(before, getattr(cache, "mm_cache", None) or {}, added=(key,))
        self.observe_entries(getattr(cache, "mm_cache", None), getattr(cache, "max_size", None))
        return out

    def encoded_by(self, ours: Iterable, engine_items: Iterable, rid_by_id: Mapping[int, int]) -> None:
        """``encoded`` for an engine's items (``ours``: our items for them, in order), each
        one's request looked up by the engine item's identity."""
        self.encoded(ours, [rid_by_id.get(id(it)) for it in engine_items])

    def observe_keys(self, before: Iterable, after: Iterable, added: Iterable = ()) -> None:
        """Evictions between two views of the cache's keys (``added``: stored meanwhile)."""
        gone = set(before) - set(after) - set(added)
        self.evictions += len(gone)

    @property
    def reencodes(self) -> int:
        return sum(n - 1 for n in self.encodes.values() if n > 1)

    def summary(self) -> Mapping[str, int | None]:
        """The record's fields: cache numbers are None when no cache was observed."""
        cache = self.cache_observed
        return {
            "reencodes": self.reencodes,
            "off_chunk_encodes": self.off_chunk_encodes,
            "cache_evictions": self.evictions if cache else None,
            "cache_retained_bytes": self.retained_peak if cache else None,
            "cache_unaccounted_bytes": self.unaccounted_peak if cache else None,
            "cache_over_budget_bytes": max(0, self.over_budget_peak) if cache else None,
        }
