"""How many multimodal tokens are in this forward step, and does asking cost a sync?

- ``mask_sum``: ``mask.sum().item()`` on the device mask (before sglang #26082): a sync.
- ``offsets``: host arithmetic over the items' offsets and the step's prefix and extend
  lengths (after #26082), ``sum_i sum_(a,b) max(0, min(b, p_i + e_i - 1) - max(a, p_i) + 1)``;
  a missing extend length counts as 0.

EVS fallback: when the chunk path rewrote the step's ``input_ids`` (EVS re-lays frame
placeholders), the offsets no longer describe the ids, so ``offsets`` falls back to
``mask.sum().item()``: one counted sync per step and modality whose chunk path re-laid an
EVS video (the ``evs_video`` preset; ``vlmpath.engines.reference`` sets ``ids_rewritten``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from vlmpath.paths import registry


def count_from_offsets(prefix: Sequence[int], extend: Sequence[int],
                       offsets: Sequence[Sequence[tuple[int, int]]]) -> int:
    """Placeholder tokens inside each request's ``[p, p + e)``, summed (host only)."""
    total = 0
    for i, spans in enumerate(offsets):
        p = prefix[i]
        e = extend[i] if i < len(extend) else 0
        last = p + e - 1
        for a, b in spans:
            total += max(0, min(b, last) - max(a, p) + 1)
    return total


@dataclass(frozen=True)
class CountQuery:
    """What a counter may look at for one modality in one step."""

    mask: torch.Tensor                         # device bool [N, 1]
    prefix: tuple[int, ...]
    extend: tuple[int, ...]
    offsets: tuple[tuple[tuple[int, int], ...], ...]
    ids_rewritten: bool = False                # EVS replaced input_ids


def mask_sum(q: CountQuery) -> int:
    return int(q.mask.sum().item())


def offsets(q: CountQuery) -> int:
    if q.ids_rewritten:
        return mask_sum(q)
    return count_from_offsets(q.prefix, q.extend, q.offsets)


# The registry's one home is ``paths.registry`` (torch-free, entries named lazily); this is
# the same object, under the name ``engines.reference`` and the asv suite (whose files also
# run against older packages, where the registry lived here) import.
COUNTERS = registry.COUNTERS
