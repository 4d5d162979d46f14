"""Qwen2.5-VL: its processor arithmetic, its vision tower and the encoders on it.

``qwen2_5_vl`` is transformers' own Qwen2.5-VL vision transformer (patch embedding, window
and full attention blocks, 2x2 merger), built from a config with seeded random weights: a
4-block, 256-wide tower at ``tiny`` scale for CPUs, and the real 7B vision dimensions (32
blocks, hidden 1280, 16 heads, output 3584, bf16) at ``full`` scale. Nothing is downloaded;
real weights load from a local safetensors directory when a user has them.

The processor: 14 px patches, 2 frames per temporal patch (``pixel_values`` rows of
3 x 2 x 14 x 14 = 1176), images resized to multiples of 28 px (``smart_resize``), one
placeholder token per 2 x 2 patches.

Two encoders on the same tower return a row count that differs from a naive placeholder
count, as real models do (embed-path.md section 2, "Sources of rows != placeholder span"):

- ``multi_region`` (MiniCPM-V-like): one item holds N regions (global image + slices); each
  region goes through the same ViT and a 64-query resampler, so the item returns N x 64
  rows while its *first* placeholder span is 64.
- ``evs`` (efficient video sampling): keeps the first frame whole and prunes a
  data-dependent share of every later frame's tokens (those most similar to the same
  position in the previous frame), reporting the per-frame counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from vlmpath.core.errors import LengthMismatchError, VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.measure.evs_layout import EVS_KEEP, evs_kept_tokens
from vlmpath.measure.families import EncodeOutput, Family, seeded_init
from vlmpath.measure.items import Item
from vlmpath.measure.syncs import host

PATCH = 14
MERGE = 2
TEMPORAL_PATCH = 2
PATCH_DIM = 3 * TEMPORAL_PATCH * PATCH * PATCH  # 1176
REGION_TOKENS = 64      # MiniCPM's query_num: every region becomes 64 rows
REGION_SEPARATOR = 2    # text tokens between regions (slice start/end markers)


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


def grid_for_image(height: int, width: int, scale: str | None = None) -> tuple[int, int, int]:
    """The patch grid of an image (the same at every scale: the processor does not change)."""
    h, w = smart_resize(height, width)
    return (1, h // PATCH, w // PATCH)


def tokens_of_grid(grid: Sequence[int]) -> int:
    t, h, w = grid
    return t * h * w // (MERGE * MERGE)


# --- the tower ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TowerConfig:
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    out_hidden_size: int
    fullatt_block_indexes: tuple[int, ...]
    dtype: torch.dtype

    @property
    def out_dim(self) -> int:
        return self.out_hidden_size


TOWERS = {
    "tiny": TowerConfig(depth=4, hidden_size=256, intermediate_size=512, num_heads=4,
                        out_hidden_size=256, fullatt_block_indexes=(1, 3), dtype=torch.float32),
    # Qwen2.5-VL-7B-Instruct's vision_config.
    "full": TowerConfig(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16,
                        out_hidden_size=3584, fullatt_block_indexes=(7, 15, 23, 31), dtype=torch.bfloat16),
}


def _vision_classes():
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as modeling
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
        Qwen2_5_VLVisionConfig,
    )

    return modeling.Qwen2_5_VisionTransformerPretrainedModel, Qwen2_5_VLVisionConfig


def build_vision_tower(scale: Scale, device: torch.device | str = "cpu", seed: int = 0,
                       weights_dir: str | Path | None = None,
                       config: TowerConfig | None = None) -> torch.nn.Module:
    """transformers' Qwen2.5-VL vision transformer in eval mode on ``device``; ``config``
    replaces the scale's shape (the self-tests run ``full`` widths with fewer blocks)."""
    tower_cls, config_cls = _vision_classes()
    tc = config or TOWERS[scale]
    cfg = config_cls(depth=tc.depth, hidden_size=tc.hidden_size, intermediate_size=tc.intermediate_size,
                     num_heads=tc.num_heads, out_hidden_size=tc.out_hidden_size,
                     fullatt_block_indexes=list(tc.fullatt_block_indexes), spatial_merge_size=MERGE,
                     window_size=112, patch_size=14, temporal_patch_size=2, in_channels=3)
    cfg._attn_implementation = "sdpa"
    model = tower_cls._from_config(cfg) if hasattr(tower_cls, "_from_config") else tower_cls(cfg)
    if weights_dir is not None:
        load_weights(model, weights_dir)
    else:
        seeded_init(model, seed)
    return model.to(device=device, dtype=tc.dtype).eval()


def load_weights(model: torch.nn.Module, weights_dir: str | Path) -> None:
    """Load the vision tower's tensors from a local Qwen2.5-VL checkpoint directory."""
    from safetensors import safe_open

    root = Path(weights_dir)
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise VlmpathError(f"weights directory {str(root)!r} holds no *.safetensors files: "
                           "point --weights at a downloaded Qwen2.5-VL checkpoint")
    state = {}
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                for prefix in ("model.visual.", "visual."):
                    if key.startswith(prefix):
                        state[key[len(prefix):]] = st.get_tensor(key)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or not state:
        raise VlmpathError(f"weights in {str(root)!r} do not fit the vision tower: "
                           f"{len(missing)} missing (e.g. {missing[:3]}), {len(unexpected)} unexpected; "
                           "use a Qwen2.5-VL checkpoint whose config matches --scale full")


def _run_tower(tower: torch.nn.Module, pixels: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
    out = tower(pixels, grid_thw)
    # transformers >= 5 returns a model output whose pooler_output is the merged rows;
    # 4.x returns the merged rows directly.
    return getattr(out, "pooler_output", out)


def _grid_tensor(items: Sequence[Item], device: torch.device) -> torch.Tensor:
    """``grid_thw`` for one tower call, on the tower's device.

    On a CPU run it stands for the engine's host-side bookkeeping, so it is marked
    ``host`` and the tower's ``.tolist()``/``.item()`` on it are not counted as syncs. On a
    GPU, transformers' tower needs it on the device (its rotary position ids are built
    from it and multiplied with device frequencies), so those readbacks are real syncs
    there, and counted, as the driver counts them (``encoder_syncs``, not ``syncs``).
    """
    grid = torch.tensor([g for it in items for g in it.grid_thw], dtype=torch.int64)
    return host(grid) if device.type == "cpu" else grid.to(device, non_blocking=True)


class QwenEncoder:
    """One ViT call over the items' concatenated patches; rows are ``t*h*w/4`` per grid."""

    name = "qwen2_5_vl"

    def __init__(self, tower: torch.nn.Module, device: torch.device):
        self.tower, self.device = tower, torch.device(device)
        self.dtype = next(tower.parameters()).dtype
        self.out_dim = tower.config.out_hidden_size

    def expected_rows(self, item: Item) -> int | None:
        return sum(tokens_of_grid(g) for g in item.grid_thw)

    def encode(self, items: Sequence[Item]) -> EncodeOutput:
        if not items:
            raise VlmpathError("encode() needs at least one item")
        pixels = torch.cat([it.feature for it in items]).to(self.device, self.dtype, non_blocking=True)
        with torch.no_grad():
            out = _run_tower(self.tower, pixels, _grid_tensor(items, self.device))
        rows = tuple(self.expected_rows(it) for it in items)
        if out.shape[0] != sum(rows):  # shape metadata: no device sync
            raise LengthMismatchError(f"{self.name}: vision tower returned {out.shape[0]} rows for "
                                      f"grids summing to {sum(rows)}")
        return EncodeOutput(out, rows)


class Resampler(torch.nn.Module):
    """MiniCPM-like perceiver: 64 learned queries attend over one region's rows.

    Queries and keys are layer-normed (MiniCPM's ``ln_q`` / ``ln_kv``) so the scores have
    unit scale whatever the tower's output scale: without that, seeded scores are near 0,
    every query averages the region uniformly and the 64 rows are almost equal (a row
    shifted by one was ~1% away, inside the bf16 placement tolerance)."""

    def __init__(self, dim: int, queries: int, seed: int):
        super().__init__()
        self.query = torch.nn.Parameter(torch.empty(queries, dim))
        self.ln_q = torch.nn.LayerNorm(dim)
        self.ln_kv = torch.nn.LayerNorm(dim)
        self.k = torch.nn.Linear(dim, dim, bias=False)
        self.v = torch.nn.Linear(dim, dim, bias=False)
        seeded_init(self, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln_kv(x)
        scores = self.ln_q(self.query) @ self.k(x).transpose(0, 1) / math.sqrt(x.shape[-1])
        return torch.softmax(scores.float(), dim=-1).to(x.dtype) @ self.v(x)


class MultiRegionEncoder:
    """One item = N regions; every region becomes exactly 64 rows (N x 64 per item).

    Items that are not ``regions`` items (a trace's plain images and videos beside them)
    keep the tower's rows per grid: the routing is per item, inside the one tower call."""

    name = "multi_region"

    def __init__(self, tower: torch.nn.Module, device: torch.device, seed: int):
        self.tower, self.device = tower, torch.device(device)
        self.dtype = next(tower.parameters()).dtype
        self.out_dim = tower.config.out_hidden_size
        self.resampler = Resampler(self.out_dim, REGION_TOKENS, seed + 1).to(self.device, self.dtype).eval()

    def expected_rows(self, item: Item) -> int | None:
        if not item.regions:
            return sum(tokens_of_grid(g) for g in item.grid_thw)
        return REGION_TOKENS * len(item.grid_thw)

    def encode(self, items: Sequence[Item]) -> EncodeOutput:
        if not items:
            raise VlmpathError("encode() needs at least one item")
        pixels = torch.cat([it.feature for it in items]).to(self.device, self.dtype, non_blocking=True)
        with torch.no_grad():
            vit = _run_tower(self.tower, pixels, _grid_tensor(items, self.device))
            region_rows = [tokens_of_grid(g) for it in items for g in it.grid_thw]
            resample = [it.regions for it in items for _ in it.grid_thw]
            regions = torch.split(vit, region_rows)
            out = torch.cat([self.resampler(r) if rs else r for r, rs in zip(regions, resample)])
        return EncodeOutput(out, tuple(self.expected_rows(it) for it in items))


class EvsEncoder:
    """Qwen video tower with efficient video sampling: frame 0 whole, then the ``keep``
    share of the remaining tokens with the largest change from the previous frame."""

    name = "evs"

    def __init__(self, tower: torch.nn.Module, device: torch.device, keep: float = EVS_KEEP):
        self.qwen = QwenEncoder(tower, device)
        self.out_dim, self.dtype, self.keep = self.qwen.out_dim, self.qwen.dtype, keep

    def expected_rows(self, item: Item) -> int | None:
        return None  # the total is fixed, but which frame keeps what depends on the data

    def _prune(self, rows: torch.Tensor, grid: Sequence[int]) -> tuple[torch.Tensor, tuple[int, ...]]:
        t, h, w = grid
        per = tokens_of_grid((1, h, w))
        frames = rows.view(t, per, -1)
        if t == 1:
            return rows, (per,)
        change = 1 - torch.nn.functional.cosine_similarity(frames[1:].float(), frames[:-1].float(), dim=-1)
        k = evs_kept_tokens(t, per, self.keep) - per  # the processor pre-sizes with the same rounding
        keep = torch.zeros_like(change, dtype=torch.bool).view(-1)
        keep[torch.topk(change.view(-1), k).indices] = True
        keep = keep.view(t - 1, per)
        counts = (per,) + tuple(keep.sum(dim=1).tolist())  # a device sync, as in the engine
        kept = torch.cat([frames[0]] + [frames[f + 1][keep[f]] for f in range(t - 1)])
        return kept, counts

    def encode(self, items: Sequence[Item]) -> EncodeOutput:
        full = self.qwen.encode(items)
        outs, item_rows, frame_rows = [], [], []
        for it, rows in zip(items, torch.split(full.embeddings, list(full.item_rows))):
            kept_all, counts_all, start = [], [], 0
            for g in it.grid_thw:
                n = tokens_of_grid(g)
                kept, counts = self._prune(rows[start:start + n], g)
                kept_all.append(kept)
                counts_all.extend(counts)
                start += n
            outs.append(torch.cat(kept_all))
            item_rows.append(sum(counts_all))
            frame_rows.append(tuple(counts_all))
        return EncodeOutput(torch.cat(outs), tuple(item_rows), tuple(frame_rows))


def _qwen(tower, device, seed):
    return QwenEncoder(tower, device)


def _multi_region(tower, device, seed):
    return MultiRegionEncoder(tower, device, seed)


def _evs(tower, device, seed):
    return EvsEncoder(tower, device)


FAMILY = Family(
    name="qwen2_5_vl", patch=PATCH, merge=MERGE, patch_dim=PATCH_DIM,
    grid_for_image=grid_for_image, tokens_of_grid=tokens_of_grid,
    towers=TOWERS, build_tower=build_vision_tower,
    encoders={"qwen2_5_vl": _qwen, "multi_region": _multi_region, "evs": _evs},
    default_encoder="qwen2_5_vl",
    regions_encoder="multi_region", region_tokens=REGION_TOKENS, region_separator=REGION_SEPARATOR,
)
