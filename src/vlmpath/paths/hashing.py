"""What does it cost to hash a multimodal feature, and to hash it again after transport?

The ways (``HASH_PATHS``, named in ``paths.registry``) a receiver can obtain the hash of a
feature that arrived through shared memory (``vlmpath.measure.shm.ShmPointer``):

- ``rehash``: the sender hashes with SHA-256 but the hash is not forwarded (before
  #26082); the receiver recomputes SHA-256 over the attached view. 2 digests per feature.
- ``forwarded``: the sender's SHA-256 travels as ``precomputed_hash``; the receiver
  computes nothing (#26082). 1 digest per feature.
- ``xxh3`` / ``blake3``: the whole pipeline uses a fast 64-bit content hash instead; the
  sender hashes nothing and forwards nothing, the receiver hashes once (the engine's
  default of hashing first in the scheduler). Hash values differ from the SHA-256 paths'
  but are consistent within a path: equal bytes -> equal 64-bit int.

The hash functions themselves live in ``vlmpath.measure.content_hash``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.content_hash import (
    HashStats,
    blake3_tensor_hash,
    hash_feature,
    xxh3_tensor_hash,
)
from vlmpath.measure.shm import ShmLedger, ShmPointer
from vlmpath.paths import registry


# --- hash paths ---------------------------------------------------------------------------
@dataclass(frozen=True)
class HashPath:
    """One way for a receiver to obtain feature hashes after shared-memory transport.

    ``send`` and ``receive`` are pure and cheap to call repeatedly in one process (a
    benchmark may ``pickle_round_trip`` between them); ``hash_transfer.run_transfer``
    runs them in two processes.
    """

    name: str
    summary: str
    sender_hash: Callable[[Any, HashStats | None], int] | None  # None: sender hashes nothing
    forward: bool  # whether the sender's hash travels as precomputed_hash
    receiver_hash: Callable[[ShmPointer, HashStats | None], int]

    def send(
        self, features: Sequence[torch.Tensor], ledger: ShmLedger, stats: HashStats | None = None
    ) -> list[ShmPointer]:
        """Hash (per ``sender_hash``) and wrap each CPU tensor; ``ledger`` owns the segments."""
        out = []
        for f in features:
            if not isinstance(f, torch.Tensor):
                raise VlmpathError(
                    f"HashPath.send({self.name!r}): features must be CPU tensors, got "
                    f"{type(f).__name__}; the engine wraps only tensor features"
                )
            h = self.sender_hash(f, stats) if self.sender_hash is not None else None
            out.append(ledger.create(f, precomputed_hash=h if self.forward else None))
        return out

    def receive(self, pointers: Sequence[ShmPointer], stats: HashStats | None = None) -> list[int]:
        """Hashes of attached pointers (does not materialize)."""
        return [self.receiver_hash(p, stats) for p in pointers]


def _fast_receiver(fn: Callable[[Any, HashStats | None], int]):
    def receive_one(p: ShmPointer, stats: HashStats | None) -> int:
        return fn([p.tensor], stats)  # a forwarded SHA-256 hash would be the wrong function

    return receive_one


# The four paths (``paths.registry.HASH_PATHS`` names each by its attribute here).
REHASH = HashPath("rehash", "SHA-256 on both sides; hash not forwarded (before #26082)",
                  hash_feature, False, hash_feature)
FORWARDED = HashPath("forwarded", "sender SHA-256 forwarded as precomputed_hash (#26082)",
                     hash_feature, True, hash_feature)
XXH3 = HashPath("xxh3", "receiver hashes once with XXH3-64; nothing forwarded",
                None, False, _fast_receiver(xxh3_tensor_hash))
BLAKE3 = HashPath("blake3", "receiver hashes once with BLAKE3 (8 bytes); nothing forwarded",
                  None, False, _fast_receiver(blake3_tensor_hash))
# The registry's one home is ``paths.registry`` (torch-free, entries named lazily); this is
# the same object, under the name ``engines.reference`` and the asv suite (whose files also
# run against older packages, where the registry lived here) import.
HASH_PATHS = registry.HASH_PATHS


def pickle_round_trip(pointers: Sequence[ShmPointer]) -> list[ShmPointer]:
    """Attach in this process exactly as a receiver would (pickle, then unpickle)."""
    return pickle.loads(pickle.dumps(list(pointers)))

