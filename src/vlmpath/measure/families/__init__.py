"""What is a model family, and which families are there?

A ``Family`` bundles everything one vision model family brings: its processor arithmetic
(patch size, merge size, the width of one ``pixel_values`` row, image -> patch grid,
grid -> placeholder tokens), its tower configuration per scale, its tower builder (and
local-weights loader), and the encoders that run on that tower (registry name ->
factory). Workloads ask the family of their encoder for the arithmetic; the encoder
registry (``vlmpath.measure.encoders.ENCODERS``) is the union of the families' encoders.

Each module of this package is one family and defines ``FAMILY``; ``discover`` finds them
by walking a package (no list to edit, no global state: the real registries are computed
once from this package by ``vlmpath.measure.encoders``). Adding a family is one new
module here. Also here: the ``Encoder`` protocol every encoder satisfies and the tower
helpers families share (seeded weights, normalisation layers found by type).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import SCALES, Scale

if TYPE_CHECKING:
    from vlmpath.measure.items import Item

Grid = tuple[int, int, int]


@dataclass(frozen=True)
class EncodeOutput:
    """Rows of a batch of items, concatenated in input order, and each item's row count."""

    embeddings: torch.Tensor                      # [sum(item_rows), hidden]
    item_rows: tuple[int, ...]
    frame_rows: tuple[tuple[int, ...], ...] | None = None   # EVS: rows kept per frame


@runtime_checkable
class Encoder(Protocol):
    """What the embedding routine, the encode strategies and the fidelity check need from a
    vision encoder; every family's encoder factories build one (tests/test_encoder_protocol.py)."""

    out_dim: int          # width of each output row (the text embedding width)
    dtype: torch.dtype    # dtype of the output rows

    def expected_rows(self, item: Item) -> int | None:
        """Rows ``item`` will produce, when known before encoding (None: data-dependent)."""
        ...

    def encode(self, items: Sequence[Item]) -> EncodeOutput:
        """Rows of ``items`` in input order, with each item's true row count."""
        ...


class TowerSpec(Protocol):
    """What the rest of the package reads of a family's per-scale tower configuration."""

    out_dim: int          # width of the tower's output rows
    dtype: torch.dtype


#: ``(tower, device, seed) -> Encoder``
EncoderFactory = Callable[[torch.nn.Module, torch.device, int], Encoder]


@dataclass(frozen=True, eq=False)
class Family:
    """One model family (see the module docstring). Arithmetic callables are plain
    functions of the family's module, so a family is data plus its own functions."""

    name: str                      # the module's name in this package
    patch: int                     # pixels per patch side
    merge: int                     # patches per placeholder-token side: grid h, w multiples of it
    patch_dim: int                 # width of one pixel_values row (channels x patch volume)
    grid_for_image: Callable[[int, int, str], Grid]   # (height_px, width_px, scale) -> (t, h, w)
    tokens_of_grid: Callable[[Sequence[int]], int]    # placeholder tokens (= encoder rows) of a grid
    towers: Mapping[str, TowerSpec]                   # scale name -> tower configuration
    # (scale, device="cpu", seed=0, weights_dir=None, config=None) -> tower in eval mode
    build_tower: Callable[..., torch.nn.Module]
    encoders: Mapping[str, EncoderFactory]            # encoder registry name -> factory
    default_encoder: str                              # the encoder of plain images and videos
    # MiniCPM-like multi-region items: the encoder that reads them, rows per region and
    # text tokens between regions (None: this family has no such items).
    regions_encoder: str | None = None
    region_tokens: int | None = None
    region_separator: int = 0
    # Towers taking fixed-size tiles: each grid's h and w, in patches, per scale (None: any
    # multiple of ``merge``).
    tile_patches: Mapping[str, int] | None = field(default=None)

    def __post_init__(self) -> None:
        where = f"model family {self.name!r}"
        if self.default_encoder not in self.encoders:
            raise VlmpathError(f"{where}: default encoder {self.default_encoder!r} is not one of its "
                               f"encoders {sorted(self.encoders)}")
        if (self.regions_encoder is None) != (self.region_tokens is None) or (
                self.regions_encoder is not None and self.regions_encoder not in self.encoders):
            raise VlmpathError(f"{where}: regions_encoder and region_tokens go together, and the "
                               "regions encoder must be one of its encoders")
        # Read-only views: a family is shared by every workload and session.
        for name in ("towers", "encoders", "tile_patches"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    def tower(self, scale: Scale) -> TowerSpec:
        """The tower configuration at ``scale`` (a scale this family has a tower for)."""
        if scale not in self.towers:
            raise VlmpathError(f"model family {self.name!r} has no tower for scale {scale!r}: "
                               f"it has {', '.join(self.towers)}")
        return self.towers[scale]

    def check_grid(self, grid: Sequence[int], where: str, scale: Scale | None = None) -> Grid:
        """``grid`` as ``(t, h, w)``; raises naming ``where`` unless it is three positive ints
        with h and w multiples of the merge size (and the tile size at ``scale``, if any)."""
        if len(grid) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in grid):
            raise VlmpathError(f"{where}: a grid is three positive integers [t, h, w], got {grid!r}")
        t, h, w = grid
        if h % self.merge or w % self.merge:
            raise VlmpathError(f"{where}: grid h and w must be multiples of the merge size {self.merge}, "
                               f"got {grid!r}")
        if self.tile_patches is not None and scale is not None:
            side = self.tile_patches[scale]
            if (h, w) != (side, side):
                raise VlmpathError(f"{where}: {self.name} encodes fixed tiles of {side} x {side} patches "
                                   f"at scale {scale}, got {grid!r}; use [tiles, {side}, {side}]")
        return (t, h, w)


def discover(package: str) -> Mapping[str, Family]:
    """Every family in ``package`` (a dotted module path): each of its modules not starting
    with ``_`` must define ``FAMILY``, named like the module. Encoder names must be unique
    over the families. A function of the package alone: nothing is registered anywhere."""
    pkg = importlib.import_module(package)
    found: dict[str, Family] = {}
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        fam = getattr(module, "FAMILY", None)
        if not isinstance(fam, Family) or fam.name != info.name:
            raise VlmpathError(f"{module.__name__} is in the model-family package {package} but defines "
                               f"no FAMILY = Family(name={info.name!r}, ...); every module there is one family")
        for enc in fam.encoders:
            if enc in owner:
                raise VlmpathError(f"encoder {enc!r} is defined by both model families {owner[enc]!r} and "
                                   f"{fam.name!r}: rename one")
            owner[enc] = fam.name
        missing = [s for s in SCALES if s not in fam.towers]
        if missing:
            raise VlmpathError(f"{module.__name__}: FAMILY has no tower for scale(s) {', '.join(missing)}; "
                               "give every scale of vlmpath.core.scales a tower configuration")
        found[fam.name] = fam
    return MappingProxyType(found)


# --- tower helpers the families share ------------------------------------------------------
def is_norm(module: torch.nn.Module) -> bool:
    """A normalisation module, found by its type and never by its attribute name: the
    Qwen2.5-VL merger's RMSNorm is called ``ln_q``, the blocks' ``norm1``/``norm2``, and a
    name test once left ``ln_q`` at weight 0, which zeroed every row the tower returned."""
    norms = tuple(t for t in (torch.nn.LayerNorm, getattr(torch.nn, "RMSNorm", None),
                              torch.nn.GroupNorm) if t is not None)
    return isinstance(module, norms) or type(module).__name__.endswith(("RMSNorm", "LayerNorm"))


def seeded_init(module: torch.nn.Module, seed: int) -> None:
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
