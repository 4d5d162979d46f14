"""How is an EVS video laid out in a prompt, and re-laid once the encoder has pruned it?

EVS videos (efficient video sampling, embed-path.md section 2): the processor cannot know
how many tokens each frame keeps, only the total after pruning (frame 0 whole, the ``keep``
share of the rest, rounded as the encoder rounds). It pre-sizes the prompt to that total,
laid out as one placeholder range per frame with ``EVS_TIMESTAMP`` timestamp text tokens
between frames and an even initial split; the item records that split in
``frame_tokens``. Once the encoder has reported the real per-frame counts, the routine
re-lays the frames inside the same length (``evs_relayout`` for the offsets,
``evs_relayout_ids`` for the token ids).

The item types live in ``items``; ``workload`` builds EVS prompts with these helpers and
the family's tokens per frame (this module knows no model family).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from vlmpath.core.errors import VlmpathError

if TYPE_CHECKING:
    from vlmpath.measure.items import Item

EVS_TIMESTAMP = 2       # timestamp text tokens between the frames of an EVS video
EVS_KEEP = 0.5          # share of the tokens of frames 1.. that EVS keeps (the encoder's default)


def evs_kept_tokens(frames: int, per_frame: int, keep: float = EVS_KEEP) -> int:
    """Tokens an EVS video of ``frames`` temporal patches, ``per_frame`` tokens each (the
    family's tokens of one ``(1, h, w)`` grid), keeps: frame 0 whole plus
    ``round(keep * (frames - 1) * per_frame)`` of the later frames (Python's ``round``,
    exactly as ``EvsEncoder`` rounds)."""
    return per_frame if frames == 1 else per_frame + round(keep * (frames - 1) * per_frame)


def even_split(total: int, parts: int) -> tuple[int, ...]:
    """``total`` tokens over ``parts`` frames as evenly as possible (earlier frames +1)."""
    base, extra = divmod(total, parts)
    return tuple(base + (j < extra) for j in range(parts))


def evs_layout(start: int, frame_tokens: Sequence[int], timestamp: int = EVS_TIMESTAMP
               ) -> tuple[tuple[tuple[int, int], ...], list[int]]:
    """Offsets (inclusive, one per frame with tokens) and timestamp positions of an EVS
    video laid out from ``start``: frame 0, timestamp, frame 1, timestamp, ..."""
    offsets: list[tuple[int, int]] = []
    stamps: list[int] = []
    pos = start
    for j, n in enumerate(frame_tokens):
        if j:
            stamps.extend(range(pos, pos + timestamp))
            pos += timestamp
        if n:
            offsets.append((pos, pos + n - 1))
            pos += n
    return tuple(offsets), stamps


def evs_relayout(item: Item, frame_tokens: Sequence[int]) -> Item:
    """The item with its frames re-laid to ``frame_tokens`` placeholders each, inside the
    same region (same start, same total length). Idempotent; raises when the counts do
    not fit the region (the processor's pre-sized total and the encoder disagree)."""
    from vlmpath.core.errors import LengthMismatchError

    frame_tokens = tuple(int(n) for n in frame_tokens)
    if not item.frame_tokens:
        raise VlmpathError(f"item {item.hash:#x} is not an EVS video (no frame_tokens): "
                           "only items built with MediaSpec(evs=True) can be re-laid")
    if len(frame_tokens) != len(item.frame_tokens) or sum(frame_tokens) != item.span:
        raise LengthMismatchError(
            f"EVS item {item.hash:#x}: the processor pre-sized {item.span} placeholder tokens over "
            f"{len(item.frame_tokens)} frames but the encoder kept {sum(frame_tokens)} rows over "
            f"{len(frame_tokens)} frames {list(frame_tokens)}; the processor's expected total and "
            "the encoder's pruning disagree (same keep share and rounding needed; refusing to crop)")
    if frame_tokens == item.frame_tokens:
        return item
    offsets, _ = evs_layout(evs_start(item), frame_tokens)
    return replace(item, offsets=offsets, frame_tokens=frame_tokens)


def evs_start(item: Item) -> int:
    """First position of an EVS video's region (frames and timestamps)."""
    leading_empty = next(j for j, n in enumerate(item.frame_tokens) if n)
    return item.offsets[0][0] - EVS_TIMESTAMP * leading_empty


def evs_relayout_ids(input_ids: torch.Tensor, old: Item, new: Item) -> torch.Tensor:
    """A request's token ids with ``old``'s frame placeholders re-laid as ``new``'s: the
    timestamp tokens move with their frames, everything outside the region is unchanged."""
    start = evs_start(old)
    _, old_stamps = evs_layout(start, old.frame_tokens)
    _, new_stamps = evs_layout(start, new.frame_tokens)
    end = start + sum(old.frame_tokens) + len(old_stamps)  # exclusive; same for new
    ids = input_ids.clone()
    stamps = input_ids[old_stamps]
    ids[start:end] = new.pad_value
    ids[new_stamps] = stamps
    return ids
