"""How does a CPU feature tensor travel between processes without a copy through a pipe?

``ShmPointer`` replays the engine's shared-memory pointer lifecycle over a real
``multiprocessing.shared_memory.SharedMemory`` segment:

- **create** (sender): CPU, contiguous; a segment of exactly ``nbytes`` (0 is rejected);
  the bytes are copied through uint8 views; on any error during the copy the segment is
  closed and unlinked and the error re-raised; otherwise the sender keeps only the name
  and closes its mapping **without unlinking** (ownership travels with the pickle).
- **pickle**: ``__getstate__`` is ``{shm_name, shape, dtype, precomputed_hash}``;
  ``__setstate__`` attaches by name and exposes ``.tensor``, a zero-copy view.
- **materialize()** (receiver): clone, close, unlink (``FileNotFoundError`` ignored:
  another receiver of the same pointer may have unlinked first). ``__del__`` only closes.

Leak safety. In the engine a segment leaks if no receiver materializes it. Here the
sender owns a ``ShmLedger`` that records every name it created and, on exit, unlinks
whatever is still present (receiver crashed, was killed, or never got the message). A
sender that is itself killed cannot clean up; ``sweep_orphan_segments`` removes segments
whose creating process (its pid is part of the name) no longer exists.

Resource tracker (deliberate). Python's ``resource_tracker`` keeps ONE set of names per
tracker process, shared by the processes ``multiprocessing`` spawned, and before 3.13 it
registers a segment on *attach* as well as on create (so a receiver's tracker may unlink
a segment it merely read, and warns about "leaked" segments at exit). We keep **no**
segment registered, on any Python: 3.13+ opens with ``track=False``; older versions
unregister right after opening and re-register just before ``unlink()`` (whose built-in
unregister would otherwise hit a missing entry and print a ``KeyError`` from the tracker).
Cleanup is therefore the ledger's job, never the tracker's. Only cosmetic residue is
possible: two processes sharing a tracker that unlink the same name at the same instant
can make the tracker print one ``KeyError``.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import sys
from multiprocessing import resource_tracker
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import torch

from vlmpath.core.errors import VlmpathError

#: Every segment vlmpath creates is named ``vlmpath_<creator pid>_<12 hex>`` (28 chars at
#: most: fits macOS's 31-char limit) so an orphan can be attributed to a dead creator.
SEGMENT_PREFIX = "vlmpath_"
_SEGMENT_RE = re.compile(r"^vlmpath_(\d+)_[0-9a-f]{12}$")
_TRACK_KW = sys.version_info >= (3, 13)  # SharedMemory(track=False) exists from 3.13
_POSIX = os.name == "posix"  # the resource tracker only handles POSIX segments


def byte_view(t: torch.Tensor) -> torch.Tensor:
    """Flat uint8 view of ``t``'s contiguous bytes (any dtype, bf16 included; no cast)."""
    # .numpy() fails for bf16, so reinterpret as uint8 first; contiguous() copies only when
    # the tensor is not already dense (the engine hashes and ships the contiguous layout).
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _new_segment_name() -> str:
    return f"{SEGMENT_PREFIX}{os.getpid()}_{secrets.token_hex(6)}"


def _open(name: str, *, create: bool, size: int = 0) -> SharedMemory:
    """Open or create a segment that is NOT registered with the resource tracker."""
    if _TRACK_KW:
        return SharedMemory(name=name, create=create, size=size, track=False)
    shm = SharedMemory(name=name, create=create, size=size)
    if _POSIX:
        # _name is the "/"-prefixed name SharedMemory registered under.
        resource_tracker.unregister(shm._name, "shared_memory")
    return shm


def _unlink(shm: SharedMemory) -> None:
    """Unlink without leaving the tracker unbalanced; raises FileNotFoundError if gone."""
    if _TRACK_KW or not _POSIX:
        shm.unlink()
        return
    # unlink() sends UNREGISTER after a successful shm_unlink; pair it with a REGISTER.
    resource_tracker.register(shm._name, "shared_memory")
    try:
        shm.unlink()
    except BaseException:
        resource_tracker.unregister(shm._name, "shared_memory")
        raise


def _close(shm: SharedMemory) -> None:
    try:
        shm.close()
    except BufferError:
        # Someone still holds a view into the mapping (e.g. kept ``pointer.tensor`` past
        # materialize()); the mapping then lives until those views die. Unlinking works
        # regardless, so this never leaks a segment.
        pass


def unlink_segment(name: str) -> bool:
    """Unlink segment ``name`` if it exists; True when this call removed it."""
    try:
        shm = _open(name, create=False)
    except FileNotFoundError:
        return False
    _close(shm)
    try:
        _unlink(shm)
    except FileNotFoundError:
        return False
    return True


def _copy_into(shm: SharedMemory, src: torch.Tensor, nbytes: int) -> None:
    dst = torch.frombuffer(shm.buf, dtype=torch.uint8, count=nbytes)
    try:
        dst.copy_(byte_view(src))
    finally:
        # Drop the buffer export even on error: the traceback keeps this frame alive and
        # an export would make the caller's close() raise BufferError.
        del dst


class ShmPointer:
    """A feature tensor living in a named shared-memory segment (see module docstring).

    The sender's handle (from ``create``) is detached: only the name, shape, dtype and
    ``precomputed_hash``. Unpickling attaches and makes ``.tensor`` available.
    """

    def __init__(
        self,
        shm_name: str,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        precomputed_hash: int | None = None,
    ):
        self.shm_name = shm_name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.precomputed_hash = precomputed_hash
        self._shm: SharedMemory | None = None
        self._view: torch.Tensor | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()

    @classmethod
    def create(
        cls,
        tensor: torch.Tensor,
        precomputed_hash: int | None = None,
        *,
        ledger: ShmLedger | None = None,
    ) -> ShmPointer:
        """Copy ``tensor`` into a new segment; the returned handle is detached.

        Pass ``ledger`` (or use ``ShmLedger.create``) so the segment has an owner that
        unlinks it if no receiver materializes it; without one, a lost pointer leaks.
        """
        if not isinstance(tensor, torch.Tensor):
            raise VlmpathError(
                f"ShmPointer.create: got {type(tensor).__name__}, expected a torch.Tensor; "
                "convert ndarrays with torch.from_numpy first"
            )
        if tensor.device.type != "cpu":
            raise VlmpathError(
                f"ShmPointer.create: tensor is on {tensor.device}; shared memory holds host "
                "memory only: pass tensor.cpu() (or use CUDA IPC for device tensors)"
            )
        src = tensor.detach().contiguous()
        nbytes = src.numel() * src.element_size()
        if nbytes == 0:
            raise VlmpathError(
                f"ShmPointer.create: tensor of shape {tuple(src.shape)} has 0 bytes and "
                "SharedMemory cannot hold an empty segment: send empty features inline"
            )
        shm = _open(_new_segment_name(), create=True, size=nbytes)
        if ledger is not None:
            ledger._add(shm.name)  # recorded before the copy so no window is unowned
        try:
            _copy_into(shm, src, nbytes)
        except BaseException:
            _close(shm)
            _unlink(shm)
            if ledger is not None:
                ledger._discard(shm.name)
            raise
        _close(shm)  # keep the name, close without unlinking: the receiver unlinks
        return cls(shm.name, tuple(src.shape), src.dtype, precomputed_hash)

    # --- pickling: the only way to attach -----------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {
            "shm_name": self.shm_name,
            "shape": self.shape,
            "dtype": self.dtype,
            "precomputed_hash": self.precomputed_hash,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["shm_name"], state["shape"], state["dtype"], state["precomputed_hash"])
        try:
            shm = _open(self.shm_name, create=False)
        except FileNotFoundError:
            raise VlmpathError(
                f"cannot attach shared-memory segment {self.shm_name!r}: it was already "
                "unlinked (materialize() or the sender's ShmLedger exit ran) or never "
                "created; unpickle a pointer while its sender's ledger is open and "
                "materialize it once"
            ) from None
        self._shm = shm
        # count= because a segment may be rounded up to a page on some platforms.
        flat = torch.frombuffer(shm.buf, dtype=torch.uint8, count=self.nbytes)
        self._view = flat.view(self.dtype).view(self.shape)

    # --- receiver side ------------------------------------------------------------------
    @property
    def is_attached(self) -> bool:
        return self._view is not None

    @property
    def tensor(self) -> torch.Tensor:
        """Zero-copy view into the segment; valid until ``materialize()``/``close()``."""
        if self._view is None:
            raise VlmpathError(
                f"ShmPointer {self.shm_name!r} is not attached (a sender handle, or already "
                "materialized/closed): pickle it and unpickle it in the receiver"
            )
        return self._view

    def materialize(self) -> torch.Tensor:
        """Return a private clone, then close and unlink the segment."""
        out = self.tensor.clone()
        shm, self._shm, self._view = self._shm, None, None
        assert shm is not None
        _close(shm)
        try:
            _unlink(shm)
        except FileNotFoundError:
            pass  # another receiver of the same pointer (another TP rank) unlinked it
        return out

    def close(self) -> None:
        """Drop this process's mapping without unlinking the segment."""
        shm, self._shm, self._view = self._shm, None, None
        if shm is not None:
            _close(shm)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules may already be gone
            pass

    def __repr__(self) -> str:
        state = "attached" if self.is_attached else "detached"
        return (
            f"ShmPointer({self.shm_name!r}, shape={self.shape}, dtype={self.dtype}, "
            f"precomputed_hash={self.precomputed_hash}, {state})"
        )


class ShmLedger:
    """Sender-side owner of the segments it creates.

    Use as a context manager around one send/receive exchange. On exit every recorded
    segment that still exists is unlinked; ``cleaned`` lists those names (non-empty means
    a receiver did not materialize: crashed, killed, or never received the pointer).
    """

    def __init__(self) -> None:
        self._names: dict[str, None] = {}  # insertion-ordered set
        self.cleaned: tuple[str, ...] = ()

    def create(self, tensor: torch.Tensor, precomputed_hash: int | None = None) -> ShmPointer:
        return ShmPointer.create(tensor, precomputed_hash, ledger=self)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    def _add(self, name: str) -> None:
        self._names[name] = None

    def _discard(self, name: str) -> None:
        self._names.pop(name, None)

    def release(self) -> tuple[str, ...]:
        """Unlink every recorded segment still present; returns (and keeps) those names."""
        names, self._names = list(self._names), {}
        self.cleaned = tuple(n for n in names if unlink_segment(n))
        return self.cleaned

    def __enter__(self) -> ShmLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


def sweep_orphan_segments(directory: str | os.PathLike[str] = "/dev/shm") -> list[str]:
    """Unlink vlmpath segments whose creating process no longer exists (Linux).

    The recovery for a sender killed before its ledger ran. A recycled pid makes a
    segment look alive and it is kept (safe direction). Returns the names unlinked.
    Only safe when every process that may create vlmpath segments in ``directory``
    shares this PID namespace: containers sharing one /dev/shm (``docker --ipc=host``)
    see each other's live creators as dead.
    """
    root = Path(directory)
    if not root.is_dir():
        return []
    removed = []
    for entry in sorted(root.iterdir()):
        m = _SEGMENT_RE.match(entry.name)
        if m and not _pid_alive(int(m.group(1))) and unlink_segment(entry.name):
            removed.append(entry.name)
    return removed
