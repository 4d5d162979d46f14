"""InternVL: its tile arithmetic, its vision tower and the projector to the text width.

The tower is transformers' own ``InternVLVisionModel`` (InternViT: patch embedding with a
CLS token and absolute positions, pre-norm blocks with layer scale) followed by
transformers' ``InternVLMultiModalProjector``, built from configs with seeded random
weights: InternViT-300M's dimensions (24 blocks, hidden 1024, 16 heads) projected to a 7B
text width (3584) in bf16 at ``full`` scale, and a 2-block, 128-wide tower on 112 px tiles
at ``tiny`` scale. Nothing is downloaded; real weights load from a local InternVL
(transformers layout) safetensors directory when a user has them.

The processor (InternVL's dynamic resolution): an image is cut into fixed square tiles
(448 px at ``full``), in the column x row layout whose aspect ratio is closest to the
image's among those of at most ``MAX_TILES`` tiles, plus one thumbnail tile of the whole
image when there is more than one tile. Each tile is 32 x 32 patches of 14 px; the pixel
shuffle (ratio 0.5) folds 2 x 2 patches into one token: 256 tokens per tile. A grid is
``(tiles, side, side)`` with ``side`` the tile's patches per side; a video is one tile per
frame. Not in the default presets or the asv suite: a trace runs on it with the line
``{"encoder": "internvl"}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from vlmpath.core.errors import LengthMismatchError, VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.measure.families import EncodeOutput, Family, seeded_init
from vlmpath.measure.items import Item

PATCH = 14
MERGE = 2                 # pixel shuffle 0.5: 2 x 2 patches per token
DOWNSAMPLE = 1 / MERGE
PATCH_DIM = 3 * PATCH * PATCH  # 588: one RGB patch (no temporal patching)
MAX_TILES = 12            # InternVL's default max_num


@dataclass(frozen=True)
class TowerConfig:
    tile_px: int              # side of one tile in pixels (the vision config's image_size)
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    out_dim: int              # the text width the projector maps to
    dtype: torch.dtype


TOWERS = {
    "tiny": TowerConfig(tile_px=112, depth=2, hidden_size=128, intermediate_size=256, num_heads=4,
                        out_dim=256, dtype=torch.float32),
    # InternViT-300M-448px (InternVL 2.5/3 8B) and the 7B text width.
    "full": TowerConfig(tile_px=448, depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16,
                        out_dim=3584, dtype=torch.bfloat16),
}
TILE_PATCHES = {scale: cfg.tile_px // PATCH for scale, cfg in TOWERS.items()}


# --- processor arithmetic ---------------------------------------------------------------
def tile_layout(height: int, width: int, tile_px: int, max_tiles: int = MAX_TILES) -> tuple[int, int]:
    """``(columns, rows)`` of tiles for an image: the layout whose aspect ratio is closest to
    the image's, fewest tiles first; an equally close larger layout wins when the image has
    more than half its pixels (so a large image is not squeezed into few tiles)."""
    if height <= 0 or width <= 0:
        raise VlmpathError(f"image size {height}x{width} must be positive")
    layouts = sorted({(c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1) if c * r <= max_tiles},
                     key=lambda cr: (cr[0] * cr[1], cr[0]))
    aspect = width / height
    best, best_diff = (1, 1), math.inf
    for cols, rows in layouts:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and height * width > 0.5 * tile_px * tile_px * cols * rows:
            best = (cols, rows)
    return best


def grid_for_image(height: int, width: int, scale: Scale) -> tuple[int, int, int]:
    """``(tiles, side, side)``: the layout's tiles plus a thumbnail when there are several."""
    cfg = TOWERS[scale]
    cols, rows = tile_layout(height, width, cfg.tile_px)
    tiles = cols * rows + (1 if cols * rows > 1 else 0)
    side = TILE_PATCHES[scale]
    return (tiles, side, side)


def tokens_of_grid(grid: Sequence[int]) -> int:
    t, h, w = grid
    return t * h * w // (MERGE * MERGE)


# --- the tower ----------------------------------------------------------------------------
def _classes():
    from transformers.models.internvl import modeling_internvl as modeling
    from transformers.models.internvl.configuration_internvl import InternVLConfig, InternVLVisionConfig

    return modeling, InternVLConfig, InternVLVisionConfig


class InternVLTower(torch.nn.Module):
    """Vision model, CLS dropped, pixel shuffle, projector: ``[tiles, 3, px, px]`` to
    ``[tiles * side * side / 4, out_dim]`` rows, tile after tile."""

    def __init__(self, tc: TowerConfig):
        super().__init__()
        modeling, config_cls, vision_config_cls = _classes()
        vision = vision_config_cls(hidden_size=tc.hidden_size, num_hidden_layers=tc.depth,
                                   num_attention_heads=tc.num_heads, intermediate_size=tc.intermediate_size,
                                   image_size=tc.tile_px, patch_size=PATCH, norm_type="layer_norm",
                                   use_mean_pooling=True)
        cfg = config_cls(vision_config=vision, text_config={"model_type": "qwen2", "hidden_size": tc.out_dim},
                         downsample_ratio=DOWNSAMPLE)
        vision._attn_implementation = "sdpa"
        self.vision = modeling.InternVLVisionModel._from_config(vision)
        self.projector = modeling.InternVLMultiModalProjector(cfg)
        # transformers' own pixel shuffle; it reads no state of the model it is defined on
        self._shuffle = modeling.InternVLModel.pixel_shuffle
        self.layer_scale, self.side, self.out_dim = vision.layer_scale_init_value, tc.tile_px // PATCH, tc.out_dim

    def forward(self, tiles: torch.Tensor) -> torch.Tensor:
        hidden = self.vision(pixel_values=tiles).last_hidden_state[:, 1:]  # drop the CLS row
        n, _, c = hidden.shape
        shuffled = self._shuffle(None, hidden.reshape(n, self.side, self.side, c), DOWNSAMPLE)
        return self.projector(shuffled.reshape(n, -1, shuffled.shape[-1])).reshape(-1, self.out_dim)


def build_tower(scale: Scale, device: torch.device | str = "cpu", seed: int = 0,
                weights_dir: str | Path | None = None, config: TowerConfig | None = None) -> torch.nn.Module:
    """The InternVL tower in eval mode on ``device``; ``config`` replaces the scale's shape."""
    tc = config or TOWERS[scale]
    tower = InternVLTower(tc)
    if weights_dir is not None:
        load_weights(tower, weights_dir)
    else:
        seeded_init(tower, seed)
        # Layer scale is a 1-D parameter that is no bias: at 0 every block would add
        # nothing; transformers initialises it to the config's value.
        with torch.no_grad():
            for name, p in tower.named_parameters():
                if name.endswith((".lambda_1", ".lambda_2")):
                    p.fill_(tower.layer_scale)
    return tower.to(device=device, dtype=tc.dtype).eval()


def load_weights(tower: InternVLTower, weights_dir: str | Path) -> None:
    """Load the vision model and projector from a local InternVL checkpoint (transformers layout)."""
    from safetensors import safe_open

    root = Path(weights_dir)
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise VlmpathError(f"weights directory {str(root)!r} holds no *.safetensors files: "
                           "point --weights at a downloaded InternVL (-hf) checkpoint")
    prefixes = {"model.vision_tower.": "vision.", "vision_tower.": "vision.",
                "model.multi_modal_projector.": "projector.", "multi_modal_projector.": "projector."}
    state = {}
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                for prefix, ours in prefixes.items():
                    if key.startswith(prefix):
                        state[ours + key[len(prefix):]] = st.get_tensor(key)
                        break
    missing, unexpected = tower.load_state_dict(state, strict=False)
    if missing or not state:
        raise VlmpathError(f"weights in {str(root)!r} do not fit the InternVL tower: {len(missing)} missing "
                           f"(e.g. {missing[:3]}), {len(unexpected)} unexpected; use an InternVL -hf "
                           "checkpoint whose config matches --scale full")


class InternVLEncoder:
    """One tower call over every tile of the items; 256 rows per tile at ``full``."""

    name = "internvl"

    def __init__(self, tower: InternVLTower, device: torch.device):
        self.tower, self.device = tower, torch.device(device)
        self.dtype = next(tower.parameters()).dtype
        self.out_dim = tower.out_dim

    def expected_rows(self, item: Item) -> int | None:
        return sum(tokens_of_grid(g) for g in item.grid_thw)

    def encode(self, items: Sequence[Item]) -> EncodeOutput:
        if not items:
            raise VlmpathError("encode() needs at least one item")
        side = self.tower.side
        bad = [g for it in items for g in it.grid_thw if tuple(g[1:]) != (side, side)]
        if bad:
            raise LengthMismatchError(f"{self.name}: grids {bad[:3]} are not tiles of {side} x {side} patches "
                                      "(this tower's tile size); build the items with this scale's arithmetic")
        pixels = torch.cat([it.feature for it in items]).to(self.device, self.dtype, non_blocking=True)
        # rows are patches in (tile, row, column) order, each one RGB patch: back to images
        tiles = pixels.view(-1, side, side, 3, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
        with torch.no_grad():
            out = self.tower(tiles.reshape(-1, 3, side * PATCH, side * PATCH))
        return EncodeOutput(out, tuple(self.expected_rows(it) for it in items))


FAMILY = Family(
    name="internvl", patch=PATCH, merge=MERGE, patch_dim=PATCH_DIM,
    grid_for_image=grid_for_image, tokens_of_grid=tokens_of_grid,
    towers=TOWERS, build_tower=build_tower,
    encoders={"internvl": lambda tower, device, seed: InternVLEncoder(tower, device)},
    default_encoder="internvl", tile_patches=TILE_PATCHES,
)
