"""What does a realistic batch of multimodal requests look like?

A ``Workload`` is a list of ``Request``s (token ids with placeholder spans and the
``Item``s that fill them) plus a chunked-prefill schedule. It mirrors the engine's data
model (embed-path.md section 1): an item has a modality, a content hash, a pad value
derived from the hash, one or more *inclusive* ``(start, end)`` offsets into the request's
full token ids, and its processor output (Qwen2.5-VL ``pixel_values`` ``[patches, 1176]``
plus ``grid_thw``; one grid row per image, video or region).

Workloads come from named presets (seeded, deterministic) at two scales, or from a JSONL
trace of real traffic (``load_trace``). Everything is built from request *specs* (text
lengths and media shapes), so presets and traces share one builder.

Trace format, one JSON object per line::

    {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, {"text": 8}]}

A segment is ``{"text": n}`` (n text tokens), ``{"image": [height_px, width_px]}``,
``{"image_grid": [t, h, w]}`` (patches), ``{"video_grid": [t, h, w]}`` or
``{"regions": [[h, w], ...]}`` (one MiniCPM-like item with one 64-token span per region).
Requests are replayed in ``arrival`` order.

EVS videos (efficient video sampling, embed-path.md section 2): the processor cannot know
how many tokens each frame keeps, only the total after pruning (frame 0 whole, the ``keep``
share of the rest, rounded as the encoder rounds). It pre-sizes the prompt to that total,
laid out as one placeholder range per frame with ``EVS_TIMESTAMP`` timestamp text tokens
between frames and an even initial split; the item records that split in
``frame_tokens``. Once the encoder has reported the real per-frame counts, the routine
re-lays the frames inside the same length (``evs_relayout`` for the offsets,
``evs_relayout_ids`` for the token ids).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from .errors import VlmpathError
from .paths.hashing import compute_pad_value, tensor_hash

PATCH = 14
MERGE = 2
TEMPORAL_PATCH = 2
PATCH_DIM = 3 * TEMPORAL_PATCH * PATCH * PATCH  # 1176 for Qwen2.5-VL
REGION_TOKENS = 64      # MiniCPM's query_num: every region becomes 64 rows
REGION_SEPARATOR = 2    # text tokens between regions (slice start/end markers)
EVS_TIMESTAMP = 2       # timestamp text tokens between the frames of an EVS video
EVS_KEEP = 0.5          # share of the tokens of frames 1.. that EVS keeps (the encoder's default)
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


@dataclass(frozen=True, eq=False)
class Workload:
    name: str
    scale: str
    model: str                     # encoder registry name used for every item
    requests: tuple[Request, ...]
    chunk_size: int                # prefill token budget per forward step (-1: no chunking)
    vocab_size: int
    seed: int
    steps: tuple[Step, ...] = field(default=())

    @property
    def prefill_tokens(self) -> int:
        return sum(r.length for r in self.requests)

    @property
    def items(self) -> list[Item]:
        return [it for r in self.requests for it in r.items]

    def request(self, rid: int) -> Request:
        return self.requests[rid]

    def with_chunk_size(self, chunk_size: int) -> Workload:
        return build_workload(self.name, self.scale, self.model, self.requests, chunk_size,
                              self.vocab_size, self.seed)


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


def evs_kept_tokens(grid: Sequence[int], keep: float = EVS_KEEP) -> int:
    """Tokens an EVS video keeps: frame 0 whole plus ``round(keep * (t - 1) * per_frame)``
    of the later frames (Python's ``round``, exactly as ``EvsEncoder`` rounds)."""
    t, h, w = grid
    per = h * w // (MERGE * MERGE)
    return per if t == 1 else per + round(keep * (t - 1) * per)


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
    from .errors import LengthMismatchError

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


# --- request specs ----------------------------------------------------------------------
@dataclass(frozen=True)
class MediaSpec:
    """One item to generate: its modality and grids (several grids = several regions)."""

    modality: str
    grids: tuple[tuple[int, int, int], ...]
    regions: bool = False          # MiniCPM-like: one 64-token span per grid
    content_id: int | None = None  # equal ids give equal content (cache reuse)
    evs: bool = False              # EVS video: pre-sized to the pruned total, one range per frame


@dataclass(frozen=True)
class RequestSpec:
    segments: tuple[int | MediaSpec, ...]   # ints are text lengths


def _check_grid(grid: Sequence[int], where: str) -> tuple[int, int, int]:
    if len(grid) != 3 or any((not isinstance(v, int)) or v <= 0 for v in grid):
        raise VlmpathError(f"{where}: a grid is three positive integers [t, h, w], got {grid!r}")
    t, h, w = grid
    if h % MERGE or w % MERGE:
        raise VlmpathError(f"{where}: grid h and w must be multiples of the merge size {MERGE}, got {grid!r}")
    return (t, h, w)


def _feature(grids: Sequence[tuple[int, int, int]], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    patches = sum(t * h * w for t, h, w in grids)
    return torch.randn(patches, PATCH_DIM, generator=g)


def build_requests(specs: Sequence[RequestSpec], vocab_size: int, seed: int) -> tuple[Request, ...]:
    """Turn specs into requests: token ids, offsets, features, hashes and pad values."""
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
                feature = content[key] = _feature(seg.grids, key)
            h = tensor_hash(feature)  # sender-side hash, as the tokenizer process computes it
            pad = compute_pad_value(h)
            offsets = []
            frame_tokens: tuple[int, ...] = ()
            if seg.evs:
                frame_tokens = _evs_frames(seg, rid)
                n = sum(frame_tokens) + EVS_TIMESTAMP * (len(frame_tokens) - 1)
                ids.append(torch.full((n,), pad, dtype=torch.int64))
                offs, stamps = evs_layout(pos, frame_tokens)
                if stamps:  # timestamp text between the frames
                    ids[-1][torch.tensor(stamps) - pos] = torch.randint(
                        0, vocab_size, (len(stamps),), generator=gen)
                offsets.extend(offs)
                pos += n
            elif seg.regions:
                for j in range(len(seg.grids)):
                    if j:
                        ids.append(torch.randint(0, vocab_size, (REGION_SEPARATOR,), generator=gen))
                        pos += REGION_SEPARATOR
                    offsets.append((pos, pos + REGION_TOKENS - 1))
                    ids.append(torch.full((REGION_TOKENS,), pad, dtype=torch.int64))
                    pos += REGION_TOKENS
            else:
                n = sum(tokens_of_grid(gr) for gr in seg.grids)
                offsets.append((pos, pos + n - 1))
                ids.append(torch.full((n,), pad, dtype=torch.int64))
                pos += n
            items.append(Item(seg.modality, feature, tuple(seg.grids), tuple(offsets), h, pad, frame_tokens))
        input_ids = torch.cat(ids) if ids else torch.zeros(0, dtype=torch.int64)
        requests.append(Request(rid, input_ids, tuple(items)))
    return tuple(requests)


def _evs_frames(seg: MediaSpec, rid: int) -> tuple[int, ...]:
    """The processor's even initial split of an EVS video's expected total over its frames."""
    where = f"request {rid}: EVS video {seg.grids!r}"
    if seg.modality != "video" or seg.regions or len(seg.grids) != 1:
        raise VlmpathError(f"{where}: an EVS item is one video grid (modality 'video', no regions)")
    if seg.grids[0][0] < 2:
        raise VlmpathError(f"{where}: EVS needs at least 2 temporal patches (t >= 2) to prune")
    split = even_split(evs_kept_tokens(seg.grids[0]), seg.grids[0][0])
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


def build_workload(name: str, scale: str, model: str, requests: tuple[Request, ...],
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


def _text(gen: torch.Generator, shapes: ScaleShapes) -> int:
    lo, hi = shapes.text
    return int(torch.randint(lo, hi + 1, (1,), generator=gen))


def _image(px: int, content_id: int | None = None) -> MediaSpec:
    return MediaSpec("image", (grid_for_image(px, px),), content_id=content_id)


def _regions(n: int, shapes: ScaleShapes, variable: bool, gen: torch.Generator) -> MediaSpec:
    grids = []
    for j in range(n):
        # Slices differ in shape; the resampler still makes 64 rows of each.
        side = shapes.region_px if not variable or j == 0 else shapes.region_px // 2 * int(torch.randint(1, 3, (1,), generator=gen))
        grids.append(grid_for_image(side, side))
    return MediaSpec("image", tuple(grids), regions=True)


def _preset_specs(name: str, shapes: ScaleShapes, gen: torch.Generator) -> tuple[str, list[RequestSpec], int]:
    t = lambda: _text(gen, shapes)  # noqa: E731 - a local shorthand
    if name == "many_small_images":
        specs = [RequestSpec((t(), _image(shapes.small_px), t(), _image(shapes.small_px), t()))
                 for _ in range(shapes.n_small)]
        return "qwen2_5_vl", specs, shapes.chunk
    if name == "few_large_images":
        specs = [RequestSpec((t(), _image(shapes.large_px), t())) for _ in range(2)]
        return "qwen2_5_vl", specs, -1
    if name == "video":
        specs = [RequestSpec((t(), MediaSpec("video", (shapes.video_grid,)), t())) for _ in range(2)]
        return "qwen2_5_vl", specs, shapes.chunk
    if name == "multi_region":
        # The first request is a plain single-region image, so a batch-level gate that
        # looks only at the first item lets the multi-region items after it through.
        specs = [RequestSpec((t(), _regions(1, shapes, False, gen), t()))]
        specs += [RequestSpec((t(), _regions(n, shapes, True, gen), t())) for n in (3, 2, 4)]
        specs += [RequestSpec((t(), _regions(1, shapes, False, gen), t()))]
        return "multi_region", specs, shapes.chunk
    if name == "chunked_long":
        specs = [RequestSpec((t(), _image(shapes.region_px), t(), _image(shapes.region_px), t(),
                              _image(shapes.small_px), t())) for _ in range(2)]
        return "qwen2_5_vl", specs, shapes.long_chunk
    if name == "cache_reuse":
        pool = [_image(shapes.small_px, content_id=9000 + k) for k in range(2)]
        specs = [RequestSpec((t(), pool[i % 2], t(), pool[(i + 1) % 2], t())) for i in range(6)]
        return "qwen2_5_vl", specs, shapes.chunk
    if name == "mixed":
        specs = [
            RequestSpec((t(), _image(shapes.small_px), t())),
            RequestSpec((t(),)),  # a text-only request in the batch
            RequestSpec((t(), _image(shapes.region_px), t(), _image(shapes.small_px, content_id=7000), t())),
            RequestSpec((t(), MediaSpec("video", (shapes.video_grid,)), t())),
            RequestSpec((t(), _image(shapes.small_px, content_id=7000), t())),
        ]
        return "qwen2_5_vl", specs, shapes.chunk
    if name == "evs_video":
        # One request: its frame re-layout rewrites the step's input ids, which the engine
        # supports only when that request is the whole batch. The long-prompt chunk size
        # puts step boundaries inside the video.
        specs = [RequestSpec((t(), MediaSpec("video", (shapes.evs_grid,), evs=True), t()))]
        return "evs", specs, shapes.long_chunk
    raise AssertionError(name)  # guarded by PRESETS


# New presets go at the end: a preset's seed derives from its index.
PRESETS = ("many_small_images", "few_large_images", "video", "multi_region",
           "chunked_long", "cache_reuse", "mixed", "evs_video")


def check_scale(scale: str) -> str:
    if scale not in SHAPES:
        raise VlmpathError(f"unknown scale {scale!r}: choose one of {', '.join(SCALES)}")
    return scale


def preset(name: str, scale: str = "tiny", seed: int = 0) -> Workload:
    """A named, seeded workload. Same name, scale and seed give identical bytes and hashes."""
    from .errors import UnknownNameError

    if name not in PRESETS:
        raise UnknownNameError("workload preset", name, PRESETS)
    shapes = SHAPES[check_scale(scale)]
    gen = torch.Generator().manual_seed(seed * 7919 + PRESETS.index(name))
    model, specs, chunk = _preset_specs(name, shapes, gen)
    requests = build_requests(specs, shapes.vocab, seed * 7919 + PRESETS.index(name))
    return build_workload(name, scale, model, requests, chunk, shapes.vocab, seed)


# --- traces -----------------------------------------------------------------------------
def parse_trace_line(line: str, where: str) -> tuple[int, RequestSpec]:
    """One trace line to ``(arrival, spec)``; ``where`` ("file:line") goes into errors."""
    fix = ('expected {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, ...]}')
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise VlmpathError(f"{where}: not valid JSON ({exc.msg}); {fix}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise VlmpathError(f"{where}: missing 'segments' list; {fix}")
    arrival = obj.get("arrival", 0)
    if not isinstance(arrival, (int, float)):
        raise VlmpathError(f"{where}: 'arrival' must be a number; {fix}")
    segs: list[int | MediaSpec] = []
    for k, seg in enumerate(obj["segments"]):
        here = f"{where} segment {k}"
        if not isinstance(seg, dict) or len(seg) != 1:
            raise VlmpathError(f"{here}: each segment is an object with one key "
                               f"(text, image, image_grid, video_grid, regions), got {seg!r}")
        (kind, val), = seg.items()
        if kind == "text":
            if not isinstance(val, int) or val < 0:
                raise VlmpathError(f"{here}: text length must be a non-negative integer, got {val!r}")
            segs.append(val)
        elif kind == "image":
            if not (isinstance(val, list) and len(val) == 2 and all(isinstance(v, int) and v > 0 for v in val)):
                raise VlmpathError(f"{here}: image is [height_px, width_px], got {val!r}")
            segs.append(MediaSpec("image", (grid_for_image(*val),)))
        elif kind in ("image_grid", "video_grid"):
            grid = _check_grid(val if isinstance(val, list) else [val], here)
            segs.append(MediaSpec(kind.split("_")[0], (grid,)))
        elif kind == "regions":
            if not (isinstance(val, list) and val):
                raise VlmpathError(f"{here}: regions is a non-empty list of [height_px, width_px]")
            grids = []
            for r in val:
                if not (isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) and v > 0 for v in r)):
                    raise VlmpathError(f"{here}: each region is [height_px, width_px], got {r!r}")
                grids.append(grid_for_image(*r))
            segs.append(MediaSpec("image", tuple(grids), regions=True))
        else:
            raise VlmpathError(f"{here}: unknown segment kind {kind!r}: use text, image, "
                               "image_grid, video_grid or regions")
    return arrival, RequestSpec(tuple(segs))


def read_trace(path: str | Path) -> list[RequestSpec]:
    """A JSONL trace's request specs in arrival order (cheap: builds no features)."""
    path = Path(path)
    if not path.is_file():
        raise VlmpathError(f"trace file {str(path)!r} does not exist")
    rows: list[tuple[float, int, RequestSpec]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                arrival, spec = parse_trace_line(line, f"{path}:{n}")
                rows.append((arrival, n, spec))
    if not rows:
        raise VlmpathError(f"trace file {str(path)!r} holds no requests")
    rows.sort(key=lambda r: (r[0], r[1]))
    return [s for _, _, s in rows]


def load_trace(path: str | Path, scale: str = "tiny", seed: int = 0,
               chunk_size: int | None = None) -> Workload:
    """Replay a JSONL trace (see the module docstring) as a workload."""
    path = Path(path)
    specs = read_trace(path)
    shapes = SHAPES[check_scale(scale)]
    model = "multi_region" if any(isinstance(m, MediaSpec) and m.regions for s in specs for m in s.segments) else "qwen2_5_vl"
    requests = build_requests(specs, shapes.vocab, seed)
    return build_workload(f"trace:{path.stem}", scale, model, requests,
                          shapes.chunk if chunk_size is None else chunk_size, shapes.vocab, seed)


def workload_by_name(name: str, scale: str = "tiny", seed: int = 0) -> Workload:
    """A preset by name, or a trace when ``name`` is ``trace:<path>``."""
    if name.startswith("trace:"):
        return load_trace(name[len("trace:"):], scale, seed)
    return preset(name, scale, seed)


def iter_item_positions(items: Iterable[Item]) -> Iterable[tuple[Item, list[int]]]:
    """Each item with the list of its token positions (over all its offsets, in order)."""
    for it in items:
        yield it, [p for a, b in it.offsets for p in range(a, b + 1)]


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
    return Workload(workload.name, workload.scale, workload.model, tuple(requests),
                    workload.chunk_size, workload.vocab_size, workload.seed, workload.steps)
