"""Tests for vlmpath.paths.hashing, paths.hash_transfer and vlmpath.measure.shm: hash semantics,
the shared-memory pointer lifecycle (incl. leak safety) and the real two-process exchange."""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.measure import shm as shm_mod
from vlmpath.measure.content_hash import (
    MM_PAD_MODULUS,
    MM_PAD_SHIFT_VALUE,
    HashInputError,
    HashStats,
    blake3_tensor_hash,
    compute_pad_value,
    data_hash,
    gpu_tensor_hash,
    hash_feature,
    tensor_hash,
    xxh3_tensor_hash,
)
from vlmpath.measure.shm import (
    SEGMENT_PREFIX,
    ShmLedger,
    ShmPointer,
    byte_view,
    sweep_orphan_segments,
)
from vlmpath.paths.hash_transfer import ReceiverProcess, run_transfer
from vlmpath.paths.hashing import pickle_round_trip
from vlmpath.paths.registry import HASH_PATHS

DEV_SHM = Path("/dev/shm")
needs_dev_shm = pytest.mark.skipif(not DEV_SHM.is_dir(), reason="needs Linux /dev/shm")


def _rand(*shape: int, dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _sha_u64(b: bytes) -> int:
    return int.from_bytes(hashlib.sha256(b).digest()[:8], "big")


def _raw(t: torch.Tensor) -> bytes:
    return byte_view(t).numpy().tobytes()


def _own_segments() -> set[str]:
    return {p.name for p in DEV_SHM.glob(f"{SEGMENT_PREFIX}{os.getpid()}_*")}


# --- data_hash ------------------------------------------------------------------------------
def test_data_hash_is_first_8_bytes_big_endian_unsigned():
    assert data_hash(b"abc") == _sha_u64(b"abc")
    # an input whose digest starts with a byte >= 0x80 must still come out positive
    b = next(bytes([i]) for i in range(256) if hashlib.sha256(bytes([i])).digest()[0] >= 0x80)
    assert 2**63 <= data_hash(b) < 2**64
    arr = np.frombuffer(b"abcdefgh", dtype=np.uint8)
    assert data_hash(bytearray(b"abc")) == data_hash(memoryview(b"abc")) == data_hash(b"abc")
    assert data_hash(arr) == data_hash(b"abcdefgh")


def test_data_hash_rejects_tuple_with_typeerror():
    with pytest.raises(TypeError, match="tuple does not support the buffer protocol"):
        data_hash((b"a", b"b"))
    with pytest.raises(VlmpathError):
        data_hash([1, 2])


def test_data_hash_counts_digests_and_bytes():
    stats = HashStats()
    data_hash(b"abcd", stats)
    data_hash(b"xy", stats)
    assert (stats.sha256_digests, stats.bytes_hashed) == (2, 6)


# --- tensor_hash ----------------------------------------------------------------------------
def test_tensor_hash_is_sha256_of_raw_bytes_and_single_equals_list():
    a = _rand(3, 5)
    assert tensor_hash(a) == tensor_hash([a]) == _sha_u64(_raw(a)) == data_hash(a.numpy())


def test_tensor_hash_list_is_the_concatenated_byte_stream_in_order():
    a, b = _rand(4, 3), _rand(7, dtype=torch.float16, seed=1)
    stats = HashStats()
    h = tensor_hash([a, b], stats)
    assert h == _sha_u64(_raw(a) + _raw(b))
    assert stats.sha256_digests == 1 and stats.bytes_hashed == a.nbytes + b.nbytes
    assert tensor_hash([[a], [[b]]]) == h  # nested lists flatten
    assert tensor_hash([b, a]) != h  # order matters
    # boundaries, shape and dtype are not hashed: a split tensor hashes like the whole
    assert tensor_hash([a[:1], a[1:]]) == tensor_hash(a) == tensor_hash(a.reshape(-1))
    assert tensor_hash(torch.zeros(4, dtype=torch.float32)) == tensor_hash(
        torch.zeros(4, dtype=torch.int32)
    )


def test_tensor_hash_bf16_works_and_differs_from_float32():
    x = _rand(16, 8)
    bf = x.to(torch.bfloat16)
    assert tensor_hash(bf) == _sha_u64(bf.view(torch.int16).numpy().tobytes())
    assert tensor_hash(bf) != tensor_hash(bf.float())  # same values, different bytes


def test_tensor_hash_uses_contiguous_layout_and_odd_dtypes():
    x = _rand(4, 6)
    assert tensor_hash(x.t()) == tensor_hash(x.t().contiguous()) != tensor_hash(x)
    assert tensor_hash(torch.tensor(3.0)) == _sha_u64(np.float32(3.0).tobytes())
    assert tensor_hash(torch.tensor([True, False])) == _sha_u64(b"\x01\x00")
    g = _rand(3).requires_grad_()
    assert tensor_hash(g) == tensor_hash(g.detach())


def test_tensor_hash_rejects_non_tensors():
    with pytest.raises(TypeError, match="found int"):
        tensor_hash([torch.zeros(2), 3])


# --- fast hashes ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [xxh3_tensor_hash, blake3_tensor_hash])
def test_fast_hashes_are_64bit_stream_hashes(fn):
    a, b = _rand(5, 7), _rand(5, 7, seed=2)
    stats = HashStats()
    h = fn(a, stats)
    assert 0 <= h < 2**64 and stats.fast_digests == 1 and stats.sha256_digests == 0
    assert fn(a.clone()) == h != fn(b)
    assert fn([a[:2], a[2:]]) == h  # same byte-stream semantics as tensor_hash
    assert fn(a.bfloat16()) != fn(a)


# --- gpu_tensor_hash (runs on CPU tensors) --------------------------------------------------
def _gpu_hash_reference(data: bytes) -> int:
    """Scalar transcription of embed-path.md section 4, independent of the torch version."""
    M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
    if not data:
        return 0

    def fmix(h):
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & M32
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & M32
        return h ^ (h >> 16)

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & M32

    s1 = 0x243F6A88
    s2 = ((s1 * 0x9E3779B1) ^ 0xDEADBEEF) & M32
    padded = data + b"\0" * ((-len(data)) % 4)
    words = [int.from_bytes(padded[j : j + 4], "little") for j in range(0, len(padded), 4)]
    total = 0
    for start in range(0, len(words), 8192):
        a1 = a2 = 0
        for i in range(start, min(start + 8192, len(words))):
            v = words[i]
            a1 += fmix(v ^ (((i * 0x27D4EB2D + s1) & M32) ^ rotl(i, 15)))
            a2 += fmix(v ^ (((i * 0x165667B1 + s2) & M32) ^ rotl(i, 13)))
        h1 = fmix((a1 & M32) ^ (len(data) & M32))
        h2 = fmix((a2 & M32) ^ (len(data) & M32))
        total = (total + ((h1 << 32) | h2)) & M64
    z = total
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def test_gpu_tensor_hash_matches_scalar_reference_across_tiles():
    g = torch.Generator().manual_seed(3)
    data = torch.randint(0, 256, (8192 * 4 + 7,), generator=g, dtype=torch.uint8)  # 2 tiles + tail
    stats = HashStats()
    assert gpu_tensor_hash(data, stats) == _gpu_hash_reference(data.numpy().tobytes())
    assert stats.gpu_digests == 1 and stats.bytes_hashed == data.numel()


def test_gpu_tensor_hash_edges():
    assert gpu_tensor_hash(torch.zeros(0, dtype=torch.uint8)) == 0
    one = torch.tensor([1], dtype=torch.uint8)
    assert gpu_tensor_hash(one) != gpu_tensor_hash(torch.tensor([1, 0], dtype=torch.uint8))
    w = torch.tensor([1, 0, 0, 0, 2, 0, 0, 0], dtype=torch.uint8)
    assert gpu_tensor_hash(w) != gpu_tensor_hash(w.roll(4))  # position enters the hash
    with pytest.raises(VlmpathError, match="1-D uint8"):
        gpu_tensor_hash(torch.zeros(4))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device")
def test_tensor_hash_routes_device_tensors_to_gpu_hash():
    a = _rand(64, 9)
    stats = HashStats()
    h = tensor_hash([a.cuda(), a], stats)
    assert stats.gpu_digests == 1 and stats.sha256_digests == 0
    assert h == gpu_tensor_hash(torch.cat([byte_view(a), byte_view(a)]))


# --- hash_feature and pad value -------------------------------------------------------------
def test_hash_feature_dispatch():
    a, b = _rand(3, 4), _rand(2, 4, seed=1)
    assert hash_feature(a) == tensor_hash([a])
    assert hash_feature([a, [b]]) == tensor_hash([a, b])
    assert hash_feature(a.numpy()) == tensor_hash(a)
    assert hash_feature(np.asfortranarray(a.numpy())) == tensor_hash(a)  # contiguous copy
    assert hash_feature(b"raw") == data_hash(b"raw")
    with pytest.raises(TypeError):
        hash_feature([1, 2, 3])  # other list -> data_hash(tuple(...))
    with pytest.raises(TypeError):
        hash_feature([a, b"x"])  # mixed list is "other"
    with pytest.raises(HashInputError, match=r"hash_feature\(\[\]\)"):
        hash_feature([])  # the engine's empty-list edge: TypeError, here with a reason
    with pytest.raises(TypeError):
        hash_feature([[], []])  # flattens to empty


def test_hash_feature_on_pointers_short_circuits_precomputed_hash():
    a, b = _rand(6), _rand(6, seed=1)
    with ShmLedger() as ledger:
        pa, pb = pickle_round_trip([ledger.create(a, precomputed_hash=42), ledger.create(b)])
        stats = HashStats()
        assert hash_feature(pa, stats) == 42 and stats.sha256_digests == 0
        assert hash_feature(pb, stats) == tensor_hash(b) and stats.sha256_digests == 1
        # a list of pointers hashes their views (forwarded hashes are not used)
        assert hash_feature([pa, pb]) == tensor_hash([a, b])
        pa.close(), pb.close()


def test_compute_pad_value():
    assert compute_pad_value(0) == MM_PAD_SHIFT_VALUE == 1_000_000
    assert compute_pad_value(MM_PAD_MODULUS + 5) == 1_000_005
    assert compute_pad_value(2**64 - 1) == 1_000_000 + 2**30 - 1
    with pytest.raises(VlmpathError):
        compute_pad_value("12")


# --- ShmPointer lifecycle (in process) ------------------------------------------------------
@needs_dev_shm
def test_pointer_round_trip_zero_copy_and_materialize_unlinks():
    src = _rand(5, 3, dtype=torch.bfloat16)
    with ShmLedger() as ledger:
        p = ledger.create(src, precomputed_hash=42)
        assert set(p.__getstate__()) == {"shm_name", "shape", "dtype", "precomputed_hash"}
        assert (DEV_SHM / p.shm_name).exists() and not p.is_attached
        with pytest.raises(VlmpathError, match="not attached"):
            p.tensor
        r1, r2 = pickle_round_trip([p]), pickle_round_trip([p])  # independent re-pickles
        q, q2 = r1[0], r2[0]
        assert q.precomputed_hash == 42 and q.dtype == torch.bfloat16 and q.shape == (5, 3)
        assert torch.equal(q.tensor, src)
        q.tensor[0, 0] = 7.0  # zero copy: a write shows through the other attachment
        assert q2.tensor[0, 0].item() == 7.0
        out = q.materialize()
        assert not (DEV_SHM / p.shm_name).exists()
        assert out[0, 0].item() == 7.0 and torch.equal(out[1:], src[1:])
        with pytest.raises(VlmpathError, match="not attached"):
            q.materialize()
        assert torch.equal(q2.materialize(), out)  # FileNotFoundError on unlink is ignored
    assert ledger.cleaned == ()


def test_create_rejects_bad_inputs():
    with pytest.raises(VlmpathError, match="0 bytes"):
        ShmPointer.create(torch.zeros(0, 4))
    with pytest.raises(VlmpathError, match="expected a torch.Tensor"):
        ShmPointer.create(np.zeros(3))
    with pytest.raises(VlmpathError, match="host memory only"):
        ShmPointer.create(torch.zeros(3, device="meta"))


def test_unpickling_a_missing_segment_names_it():
    with ShmLedger() as ledger:
        p = ledger.create(_rand(4))
    blob = pickle.dumps(p)
    with pytest.raises(VlmpathError, match=f"{p.shm_name}.*already unlinked.*never created"):
        pickle.loads(blob)


@needs_dev_shm
def test_error_mid_copy_leaves_no_segment(monkeypatch):
    before = _own_segments()

    def boom(shm, src, nbytes):
        raise RuntimeError("copy failed")

    monkeypatch.setattr(shm_mod, "_copy_into", boom)
    with ShmLedger() as ledger:
        with pytest.raises(RuntimeError, match="copy failed"):
            ledger.create(_rand(8))
        assert ledger.names == ()
    assert _own_segments() == before


@needs_dev_shm
def test_ledger_unlinks_what_no_receiver_materialized():
    with ShmLedger() as ledger:
        kept = ledger.create(_rand(4))
        done = ledger.create(_rand(4, seed=1))
        pickle_round_trip([done])[0].materialize()
        assert (DEV_SHM / kept.shm_name).exists()
    assert ledger.cleaned == (kept.shm_name,)
    assert not (DEV_SHM / kept.shm_name).exists()


@pytest.mark.e2e
@needs_dev_shm
def test_sweep_removes_segments_of_dead_creators_only():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = f"{SEGMENT_PREFIX}{dead.pid}_{'ab' * 6}"
    shm_mod._close(shm_mod._open(orphan, create=True, size=16))
    with ShmLedger() as ledger:
        live = ledger.create(_rand(4))
        removed = sweep_orphan_segments()
        assert orphan in removed and live.shm_name not in removed
        assert not (DEV_SHM / orphan).exists() and (DEV_SHM / live.shm_name).exists()


# --- hash paths (in process) ----------------------------------------------------------------
def test_registry_has_the_paths_and_rejects_unknown_names():
    assert {"rehash", "forwarded", "xxh3", "blake3"} <= set(HASH_PATHS)
    assert HASH_PATHS.default_names() == sorted(HASH_PATHS)
    with pytest.raises(UnknownNameError, match="forwarded"):
        HASH_PATHS["sha1"]


@pytest.mark.parametrize(
    "name, sender_sha, receiver_sha, receiver_fast",
    [("rehash", 1, 1, 0), ("forwarded", 1, 0, 0), ("xxh3", 0, 0, 1), ("blake3", 0, 0, 1)],
)
def test_paths_in_process_count_digests_per_feature(name, sender_sha, receiver_sha, receiver_fast):
    a, b = _rand(8, 3), _rand(8, 3, seed=1)
    feats = [a, a.clone(), b]
    path = HASH_PATHS[name]
    s_stats, r_stats = HashStats(), HashStats()
    with ShmLedger() as ledger:
        hashes = path.receive(pickle_round_trip(path.send(feats, ledger, s_stats)), r_stats)
    assert s_stats.sha256_digests == sender_sha * 3 and s_stats.fast_digests == 0
    assert r_stats.sha256_digests == receiver_sha * 3 and r_stats.fast_digests == receiver_fast * 3
    assert hashes[0] == hashes[1] != hashes[2] and all(0 <= h < 2**64 for h in hashes)
    if name in ("rehash", "forwarded"):
        assert hashes == [tensor_hash(f) for f in feats]


def test_send_rejects_non_tensor_features():
    with ShmLedger() as ledger, pytest.raises(VlmpathError, match="CPU tensors"):
        HASH_PATHS["forwarded"].send([np.zeros(3)], ledger)


# --- the real two-process exchange ----------------------------------------------------------
@pytest.fixture(scope="module")
def receiver():
    with ReceiverProcess(timeout_s=120) as rx:
        yield rx


@pytest.mark.e2e
@needs_dev_shm
def test_cross_process_paths(receiver):
    a, b = _rand(33, 17), _rand(33, 17, seed=1)
    feats = [a, a.clone(), b, a.bfloat16()]
    local = [tensor_hash(f) for f in feats]
    results = {name: run_transfer(feats, name, receiver=receiver, return_tensors=True)
               for name in ("forwarded", "rehash", "xxh3", "blake3")}
    for name, r in results.items():
        assert r.cleaned_by_ledger == (), name
        assert not any((DEV_SHM / n).exists() for n in r.segment_names), name
        assert all(torch.equal(x, y) for x, y in zip(r.received.tensors, feats)), name
        h = r.received.hashes
        assert h[0] == h[1] and len({h[0], h[2], h[3]}) == 3, name  # dedup semantics
    fwd, re = results["forwarded"], results["rehash"]
    assert fwd.received.hashes == fwd.forwarded_hashes == local
    assert fwd.received.stats.sha256_digests == 0 and fwd.sender_stats.sha256_digests == 4
    assert re.forwarded_hashes == [None] * 4
    assert re.received.hashes == local  # same bytes -> same hash in another process
    assert re.received.stats.sha256_digests == 4
    assert re.received.stats.bytes_hashed == sum(f.nbytes for f in feats)
    assert results["xxh3"].received.hashes == [xxh3_tensor_hash(f) for f in feats]
    assert results["blake3"].received.stats.fast_digests == 4
    assert receiver.data_hash(b"determinism") == data_hash(b"determinism")


@needs_dev_shm
def test_receiver_reports_errors_and_keeps_serving(receiver):
    with ShmLedger() as ledger:
        p = ledger.create(_rand(4))
    with pytest.raises(VlmpathError, match=f"{p.shm_name}.*already unlinked"):
        receiver.transfer([p], "rehash")
    with pytest.raises(UnknownNameError):
        receiver.transfer([], "nope")
    assert receiver.data_hash(b"x") == data_hash(b"x")


@pytest.mark.e2e
@needs_dev_shm
def test_killed_receiver_leaks_nothing_after_ledger_exit():
    before = _own_segments()
    rx = ReceiverProcess(timeout_s=120)
    try:
        with ShmLedger() as ledger:
            ptrs = HASH_PATHS["forwarded"].send([_rand(64, 8), _rand(3, seed=1)], ledger)
            names = [p.shm_name for p in ptrs]
            assert rx.hold(ptrs) == names  # attached in the receiver, not materialized
            rx.kill()
            assert not rx.is_alive()
            assert all((DEV_SHM / n).exists() for n in names)
        assert ledger.cleaned == tuple(names)
        assert not any((DEV_SHM / n).exists() for n in names)
        assert _own_segments() == before
    finally:
        rx.close()


def _python_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


@pytest.mark.e2e
@needs_dev_shm
def test_reader_with_its_own_tracker_does_not_unlink_at_exit(tmp_path):
    """An unrelated process (own resource tracker) attaches, reads, exits: the segment
    must survive (before 3.13 its tracker would unlink it and warn), then the ledger
    removes it."""
    src = _rand(10, 3)
    with ShmLedger() as ledger:
        p = ledger.create(src)
        blob = tmp_path / "ptr.pkl"
        blob.write_bytes(pickle.dumps(p))
        code = (
            "import pickle, sys, torch; import vlmpath.measure.shm\n"
            f"q = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
            "print(float(q.tensor.sum())); q.close()\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=_python_env(), timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert float(proc.stdout) == pytest.approx(float(src.sum()), rel=1e-5)
        assert "leaked" not in proc.stderr and "resource_tracker" not in proc.stderr
        assert (DEV_SHM / p.shm_name).exists()
    assert ledger.cleaned == (p.shm_name,)


@pytest.mark.e2e
@needs_dev_shm
def test_resource_tracker_stays_quiet_in_a_fresh_interpreter(tmp_path):
    """No 'leaked shared_memory' warning and no tracker KeyError at interpreter exit."""
    script = tmp_path / "exchange.py"
    script.write_text(textwrap.dedent("""
        import torch
        from vlmpath.paths.hash_transfer import ReceiverProcess, run_transfer
        from vlmpath.paths.registry import HASH_PATHS
        from vlmpath.measure.shm import ShmLedger

        if __name__ == "__main__":
            feats = [torch.arange(12.0), torch.ones(5)]
            with ReceiverProcess() as rx:
                r = run_transfer(feats, "rehash", receiver=rx)
                assert r.cleaned_by_ledger == ()
                with ShmLedger() as ledger:
                    rx.hold(HASH_PATHS["forwarded"].send(feats, ledger))
                    rx.kill()
                assert len(ledger.cleaned) == 2
            print("done")
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=_python_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    for bad in ("resource_tracker", "leaked", "KeyError", "Traceback"):
        assert bad not in proc.stderr, proc.stderr
