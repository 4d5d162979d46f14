"""What is a multimodal feature's content hash, and its pad value?

Reference implementations of the engine's content hashes (embed-path.md section 4):
``data_hash`` (SHA-256, first 8 bytes), ``tensor_hash`` (raw bytes streamed into one
SHA-256), the fast alternatives (XXH3-64, BLAKE3), the GPU tile hash, ``hash_feature``
(the dispatch with the shared-memory short-circuit) and ``compute_pad_value``. Every
function takes an optional ``HashStats`` it increments, so tests and benchmarks can count
digests.

Hash semantics: the hash covers the *byte stream* of the (flattened, contiguous) tensors in
order. Shape, dtype and tensor boundaries are not hashed: ``[a[:2], a[2:]]`` hashes like
``[a]``, and float32 zeros like int32 zeros, while bf16 and float32 of the same values
differ (different bytes). The competing ways a receiver obtains a hash live one layer up,
in ``vlmpath.paths.hashing``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import blake3
import numpy as np
import torch
import xxhash

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.shm import ShmPointer, byte_view

#: pad_value = MM_PAD_SHIFT_VALUE + hash % MM_PAD_MODULUS; keeps pad ids above any vocab
#: id (vocab must be <= 1e6) so the radix cache keys on content identity.
MM_PAD_SHIFT_VALUE = 1_000_000
MM_PAD_MODULUS = 2**30
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


class HashInputError(VlmpathError, TypeError):
    """Input a hash cannot take; a TypeError, as the engine raises, with a clearer message."""


@dataclass
class HashStats:
    """Counters one caller passes explicitly to the hash functions (never global)."""

    sha256_digests: int = 0
    fast_digests: int = 0  # xxh3 / blake3
    gpu_digests: int = 0  # gpu_tensor_hash calls (each ends in one device sync)
    bytes_hashed: int = 0


def compute_pad_value(hash_value: int) -> int:
    """The pad token id derived from a feature hash."""
    if not isinstance(hash_value, int) or isinstance(hash_value, bool):
        raise VlmpathError(
            f"compute_pad_value: hash must be an int, got {type(hash_value).__name__}; "
            "pass the value returned by hash_feature"
        )
    return MM_PAD_SHIFT_VALUE + hash_value % MM_PAD_MODULUS


def flatten(nested: Any) -> list[Any]:
    """Flatten nested lists (only lists: tuples and tensors are leaves)."""
    if not isinstance(nested, list):
        return [nested]
    out: list[Any] = []
    for x in nested:
        out.extend(flatten(x))
    return out


def _u64(digest: bytes) -> int:
    return int.from_bytes(digest[:8], "big")  # unsigned by construction


def data_hash(b: Any, stats: HashStats | None = None) -> int:
    """First 8 bytes of SHA-256 of a buffer-protocol object, big-endian unsigned."""
    try:
        mv = memoryview(b)
    except TypeError:
        raise HashInputError(
            f"data_hash: {type(b).__name__} does not support the buffer protocol; pass "
            "bytes, bytearray, memoryview or a contiguous ndarray (hash tensors or lists "
            "of tensors with tensor_hash)"
        ) from None
    digest = hashlib.sha256(mv).digest()
    if stats is not None:
        stats.sha256_digests += 1
        stats.bytes_hashed += mv.nbytes
    return _u64(digest)


def _tensors(t: torch.Tensor | list, fn: str) -> list[torch.Tensor]:
    items = flatten(t)
    for x in items:
        if not isinstance(x, torch.Tensor):
            raise HashInputError(
                f"{fn}: expected tensors (or nested lists of tensors), found "
                f"{type(x).__name__}; use hash_feature for other feature types"
            )
    return items


def _stream(tensors: Iterable[torch.Tensor], update: Callable[[Any], None]) -> int:
    """Feed each tensor's bytes, in order and without concatenating; returns byte count."""
    n = 0
    for x in tensors:
        b = byte_view(x).numpy()
        update(b)
        n += b.nbytes
    return n


def tensor_hash(t: torch.Tensor | list, stats: HashStats | None = None) -> int:
    """Content hash of a tensor or (nested) list of tensors.

    All on CPU: one SHA-256 over the tensors' raw bytes in order, first 8 bytes
    big-endian. Any CUDA tensor: the bytes are concatenated on that device and hashed
    with ``gpu_tensor_hash`` (a different function: one device sync per call).
    """
    tensors = _tensors(t, "tensor_hash")
    cuda = [x.device for x in tensors if x.device.type == "cuda"]
    if cuda:
        flat = torch.cat([byte_view(x.to(cuda[0])) for x in tensors])
        return gpu_tensor_hash(flat, stats)
    h = hashlib.sha256()
    n = _stream(tensors, h.update)
    if stats is not None:
        stats.sha256_digests += 1
        stats.bytes_hashed += n
    return _u64(h.digest())


def xxh3_tensor_hash(t: torch.Tensor | list, stats: HashStats | None = None) -> int:
    """XXH3-64 over the same byte stream as ``tensor_hash`` (CPU; CUDA is copied over)."""
    h = xxhash.xxh3_64()
    n = _stream((x.cpu() for x in _tensors(t, "xxh3_tensor_hash")), h.update)
    if stats is not None:
        stats.fast_digests += 1
        stats.bytes_hashed += n
    return h.intdigest()


def blake3_tensor_hash(t: torch.Tensor | list, stats: HashStats | None = None) -> int:
    """BLAKE3 over the same byte stream, first 8 bytes big-endian (CUDA is copied over)."""
    h = blake3.blake3()
    n = _stream((x.cpu() for x in _tensors(t, "blake3_tensor_hash")), h.update)
    if stats is not None:
        stats.fast_digests += 1
        stats.bytes_hashed += n
    return _u64(h.digest(length=8))


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    # Values stay in [0, 2**32) in int64; a product may wrap int64 but its low 32 bits,
    # all we keep, are exact.
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _rotl32(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) | (x >> (32 - r))) & _M32


_GPU_SEED1 = 0x243F6A88
_GPU_SEED2 = ((_GPU_SEED1 * 0x9E3779B1) ^ 0xDEADBEEF) & _M32
_GPU_TILE_WORDS = 8192


def gpu_tensor_hash(data: torch.Tensor, stats: HashStats | None = None) -> int:
    """The engine's GPU content hash, written in torch ops from the description.

    Runs on any device (CPU for tests). ``data`` is a 1-D uint8 tensor. Bytes are read as
    little-endian uint32 words (zero-padded); each word is mixed with its global index
    under two seeds, summed per 8192-word tile, finished per tile with the byte count and
    fmix32, packed ``(h1 << 32) | h2`` and added with wrapping u64 arithmetic; one
    ``.tolist()`` (**a device sync**) brings the sum to the host for a splitmix64 finish.
    Not checked bit-for-bit against the engine's Triton kernel: an opaque but faithful-
    in-structure hash (order-sensitive through the index, 0 for empty input).
    """
    if data.dtype != torch.uint8 or data.dim() != 1:
        raise VlmpathError(
            f"gpu_tensor_hash: expected a 1-D uint8 tensor, got {data.dtype} with shape "
            f"{tuple(data.shape)}; pass shm.byte_view(t)"
        )
    nbytes = data.numel()
    if stats is not None:
        stats.gpu_digests += 1
        stats.bytes_hashed += nbytes
    if nbytes == 0:
        return 0
    pad = (-nbytes) % 4
    if pad:
        data = torch.cat([data, data.new_zeros(pad)])
    words = data.view(torch.int32).to(torch.int64) & _M32
    i = torch.arange(words.numel(), device=data.device, dtype=torch.int64)
    p1 = ((i * 0x27D4EB2D + _GPU_SEED1) & _M32) ^ _rotl32(i & _M32, 15)
    p2 = ((i * 0x165667B1 + _GPU_SEED2) & _M32) ^ _rotl32(i & _M32, 13)
    k = torch.stack([_fmix32(words ^ p1), _fmix32(words ^ p2)])  # [2, n_words]
    tail = (-words.numel()) % _GPU_TILE_WORDS  # zeros added AFTER mixing: sums unchanged
    k = torch.nn.functional.pad(k, (0, tail)).view(2, -1, _GPU_TILE_WORDS)
    tiles = _fmix32((k.sum(dim=2) & _M32) ^ (nbytes & _M32))  # [2, n_tiles]
    hi, lo = tiles.sum(dim=1).tolist()  # the one host sync
    z = ((hi << 32) + lo) & _M64  # == wrapping u64 sum of (h1 << 32) | h2 over tiles
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def hash_feature(f: Any, stats: HashStats | None = None) -> int:
    """The engine's dispatch from a feature of any supported type to its 64-bit hash.

    - list: flattened first. All ``ShmPointer`` -> ``tensor_hash`` of their attached views
      (forwarded hashes ignored); all tensors -> ``tensor_hash(list)``; anything else ->
      ``data_hash(tuple(...))``, which raises ``HashInputError`` (a TypeError). ``[]``
      raises too: the engine's ``len(f) > 0`` guard sends it to that last branch, where
      ``data_hash(())`` raises TypeError; we keep the type and say why.
    - ndarray -> SHA-256 of its contiguous buffer (equals ``tensor_hash`` of the same bytes).
    - Tensor -> ``tensor_hash([f])``.
    - ShmPointer -> its ``precomputed_hash`` if set (no digest), else ``tensor_hash``.
    - anything else -> ``data_hash(f)``.
    """
    if isinstance(f, list):
        items = flatten(f)
        if not items:
            raise HashInputError(
                "hash_feature([]): an empty feature list has no content to hash (the "
                "engine sends it to data_hash(tuple()), a TypeError); drop the empty "
                "item or set its hash explicitly"
            )
        if all(isinstance(x, ShmPointer) for x in items):
            return tensor_hash([x.tensor for x in items], stats)
        if all(isinstance(x, torch.Tensor) for x in items):
            return tensor_hash(items, stats)
        return data_hash(tuple(items), stats)
    if isinstance(f, np.ndarray):
        return data_hash(np.ascontiguousarray(f), stats)
    if isinstance(f, torch.Tensor):
        return tensor_hash([f], stats)
    if isinstance(f, ShmPointer):
        if f.precomputed_hash is not None:
            return f.precomputed_hash
        return tensor_hash([f.tensor], stats)
    return data_hash(f, stats)
