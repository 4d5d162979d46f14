"""How are encoder rows written into the text embeddings, and at what sync cost?

- ``where_index`` (before sglang #26082): ``idx = torch.where(mask)[0]; dest[idx] = rows``.
  ``nonzero`` has a data-dependent output size, so on a GPU it waits for the device.
- ``masked_scatter`` (after): ``dest.masked_scatter_(mask.expand_as(dest), rows)`` fills the
  True positions in row-major order from the flattened source, with no sync.
- ``cumsum_index_copy`` (the engine's later scatter, sglang 0.5.23): each masked position's
  rank among the masked positions comes from ``mask.cumsum``; with the row count known on
  the host, ``index_copy_`` builds the list of masked positions (unmasked positions all go
  to one spare slot) and a second ``index_copy_`` writes the rows there. Row-wise instead of
  element-wise, and no sync.

Both require ``rows.shape[0]`` to equal the number of masked positions and raise
``LengthMismatchError`` otherwise (``check_length``). The engine's old behaviour, keeping
the *last* ``count`` rows of an over-long result, survives only as the named legacy
option ``adjust_length(..., mode="crop_last")``, never as a default.

Deepstack (Qwen3-VL): the rows are ``[K, H * (1 + k)]``; ``inject_deepstack`` splits the
width at ``H`` and scatters the extra ``[K, H * k]`` into a zero tensor with the same mask.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from vlmpath.core.errors import LengthMismatchError, VlmpathError
from vlmpath.paths import registry

Injector = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]


def check_length(rows: torch.Tensor, count: int, where: str = "inject") -> None:
    """Rows must equal the masked count exactly: a mismatch means misplaced images."""
    if rows.shape[0] != count:
        raise LengthMismatchError(
            f"{where}: {rows.shape[0]} encoder rows for {count} placeholder tokens in this step; "
            "the encoder and the placeholder spans disagree (use the per-item lengths the "
            "encoder returns; never crop)")


def adjust_length(rows: torch.Tensor, count: int, mode: str = "strict") -> torch.Tensor:
    """``strict`` (default) raises on any mismatch; ``crop_last`` is the pre-#26082 engine
    behaviour: keep the last ``count`` rows when there are too many, raise when too few."""
    if mode == "strict":
        check_length(rows, count, "adjust_length")
        return rows
    if mode == "crop_last":
        if rows.shape[0] < count:
            raise LengthMismatchError(f"adjust_length: insufficient rows: {rows.shape[0]} for {count} tokens")
        return rows[rows.shape[0] - count:]
    raise VlmpathError(f"unknown adjust_length mode {mode!r}: use 'strict' or 'crop_last'")


def where_index(dest: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> None:
    idx = torch.where(mask.squeeze(-1))[0]
    dest[idx] = rows.to(dest.dtype)


def masked_scatter(dest: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> None:
    dest.masked_scatter_(mask.expand_as(dest), rows.to(dest.dtype))


def cumsum_index_copy(dest: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> None:
    flat = mask.reshape(-1)
    k = rows.shape[0]  # host metadata: the caller checked it against the count (no sync)
    rank = flat.cumsum(0) - 1
    # Masked position i goes to slot rank[i]; every unmasked one to the spare slot k, whose
    # content (written by several positions, in any order) is never read.
    slot = torch.where(flat, rank, torch.full_like(rank, k))
    positions = torch.empty(k + 1, dtype=torch.int64, device=dest.device)
    positions.index_copy_(0, slot, torch.arange(flat.shape[0], device=dest.device))
    dest.index_copy_(0, positions[:k], rows.to(dest.dtype))


# The registry's one home is ``paths.registry`` (torch-free, entries named lazily); this is
# the same object, under the name ``engines.reference`` and the asv suite (whose files also
# run against older packages, where the registry lived here) import.
INJECTORS = registry.INJECTORS


def inject_deepstack(injector: Injector, dest: torch.Tensor, deepstack: torch.Tensor,
                     mask: torch.Tensor, rows: torch.Tensor) -> None:
    """Scatter ``rows[:, :H]`` into ``dest`` and ``rows[:, H:]`` into ``deepstack`` ([N, H*k])."""
    hidden = dest.shape[-1]
    if rows.shape[-1] != hidden + deepstack.shape[-1]:
        raise LengthMismatchError(
            f"deepstack: rows are {rows.shape[-1]} wide but text ({hidden}) + deepstack "
            f"({deepstack.shape[-1]}) is {hidden + deepstack.shape[-1]}")
    injector(dest, mask, rows[:, :hidden])
    injector(deepstack, mask, rows[:, hidden:])
