"""The embedding cache: which encoder outputs are kept, and how are their bytes counted?

Semantics of the engine's static multimodal cache (embed-path.md section 2): a
byte-bounded LRU keyed by an item hash (``get_single``) or by the combined hash of a
request's items (``get``); both refresh recency on a hit; ``set`` never overwrites a
present key (it refreshes it); a new entry evicts least-recently-used ones until it fits,
and is refused if it cannot fit in an empty cache. An entry larger than the whole cache is
refused *before* anything is evicted (``evict_before_refusing=False``, the default): the
engine's older loop emptied the cache first and then gave up, so one oversize item flushed
every entry (kept as ``evict_before_refusing=True``, what tests plant).

Bytes are ``numel * element_size`` of the stored tensor. Entries *own their storage*: a
view into a larger tensor (a split of a batched encoder output) is cloned before it is
stored, otherwise the cache would pin the whole batch while counting only the view.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from vlmpath.core.errors import VlmpathError


def combine_hashes(hashes: Sequence[int]) -> int | None:
    """One key for a request's items, or None for no items. Python's ``hash`` of a tuple of
    ints is not salted, so the key is stable within and across processes."""
    if not hashes:
        return None
    # An int tag, not a string: str hashes are salted per process (PYTHONHASHSEED).
    return hash((0x766C6D70, tuple(hashes)))


def owns_storage(t: torch.Tensor) -> bool:
    """True if ``t`` spans its whole storage (so its bytes are all it keeps alive)."""
    return t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    refused: int = 0


class EmbeddingCache:
    """Byte-bounded LRU of encoder rows."""

    def __init__(self, max_bytes: int, *, evict_before_refusing: bool = False):
        if max_bytes <= 0:
            raise VlmpathError(f"cache size must be positive, got {max_bytes} bytes")
        self.max_bytes = max_bytes
        self.evict_before_refusing = evict_before_refusing
        self.cur_bytes = 0
        self.stats = CacheStats()
        self._entries: OrderedDict[int, torch.Tensor] = OrderedDict()

    @staticmethod
    def nbytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    def _lookup(self, key: int | None) -> torch.Tensor | None:
        if key is None or key not in self._entries:
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return self._entries[key]

    def get(self, hashes: Sequence[int]) -> torch.Tensor | None:
        """Entry under the combined key of ``hashes``."""
        return self._lookup(combine_hashes(hashes))

    def get_single(self, h: int) -> torch.Tensor | None:
        """Entry under one item's hash."""
        return self._lookup(h)

    def set(self, key: int, emb: torch.Tensor) -> bool:
        """Store ``emb`` under ``key``; never overwrites. False if it cannot fit at all."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return True
        size = self.nbytes(emb)
        if size > self.max_bytes and not self.evict_before_refusing:
            self.stats.refused += 1
            return False
        while self._entries and self.cur_bytes + size > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.cur_bytes -= self.nbytes(old)
            self.stats.evictions += 1
        if self.cur_bytes + size > self.max_bytes:
            self.stats.refused += 1
            return False
        self._entries[key] = emb if owns_storage(emb) else emb.clone()
        self.cur_bytes += size
        return True

    def tensors(self) -> list[torch.Tensor]:
        """The tensors the cache holds now (what its storage keeps alive)."""
        return list(self._entries.values())

    def has(self, key: int) -> bool:
        return key in self._entries

    def free(self, key: int) -> bool:
        old = self._entries.pop(key, None)
        if old is None:
            return False
        self.cur_bytes -= self.nbytes(old)
        return True

    def clear(self) -> None:
        self._entries.clear()
        self.cur_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
