"""What is one multimodal item, request and forward step, and how many tokens does an item take?

The engine's data model (embed-path.md section 1), as frozen records: an ``Item`` has a
modality, a content hash, a pad value derived from the hash, one or more *inclusive*
``(start, end)`` offsets into the request's full token ids, and its processor output
(Qwen2.5-VL ``pixel_values`` ``[patches, 1176]`` plus ``grid_thw``; one grid row per image,
video or region). A ``Step`` is one forward step of a chunked prefill: each request's
``[prefix, prefix + extend)``. Also the Qwen2.5-VL processor arithmetic every layer needs
(patch and merge sizes, ``smart_resize``, tokens per grid). Nothing here builds workloads
(``workload``) or encodes (``encoders``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from vlmpath.core.errors import VlmpathError

PATCH = 14
MERGE = 2
TEMPORAL_PATCH = 2
PATCH_DIM = 3 * TEMPORAL_PATCH * PATCH * PATCH  # 1176 for Qwen2.5-VL
REGION_TOKENS = 64      # MiniCPM's query_num: every region becomes 64 rows
REGION_SEPARATOR = 2    # text tokens between regions (slice start/end markers)
SCALES = ("tiny", "full")


@dataclass(frozen=True, eq=False)
class Item:
    """One image, video or multi-region image of a request."""

    modality: str                              # "image" | "video"
    feature: torch.Tensor                      # pixel_values [patches, 1176], CPU
    grid_thw: tuple[tuple[int, int, int], ...]  # one row per image / video / region
    offsets: tuple[tuple[int, int], ...]       # inclusive spans in the request's token ids
    hash: int
    pad_value: int
    # EVS videos only: placeholder tokens per frame as currently laid out (the processor's
    # even split, or the encoder's counts once re-laid); frames with 0 tokens have no
    # offset. Empty for every other item.
    frame_tokens: tuple[int, ...] = ()
    # MiniCPM-like item: one 64-row span per grid (``REGION_TOKENS``), not rows per patch.
    regions: bool = False

    @property
    def span(self) -> int:
        """Placeholder tokens over all offsets."""
        return sum(b - a + 1 for a, b in self.offsets)

    @property
    def first_span(self) -> int:
        a, b = self.offsets[0]
        return b - a + 1


@dataclass(frozen=True, eq=False)
class Request:
    rid: int
    input_ids: torch.Tensor        # int64 [L], pad values over every placeholder position
    items: tuple[Item, ...]

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass(frozen=True)
class StepEntry:
    """One request's slice of a forward step: tokens ``[prefix, prefix + extend)``."""

    rid: int
    prefix: int
    extend: int


@dataclass(frozen=True)
class Step:
    entries: tuple[StepEntry, ...]

    @property
    def tokens(self) -> int:
        return sum(e.extend for e in self.entries)


# --- processor arithmetic ---------------------------------------------------------------
def smart_resize(height: int, width: int, factor: int = PATCH * MERGE,
                 min_pixels: int = 4 * 28 * 28, max_pixels: int = 16384 * 28 * 28) -> tuple[int, int]:
    """Resize to multiples of ``factor`` within the pixel bounds, keeping the aspect ratio."""
    if height <= 0 or width <= 0:
        raise VlmpathError(f"image size {height}x{width} must be positive")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def grid_for_image(height: int, width: int) -> tuple[int, int, int]:
    h, w = smart_resize(height, width)
    return (1, h // PATCH, w // PATCH)


def tokens_of_grid(grid: Sequence[int]) -> int:
    t, h, w = grid
    return t * h * w // (MERGE * MERGE)


def check_grid(grid: Sequence[int], where: str) -> tuple[int, int, int]:
    """``grid`` as ``(t, h, w)``; raises naming ``where`` unless it is three positive ints
    with h and w multiples of the merge size."""
    if len(grid) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in grid):
        raise VlmpathError(f"{where}: a grid is three positive integers [t, h, w], got {grid!r}")
    t, h, w = grid
    if h % MERGE or w % MERGE:
        raise VlmpathError(f"{where}: grid h and w must be multiples of the merge size {MERGE}, got {grid!r}")
    return (t, h, w)


def iter_item_positions(items: Iterable[Item]) -> Iterable[tuple[Item, list[int]]]:
    """Each item with the list of its token positions (over all its offsets, in order)."""
    for it in items:
        yield it, [p for a, b in it.offsets for p in range(a, b + 1)]
