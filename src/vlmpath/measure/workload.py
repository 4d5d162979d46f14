"""What does a realistic batch of multimodal requests look like?

A ``Workload`` is a list of ``Request``s (token ids with placeholder spans and the
``Item``s that fill them) plus a chunked-prefill schedule. It mirrors the engine's data
model (embed-path.md section 1): an item has a modality, a content hash, a pad value
derived from the hash, one or more *inclusive* ``(start, end)`` offsets into the request's
full token ids, and its processor output (``pixel_values`` ``[patches, patch_dim]`` plus
``grid_thw``; one grid row per image, video or region). The processor arithmetic (image ->
grid, grid -> placeholder tokens, row width, region spans) is asked of the model family of
the workload's encoder (``encoders.family_of``); this module imports no family.

Workloads come from named presets (seeded, deterministic) at two scales, or from a JSONL
trace of real traffic (``traces.load_trace``; ``catalog.workload_by_name`` resolves both).
Everything is built from request *specs* (text lengths and media shapes), so presets and
traces share one builder. The presets are a table (``measure.presets``: name, encoder, own
seed, builder named lazily); ``build_preset`` runs one entry's builder (``preset_specs``,
``path_presets``) over a ``PresetContext``. EVS videos are laid out by ``evs_layout``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE, Scale
from vlmpath.measure.content_hash import compute_pad_value, tensor_hash
from vlmpath.measure.evs_layout import (
    EVS_TIMESTAMP,
    even_split,
    evs_kept_tokens,
    evs_layout,
)
from vlmpath.measure.encoders import DEFAULT_ENCODER, family_of
from vlmpath.measure.families import Family, Grid
from vlmpath.measure.items import Item, Request, Step, StepEntry
from vlmpath.measure.presets import PRESETS, PresetEntry


@dataclass(frozen=True, eq=False)
class Workload:
    name: str
    scale: Scale
    model: str                     # encoder registry name used for every item
    requests: tuple[Request, ...]
    chunk_size: int                # prefill token budget per forward step (-1: no chunking)
    vocab_size: int
    seed: int
    steps: tuple[Step, ...] = field(default=())
    # The embedding cache's budget in rows of the workload's encoder (None: the run's
    # cache size); presets that exercise eviction set it.
    cache_rows: int | None = None

    @property
    def prefill_tokens(self) -> int:
        return sum(r.length for r in self.requests)

    @property
    def items(self) -> list[Item]:
        return [it for r in self.requests for it in r.items]

    def request(self, rid: int) -> Request:
        return self.requests[rid]

    def with_chunk_size(self, chunk_size: int) -> Workload:
        return replace(build_workload(self.name, self.scale, self.model, self.requests, chunk_size,
                                      self.vocab_size, self.seed), cache_rows=self.cache_rows)


# --- request specs ----------------------------------------------------------------------
@dataclass(frozen=True)
class MediaSpec:
    """One item to generate: its modality and grids (several grids = several regions)."""

    modality: str
    grids: tuple[tuple[int, int, int], ...]
    regions: bool = False          # MiniCPM-like: one span of region_tokens per grid
    content_id: int | None = None  # equal ids give equal content (cache reuse)
    evs: bool = False              # EVS video: pre-sized to the pruned total, one range per frame
    key_of: int | None = None      # a forced key collision: the hash of content id ``key_of``'s item


@dataclass(frozen=True)
class RequestSpec:
    segments: tuple[int | MediaSpec, ...]   # ints are text lengths


def _feature(grids: Sequence[tuple[int, int, int]], seed: int, patch_dim: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    patches = sum(t * h * w for t, h, w in grids)
    return torch.randn(patches, patch_dim, generator=g)


def build_requests(specs: Sequence[RequestSpec], vocab_size: int, seed: int,
                   family: Family | None = None) -> tuple[Request, ...]:
    """Turn specs into requests: token ids, offsets, features, hashes and pad values, with
    ``family``'s arithmetic (default: the family of ``DEFAULT_ENCODER``)."""
    fam = family if family is not None else family_of(DEFAULT_ENCODER)
    gen = torch.Generator().manual_seed(seed)
    content: dict[int, torch.Tensor] = {}
    requests = []
    for rid, spec in enumerate(specs):
        ids: list[torch.Tensor] = []
        items: list[Item] = []
        pos = 0
        for k, seg in enumerate(spec.segments):
            if isinstance(seg, int):
                ids.append(torch.randint(0, vocab_size, (seg,), generator=gen))
                pos += seg
                continue
            # Equal content ids share content within one workload; the seed still varies it
            # (own keys stay below seed * 100_003 + 50_000 while there are < 49 requests).
            key = (seed * 100_003 + 50_000 + seg.content_id if seg.content_id is not None
                   else seed * 100_003 + rid * 1009 + k)
            feature = content.get(key)
            if feature is None:
                feature = content[key] = _feature(seg.grids, key, fam.patch_dim)
            h = tensor_hash(feature)  # sender-side hash, as the tokenizer process computes it
            if seg.key_of is not None:  # another content's key (built earlier in the specs)
                h = tensor_hash(content[seed * 100_003 + 50_000 + seg.key_of])
            pad = compute_pad_value(h)
            offsets = []
            frame_tokens: tuple[int, ...] = ()
            if seg.evs:
                frame_tokens = _evs_frames(seg, rid, fam)
                n = sum(frame_tokens) + EVS_TIMESTAMP * (len(frame_tokens) - 1)
                ids.append(torch.full((n,), pad, dtype=torch.int64))
                offs, stamps = evs_layout(pos, frame_tokens)
                if stamps:  # timestamp text between the frames
                    ids[-1][torch.tensor(stamps) - pos] = torch.randint(
                        0, vocab_size, (len(stamps),), generator=gen)
                offsets.extend(offs)
                pos += n
            elif seg.regions:
                region, sep = _region_tokens(fam, rid), fam.region_separator
                for j in range(len(seg.grids)):
                    if j:
                        ids.append(torch.randint(0, vocab_size, (sep,), generator=gen))
                        pos += sep
                    offsets.append((pos, pos + region - 1))
                    ids.append(torch.full((region,), pad, dtype=torch.int64))
                    pos += region
            else:
                n = sum(fam.tokens_of_grid(gr) for gr in seg.grids)
                offsets.append((pos, pos + n - 1))
                ids.append(torch.full((n,), pad, dtype=torch.int64))
                pos += n
            items.append(Item(seg.modality, feature, tuple(seg.grids), tuple(offsets), h, pad, frame_tokens,
                              regions=seg.regions))
        input_ids = torch.cat(ids) if ids else torch.zeros(0, dtype=torch.int64)
        requests.append(Request(rid, input_ids, tuple(items)))
    return tuple(requests)


def _region_tokens(fam: Family, rid: int) -> int:
    if fam.region_tokens is None:
        raise VlmpathError(f"request {rid}: model family {fam.name!r} has no multi-region items; "
                           "use plain images, or an encoder of a family that has them")
    return fam.region_tokens


def _evs_frames(seg: MediaSpec, rid: int, fam: Family) -> tuple[int, ...]:
    """The processor's even initial split of an EVS video's expected total over its frames."""
    where = f"request {rid}: EVS video {seg.grids!r}"
    if seg.modality != "video" or seg.regions or len(seg.grids) != 1:
        raise VlmpathError(f"{where}: an EVS item is one video grid (modality 'video', no regions)")
    if seg.grids[0][0] < 2:
        raise VlmpathError(f"{where}: EVS needs at least 2 temporal patches (t >= 2) to prune")
    t, h, w = seg.grids[0]
    split = even_split(evs_kept_tokens(t, fam.tokens_of_grid((1, h, w))), t)
    if min(split) == 0:
        raise VlmpathError(f"{where}: the expected total {sum(split)} leaves a frame without tokens "
                           "in the even split; use a larger h x w")
    return split


def schedule(lengths: Sequence[int], chunk_size: int) -> tuple[Step, ...]:
    """Chunked-prefill schedule: fill each forward step with up to ``chunk_size`` tokens,
    taking requests in arrival order; a request that does not fit is split and continues
    in the next step (one chunked request at a time, as the engine's scheduler does).
    ``chunk_size <= 0`` means no chunking: one step with every request whole."""
    if chunk_size <= 0:
        return (Step(tuple(StepEntry(i, 0, n) for i, n in enumerate(lengths))),)
    steps: list[Step] = []
    entries: list[StepEntry] = []
    budget = chunk_size
    for rid, n in enumerate(lengths):
        done = 0
        while done < n:
            take = min(budget, n - done)
            entries.append(StepEntry(rid, done, take))
            done += take
            budget -= take
            if budget == 0:
                steps.append(Step(tuple(entries)))
                entries, budget = [], chunk_size
    if entries:
        steps.append(Step(tuple(entries)))
    return tuple(steps)


def build_workload(name: str, scale: Scale, model: str, requests: tuple[Request, ...],
                   chunk_size: int, vocab_size: int, seed: int) -> Workload:
    steps = schedule([r.length for r in requests], chunk_size)
    return Workload(name, scale, model, requests, chunk_size, vocab_size, seed, steps)


# --- presets ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaleShapes:
    """Shapes per scale: tiny for a 2-core CPU, full for a GPU."""

    small_px: int       # side of a small image in pixels
    large_px: int
    region_px: int      # a 64-token region needs a 16x16 patch grid: 224 px
    video_grid: tuple[int, int, int]
    evs_grid: tuple[int, int, int]     # an EVS video: 8 temporal patches
    text: tuple[int, int]
    chunk: int
    long_chunk: int
    vocab: int
    n_small: int        # requests in many_small_images


SHAPES = {
    "tiny": ScaleShapes(small_px=112, large_px=448, region_px=224, video_grid=(4, 8, 8),
                        evs_grid=(8, 8, 8), text=(8, 24), chunk=256, long_chunk=48, vocab=4096, n_small=8),
    "full": ScaleShapes(small_px=336, large_px=1344, region_px=448, video_grid=(8, 28, 28),
                        evs_grid=(8, 28, 28), text=(32, 128), chunk=2048, long_chunk=512, vocab=32768, n_small=32),
}


@dataclass(frozen=True)
class PresetContext:
    """What a preset's builder (``preset_specs``, ``path_presets``) builds its specs from: the
    scale's shapes, the family's grid of a ``px`` x ``px`` image (``square``) and the preset's
    random stream (``gen``), drawn by ``t()`` and by variable ``regions`` only."""

    shapes: ScaleShapes
    gen: torch.Generator
    square: Callable[[int], Grid]

    @property
    def k(self) -> int:
        """The scale's image-side factor (1 at tiny)."""
        return self.shapes.small_px // SHAPES["tiny"].small_px

    def t(self) -> int:
        """A text length drawn from the stream, within the scale's ``text`` range."""
        lo, hi = self.shapes.text
        return int(torch.randint(lo, hi + 1, (1,), generator=self.gen))

    def image(self, px: int, content_id: int | None = None) -> MediaSpec:
        return MediaSpec("image", (self.square(px),), content_id=content_id)

    def video(self) -> MediaSpec:
        return MediaSpec("video", (self.shapes.video_grid,))

    def regions(self, n: int, variable: bool = False) -> MediaSpec:
        """A MiniCPM-like item of ``n`` regions; ``variable``: slices after the first differ
        in shape (drawn from the stream), the resampler still makes region_tokens rows each."""
        grids = []
        for j in range(n):
            side = (self.shapes.region_px if not variable or j == 0
                    else self.shapes.region_px // 2 * int(torch.randint(1, 3, (1,), generator=self.gen)))
            grids.append(self.square(side))
        return MediaSpec("image", tuple(grids), regions=True)


def preset(name: str, scale: Scale = DEFAULT_SCALE, seed: int = 0) -> Workload:
    """A named, seeded workload. Same name, scale and seed give identical bytes and hashes."""
    return build_preset(PRESETS[name], scale, seed)  # an unknown name: did-you-mean, the choices


def build_preset(entry: PresetEntry, scale: Scale = DEFAULT_SCALE, seed: int = 0) -> Workload:
    """The workload of one preset entry (``measure.presets``): its builder over its own
    stream, ``entry.stream(seed)``; nothing else in the table is read."""
    shapes = SHAPES[scale]
    fam = family_of(entry.encoder)
    stream = entry.stream(seed)
    ctx = PresetContext(shapes, torch.Generator().manual_seed(stream), lambda px: fam.grid_for_image(px, px, scale))
    build_specs, after_build = entry.builders()
    specs, chunk = build_specs(ctx)
    requests = build_requests(specs, shapes.vocab, stream, fam)
    cache_rows = None
    if after_build is not None:
        after_chunk, cache_rows = after_build(requests)
        chunk = chunk if after_chunk is None else after_chunk
    return replace(build_workload(entry.name, scale, entry.encoder, requests, chunk, shapes.vocab, seed),
                   cache_rows=cache_rows)


def with_item_hashes(workload: Workload, new_hash: dict[int, int]) -> Workload:
    """The same workload with items re-keyed (``old hash -> new hash``) and their
    placeholders re-padded: what the scheduler sees when it derives pad values from a
    different hash function than the sender used."""
    if all(old == new for old, new in new_hash.items()):
        return workload
    requests = []
    for req in workload.requests:
        ids = req.input_ids.clone()
        items = []
        for it in req.items:
            h = new_hash.get(it.hash, it.hash)
            pad = compute_pad_value(h)
            for a, b in it.offsets:
                ids[a:b + 1] = pad
            items.append(replace(it, hash=h, pad_value=pad))
        requests.append(Request(req.rid, ids, tuple(items)))
    return replace(workload, requests=tuple(requests))
