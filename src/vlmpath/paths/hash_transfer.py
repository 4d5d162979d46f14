"""Does a feature's hash survive a real hop between two processes through shared memory?

The exerciser behind the hash-path tests: ``run_transfer`` sends features along one of
``hashing.HASH_PATHS`` to a *spawned* receiver process (``ReceiverProcess``), which
attaches the segments by unpickling the pointers, hashes them the way the path says,
materializes them (unlinking the segments) and reports back (``Received``). The sender's
``ShmLedger`` unlinks whatever the receiver left behind, so a crashed receiver leaks
nothing. The receiver's entry point, ``_receiver_main``, lives at module level here so
the spawn start method can import it by name in the child.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.content_hash import HashStats, data_hash
from vlmpath.measure.shm import ShmLedger, ShmPointer
from vlmpath.paths.registry import HASH_PATHS


@dataclass(frozen=True)
class Received:
    """What the receiver process reports for one exchange."""

    hashes: list[int]
    stats: HashStats
    tensors: list[torch.Tensor] | None  # materialized copies, when asked for


@dataclass(frozen=True)
class TransferResult:
    path: str
    forwarded_hashes: list[int | None]  # precomputed_hash of each pointer as sent
    sender_stats: HashStats
    received: Received
    segment_names: tuple[str, ...]
    cleaned_by_ledger: tuple[str, ...]  # segments the receiver left behind (should be ())


def _receiver_main(conn: Connection) -> None:
    """Receiver loop (spawned process): requests are tuples, answers ("ok"|"error", x)."""
    held: list[ShmPointer] = []  # attached but deliberately not materialized ("hold")
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        try:
            if msg[0] == "transfer":
                _, path_name, payload, want_tensors = msg
                pointers = pickle.loads(payload)  # attaches every segment
                stats = HashStats()
                hashes = HASH_PATHS[path_name].receive(pointers, stats)
                tensors = [p.materialize() for p in pointers]
                answer: Any = Received(hashes, stats, tensors if want_tensors else None)
            elif msg[0] == "hold":
                held.extend(pickle.loads(msg[1]))
                answer = [p.shm_name for p in held]
            elif msg[0] == "data_hash":
                answer = data_hash(msg[1])
            else:
                raise VlmpathError(f"unknown receiver request {msg[0]!r}")
            conn.send(("ok", answer))
        except Exception as exc:  # report, keep serving
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ReceiverProcess:
    """A spawned receiver process, reusable across exchanges (spawn + torch import ~3 s).

    ``timeout_s`` bounds each request so a wedged receiver fails a test instead of
    hanging it.
    """

    def __init__(self, *, timeout_s: float = 60.0):
        ctx = mp.get_context("spawn")
        self.timeout_s = timeout_s
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_receiver_main, args=(child,), daemon=True)
        self._proc.start()
        child.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def is_alive(self) -> bool:
        return self._proc.is_alive()

    def _call(self, *msg: Any) -> Any:
        try:
            self._conn.send(msg)
            if not self._conn.poll(self.timeout_s):
                raise VlmpathError(
                    f"receiver pid {self.pid} did not answer {msg[0]!r} within "
                    f"{self.timeout_s} s; raise timeout_s on a slow machine"
                )
            status, payload = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise VlmpathError(
                f"receiver pid {self.pid} exited (exit code {self._proc.exitcode}) during "
                f"{msg[0]!r}; start a new ReceiverProcess"
            ) from None
        if status == "error":
            raise VlmpathError(f"receiver failed on {msg[0]!r}: {payload}")
        return payload

    def transfer(
        self, pointers: Sequence[ShmPointer], path_name: str, *, return_tensors: bool = False
    ) -> Received:
        """Receiver attaches, hashes per ``path_name``, materializes (unlinks), reports."""
        HASH_PATHS[path_name]  # unknown names fail here, with the choices listed
        return self._call("transfer", path_name, pickle.dumps(list(pointers)), return_tensors)

    def hold(self, pointers: Sequence[ShmPointer]) -> list[str]:
        """Receiver attaches and keeps the pointers without materializing them."""
        return self._call("hold", pickle.dumps(list(pointers)))

    def data_hash(self, b: bytes) -> int:
        return self._call("data_hash", bytes(b))

    def kill(self) -> None:
        """SIGKILL: the receiver dies without any cleanup (the ledger must cope)."""
        self._proc.kill()
        self._proc.join()

    def close(self) -> None:
        if self._proc.is_alive():
            try:
                self._conn.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(self.timeout_s)
            if self._proc.is_alive():
                self.kill()
        self._conn.close()

    def __enter__(self) -> ReceiverProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_transfer(
    features: Sequence[torch.Tensor],
    path_name: str,
    *,
    receiver: ReceiverProcess | None = None,
    return_tensors: bool = False,
    timeout_s: float = 60.0,
) -> TransferResult:
    """Send ``features`` to a receiver process through shared memory along one hash path.

    Spawns a receiver unless one is given (pass one to amortise the spawn over many
    exchanges). The sender's ``ShmLedger`` unlinks anything the receiver left behind.
    """
    path = HASH_PATHS[path_name]
    sender_stats = HashStats()
    rx = receiver if receiver is not None else ReceiverProcess(timeout_s=timeout_s)
    try:
        with ShmLedger() as ledger:
            pointers = path.send(features, ledger, sender_stats)
            received = rx.transfer(pointers, path_name, return_tensors=return_tensors)
    finally:
        if receiver is None:
            rx.close()
    return TransferResult(
        path=path_name,
        forwarded_hashes=[p.precomputed_hash for p in pointers],
        sender_stats=sender_stats,
        received=received,
        segment_names=tuple(p.shm_name for p in pointers),
        cleaned_by_ledger=ledger.cleaned,
    )
