"""What is one multimodal item, request and forward step?

The engine's data model (embed-path.md section 1), as frozen records: an ``Item`` has a
modality, a content hash, a pad value derived from the hash, one or more *inclusive*
``(start, end)`` offsets into the request's full token ids, and its processor output
(``pixel_values`` ``[patches, patch_dim]`` plus ``grid_thw``; one grid row per image,
video, region or tile). A ``Step`` is one forward step of a chunked prefill: each
request's ``[prefix, prefix + extend)``. How many tokens an item takes is its model
family's arithmetic (``families``); nothing here builds workloads (``workload``) or
encodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class Item:
    """One image, video or multi-region image of a request."""

    modality: str                              # "image" | "video"
    feature: torch.Tensor                      # pixel_values [patches, patch_dim], CPU
    grid_thw: tuple[tuple[int, int, int], ...]  # one row per image / video / region
    offsets: tuple[tuple[int, int], ...]       # inclusive spans in the request's token ids
    hash: int
    pad_value: int
    # EVS videos only: placeholder tokens per frame as currently laid out (the processor's
    # even split, or the encoder's counts once re-laid); frames with 0 tokens have no
    # offset. Empty for every other item.
    frame_tokens: tuple[int, ...] = ()
    # MiniCPM-like item: one span of the family's ``region_tokens`` rows per grid.
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
