"""What does the vision tower return, and how many rows per item?

``qwen2_5_vl`` is transformers' own Qwen2.5-VL vision transformer (patch embedding, window
and full attention blocks, 2x2 merger), built from a config with seeded random weights: a
4-block, 256-wide tower at ``tiny`` scale for CPUs, and the real 7B vision dimensions (32
blocks, hidden 1280, 16 heads, output 3584, bf16) at ``full`` scale. Nothing is downloaded;
real weights load from a local safetensors directory when a user has them.

Two encoders return a row count that differs from a naive placeholder count, as real
models do (embed-path.md section 2, "Sources of rows != placeholder span"):

- ``multi_region`` (MiniCPM-V-like): one item holds N regions (global image + slices); each
  region goes through the same ViT and a 64-query resampler, so the item returns N x 64
  rows while its *first* placeholder span is 64.
- ``evs`` (efficient video sampling): keeps the first frame whole and prunes a
  data-dependent share of every later frame's tokens (those most similar to the same
  position in the previous frame), reporting the per-frame counts.

Every encoder reports each item's true output row count in ``EncodeOutput.item_rows``,
and satisfies the ``Encoder`` protocol (``out_dim``, ``dtype``, ``expected_rows``, ``encode``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from vlmpath.core.errors import LengthMismatchError, VlmpathError
from vlmpath.core.registry import Registry
from vlmpath.measure.evs_layout import EVS_KEEP, evs_kept_tokens
from vlmpath.measure.syncs import host
from vlmpath.measure.workload import MERGE, REGION_TOKENS, Item, tokens_of_grid


@dataclass(frozen=True)
class TowerConfig:
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    out_hidden_size: int
    fullatt_block_indexes: tuple[int, ...]
    dtype: torch.dtype


TOWERS = {
    "tiny": TowerConfig(depth=4, hidden_size=256, intermediate_size=512, num_heads=4,
                        out_hidden_size=256, fullatt_block_indexes=(1, 3), dtype=torch.float32),
    # Qwen2.5-VL-7B-Instruct's vision_config.
    "full": TowerConfig(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16,
                        out_hidden_size=3584, fullatt_block_indexes=(7, 15, 23, 31), dtype=torch.bfloat16),
}


@dataclass(frozen=True)
class EncodeOutput:
    """Rows of a batch of items, concatenated in input order, and each item's row count."""

    embeddings: torch.Tensor                      # [sum(item_rows), hidden]
    item_rows: tuple[int, ...]
    frame_rows: tuple[tuple[int, ...], ...] | None = None   # EVS: rows kept per frame


@runtime_checkable
class Encoder(Protocol):
    """What the embedding routine, the encode strategies and the fidelity check need from a
    vision encoder; every ``ENCODERS`` factory builds one (tests/test_encoder_protocol.py).
    A new family is a class with these four members plus its registry entry."""

    out_dim: int          # width of each output row (the text embedding width)
    dtype: torch.dtype    # dtype of the output rows

    def expected_rows(self, item: Item) -> int | None:
        """Rows ``item`` will produce, when known before encoding (None: data-dependent)."""
        ...

    def encode(self, items: Sequence[Item]) -> EncodeOutput:
        """Rows of ``items`` in input order, with each item's true row count."""
        ...


def _vision_classes():
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as modeling
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
        Qwen2_5_VLVisionConfig,
    )

    return modeling.Qwen2_5_VisionTransformerPretrainedModel, Qwen2_5_VLVisionConfig


def is_norm(module: torch.nn.Module) -> bool:
    """A normalisation module, found by its type and never by its attribute name: the
    Qwen2.5-VL merger's RMSNorm is called ``ln_q``, the blocks' ``norm1``/``norm2``, and a
    name test once left ``ln_q`` at weight 0, which zeroed every row the tower returned."""
    norms = tuple(t for t in (torch.nn.LayerNorm, getattr(torch.nn, "RMSNorm", None),
                              torch.nn.GroupNorm) if t is not None)
    return isinstance(module, norms) or type(module).__name__.endswith(("RMSNorm", "LayerNorm"))


def _seeded_init(module: torch.nn.Module, seed: int) -> None:
    """Deterministic weights from an explicit generator (never the global RNG): every
    normalisation weight at 1 and bias at 0 (so rows carry the input's content), other
    1-D parameters (biases) at 0, matrices N(0, 1/fan_in) so activations keep their scale
    through 32 blocks."""
    gen = torch.Generator().manual_seed(seed)
    norm_weights = {f"{prefix}.{pname}".lstrip(".") for prefix, m in module.named_modules() if is_norm(m)
                    for pname, _ in m.named_parameters(recurse=False) if pname == "weight"}
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if p.dim() == 1:
                p.fill_(1.0 if name in norm_weights else 0.0)
            else:
                fan_in = p[0].numel()
                w = torch.randn(p.shape, generator=gen, dtype=torch.float32) / math.sqrt(fan_in)
                p.copy_(w.to(p.dtype))


def build_vision_tower(scale: str, device: torch.device | str = "cpu", seed: int = 0,
                       weights_dir: str | Path | None = None,
                       config: TowerConfig | None = None) -> torch.nn.Module:
    """transformers' Qwen2.5-VL vision transformer in eval mode on ``device``; ``config``
    replaces the scale's shape (the self-tests run ``full`` widths with fewer blocks)."""
    if scale not in TOWERS:
        raise VlmpathError(f"unknown scale {scale!r}: choose one of {', '.join(TOWERS)}")
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
        _seeded_init(model, seed)
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
        _seeded_init(self, seed)

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
        per = h * w // (MERGE * MERGE)
        frames = rows.view(t, per, -1)
        if t == 1:
            return rows, (per,)
        change = 1 - torch.nn.functional.cosine_similarity(frames[1:].float(), frames[:-1].float(), dim=-1)
        k = evs_kept_tokens(grid, self.keep) - per  # the processor pre-sizes with the same rounding
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


ENCODERS: Registry[Callable] = Registry("encoder", {
    "qwen2_5_vl": _qwen,
    "multi_region": _multi_region,
    "evs": _evs,
})


def build_encoder(name: str, scale: str, device: torch.device | str = "cpu", seed: int = 0,
                  weights_dir: str | Path | None = None) -> Encoder:
    """An encoder by registry name around a freshly built tower."""
    factory = ENCODERS[name]
    tower = build_vision_tower(scale, device, seed, weights_dir)
    return factory(tower, torch.device(device), seed)
