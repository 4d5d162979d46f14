"""Per-request vs cross-request batched vision encoding: which rows go where?

Every strategy takes the requests of one forward step (for one modality) as
``RequestChunk``s and returns the encoder rows that fall inside each request's chunk,
concatenated in request order (or None when no placeholder is in the step). They differ
in how many vision-tower calls they make and in how they split the tower's output:

- ``per_request``: the path before sglang #25910. One call per request for its cache
  misses; single-offset requests slice per item, others take the "full" path (one cache
  entry per request under the combined hash, cut with ``get_embedding_chunk``).
- ``batched``: the correct cross-request design (embed-path.md, "Correct batched
  design"): gate per request and item (single-offset items whose row count the encoder
  knows in advance), cache keys of hash and grids (``shape_key``: equal bytes under another
  shape are another item), one call per step for all misses deduplicated by (key, rows), lengths
  from the encoder, a host-side check that they sum to the output rows, clone before
  caching, everything else through the per-request full path, never crop.
- ``batched_by_span``: a faithful replay of #25910, registered as known-bad: the gate looks
  only at the batch's first item, items are zipped with the request's flattened offsets,
  and the batched output is split by those placeholder spans instead of the encoder's
  rows. Multi-region items make ``torch.split`` fail (the AMD CI crash); equal-sized
  mismatches would silently place and cache wrong rows.

EVS videos (``Item.frame_tokens``) keep a data-dependent number of rows per frame, so only
the full path can encode them: ``batched`` gates them out (``expected_rows`` is None),
``per_request`` sends them there (one offset per frame), and ``batched_by_span``'s gate
fails on their multiple offsets, so a step led by an EVS video takes the full path (the
routine never mixes an EVS request with others in a step, see ``vlmpath.engines.reference``). The full
path re-lays the request's frame placeholders to the encoder's per-frame counts inside
the pre-sized length (``evs_layout.evs_relayout``), cuts its rows with the re-laid offsets,
and reports the re-laid items in ``EncodeContext.relaid`` so that the routine rewrites the
step's ``input_ids``. The per-frame counts are kept with the cache entry
(``EncodeContext.frame_rows``), as the engine's ``EVSEmbeddingResult`` keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch

from vlmpath.core.errors import LengthMismatchError
from vlmpath.measure.cache import EmbeddingCache, combine_hashes
from vlmpath.measure.evs_layout import evs_relayout
from vlmpath.measure.items import Item
from vlmpath.measure.path_ledger import PathLedger
from vlmpath.paths import registry


@dataclass(frozen=True)
class RequestChunk:
    """One request's items of a modality and its slice ``[prefix, prefix + extend)``."""

    rid: int
    items: tuple[Item, ...]
    prefix: int
    extend: int

    @property
    def end(self) -> int:  # exclusive
        return self.prefix + self.extend


@dataclass
class EncodeStats:
    encoder_calls: int = 0
    encoded_items: int = 0
    cache_hits: int = 0


@dataclass
class EncodeContext:
    """What a strategy may use: the encoder, the cache, counters, and a hook that wraps
    each vision-tower call (the routine counts syncs inside the tower separately)."""

    encoder: object
    cache: EmbeddingCache
    stats: EncodeStats = field(default_factory=EncodeStats)
    encoder_region: Callable[[], AbstractContextManager] = nullcontext
    # EVS: per-item frame rows of a full-path cache entry, by its combined hash (what the
    # engine's EVSEmbeddingResult carries next to the rows).
    frame_rows: dict[int, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    # EVS: rid -> that request's chunk items re-laid by the last strategy call; the routine
    # takes them out after each call and rewrites the request's input ids.
    relaid: dict[int, tuple[Item, ...]] = field(default_factory=dict)
    # Which items each call encoded, for which chunk (re-encodes, off-chunk encodes).
    ledger: PathLedger | None = None

    def encode(self, items: Sequence[Item]):
        self.stats.encoder_calls += 1
        self.stats.encoded_items += len(items)
        if self.ledger is not None:
            self.ledger.encoded(items)
        with self.encoder_region():
            return self.encoder.encode(items)

    def cached(self, item: Item, key: int | None = None) -> torch.Tensor | None:
        """A single-item cache hit (under ``key``, default the item's hash) whose row count
        matches the item's span, else None: a wrong-length entry is never used (it is
        re-encoded)."""
        hit = self.cache.get_single(item.hash if key is None else key)
        if hit is not None and hit.shape[0] == item.span:
            self.stats.cache_hits += 1
            return hit
        return None


EncodeStrategy = Callable[[Sequence[RequestChunk], EncodeContext], "torch.Tensor | None"]


# --- chunk arithmetic (embed-path.md section 2) ------------------------------------------
def chunk_row_range(offsets: Sequence[tuple[int, int]], prefix: int, extend: int) -> tuple[int, int]:
    """Rows ``[s_idx, e_idx)`` of a request's concatenated item rows that fall in the chunk
    ``[prefix, prefix + extend)``; offsets are inclusive spans. Assumes rows == spans."""
    if extend <= 0:
        return 0, 0
    s, e = prefix, prefix + extend - 1
    s_idx = e_idx = 0
    for a, b in offsets:
        if s > b:
            s_idx += b - a + 1
        elif a <= s:
            s_idx += s - a
        if e > b:
            e_idx += b - a + 1
        elif a <= e:
            e_idx += e - a + 1
    return s_idx, max(s_idx, e_idx)


def item_overlap(start: int, end: int, cs: int, ce: int) -> tuple[int, int] | None:
    """Rows of an item spanning ``[start, end]`` (inclusive) inside chunk ``[cs, ce)``."""
    if end < cs or start >= ce:
        return None
    return max(start, cs) - start, min(end, ce - 1) - start + 1


def chunk_is_active(rc: RequestChunk) -> bool:
    """Whether the chunk path looks at this request: it has items not all behind the chunk."""
    return rc.extend > 0 and bool(rc.items) and any(b >= rc.prefix for it in rc.items for _, b in it.offsets)


def _active(reqs: Sequence[RequestChunk]) -> Iterator[RequestChunk]:
    """Requests whose chunk can hold placeholders of their items."""
    return (rc for rc in reqs if chunk_is_active(rc))


def _cat(pieces: list[torch.Tensor]) -> torch.Tensor | None:
    pieces = [p for p in pieces if p.shape[0]]
    return torch.cat(pieces) if pieces else None


def _split_checked(out, items: Sequence[Item], who: str) -> list[torch.Tensor]:
    """Split an encoder output by the rows the encoder says it returned, after checking on
    the host (shape metadata only, no sync) that they add up and match each item's span."""
    rows = list(out.item_rows)
    if sum(rows) != out.embeddings.shape[0]:
        raise LengthMismatchError(
            f"{who}: encoder {getattr(out, 'name', '')}returned {out.embeddings.shape[0]} rows but "
            f"reported per-item rows summing to {sum(rows)}; fix the encoder's item_rows")
    for it, n in zip(items, rows):
        if n != it.span:
            raise LengthMismatchError(
                f"{who}: item {it.hash:#x} has {it.span} placeholder tokens but the encoder returned "
                f"{n} rows for it; the processor's token count and the encoder disagree (refusing to crop)")
    return list(torch.split(out.embeddings, rows))


# --- per request (before #25910) ---------------------------------------------------------
def _by_item(rc: RequestChunk, ctx: EncodeContext) -> torch.Tensor | None:
    """Single-offset items: cache per item, one encoder call for the request's misses."""
    overlapping = [it for it in rc.items if item_overlap(*it.offsets[0], rc.prefix, rc.end)]
    rows: dict[int, torch.Tensor] = {}
    misses = []
    for it in overlapping:
        hit = ctx.cached(it)
        if hit is None:
            misses.append(it)
        else:
            rows[id(it)] = hit
    if misses:
        out = ctx.encode(misses)
        for it, piece in zip(misses, _split_checked(out, misses, "per_request")):
            rows[id(it)] = piece
            ctx.cache.set(it.hash, piece)  # the cache clones views it does not own
    pieces = []
    for it in overlapping:
        lo, hi = item_overlap(*it.offsets[0], rc.prefix, rc.end)
        pieces.append(rows[id(it)][lo:hi])
    return _cat(pieces)


def _full(rc: RequestChunk, ctx: EncodeContext) -> torch.Tensor | None:
    """Any items: one cache entry for the whole request under the combined hash. EVS
    items are re-laid to the encoder's per-frame counts before the rows are cut."""
    hashes = [it.hash for it in rc.items]
    key = combine_hashes(hashes)
    emb = ctx.cache.get(hashes)
    span = sum(it.span for it in rc.items)
    evs = any(it.frame_tokens for it in rc.items)
    frames = ctx.frame_rows.get(key)
    if emb is not None and emb.shape[0] == span and (frames is not None or not evs):
        ctx.stats.cache_hits += 1
    else:  # a hit without its frame counts cannot be laid out: encode again
        out = ctx.encode(list(rc.items))
        if evs and out.frame_rows is None:
            raise LengthMismatchError(
                f"per_request full path: request {rc.rid} holds EVS videos but encoder "
                f"{getattr(ctx.encoder, 'name', type(ctx.encoder).__name__)!r} reports no per-frame "
                "rows; use an EVS encoder (workload model 'evs')")
        _split_checked(out, rc.items, "per_request full path")
        emb, frames = out.embeddings, out.frame_rows
        ctx.cache.set(key, emb)
        if evs:
            ctx.frame_rows[key] = frames
    items = rc.items
    if evs:
        items = tuple(evs_relayout(it, f) if it.frame_tokens else it for it, f in zip(rc.items, frames))
        ctx.relaid[rc.rid] = items
    offsets = [o for it in items for o in it.offsets]
    s, e = chunk_row_range(offsets, rc.prefix, rc.extend)
    return emb[s:e]


def per_request(reqs: Sequence[RequestChunk], ctx: EncodeContext) -> torch.Tensor | None:
    pieces = []
    for rc in _active(reqs):
        one_offset = all(len(it.offsets) == 1 for it in rc.items)
        piece = _by_item(rc, ctx) if one_offset else _full(rc, ctx)
        if piece is not None:
            pieces.append(piece)
    return _cat(pieces)


# --- correct cross-request batching ------------------------------------------------------
def shape_key(it: Item) -> int:
    """The cache key of the correct design: the content hash *and* the item's grids, so that
    the same bytes under another shape (a hash blind to shape) are another entry."""
    return hash((0x73686B, it.hash, it.grid_thw))


def batched(reqs: Sequence[RequestChunk], ctx: EncodeContext) -> torch.Tensor | None:
    def batchable(it: Item) -> bool:
        return len(it.offsets) == 1 and ctx.encoder.expected_rows(it) == it.span

    plan: list[tuple[RequestChunk, list[tuple[Item, torch.Tensor | None]] | None]] = []
    misses: dict[tuple[int, int], Item] = {}  # dedup by (hash, rows), first-seen order
    for rc in _active(reqs):
        if not all(batchable(it) for it in rc.items):
            plan.append((rc, None))  # per-request full path
            continue
        entries = []
        for it in rc.items:
            if item_overlap(*it.offsets[0], rc.prefix, rc.end) is None:
                continue
            hit = ctx.cached(it, shape_key(it))
            if hit is None:
                misses.setdefault((shape_key(it), it.span), it)
            entries.append((it, hit))
        plan.append((rc, entries))

    fresh: dict[tuple[int, int], torch.Tensor] = {}
    if misses:
        items = list(misses.values())
        out = ctx.encode(items)
        for it, piece in zip(items, _split_checked(out, items, "batched")):
            piece = piece.clone()  # a view would pin the whole batch output in the cache
            fresh[(shape_key(it), it.span)] = piece
            ctx.cache.set(shape_key(it), piece)

    pieces = []
    for rc, entries in plan:
        if entries is None:
            piece = _full(rc, ctx)
            if piece is not None:
                pieces.append(piece)
            continue
        for it, hit in entries:
            rows = hit if hit is not None else fresh[(shape_key(it), it.span)]
            lo, hi = item_overlap(*it.offsets[0], rc.prefix, rc.end)
            pieces.append(rows[lo:hi])
    return _cat(pieces)


# --- the #25910 replay (known-bad) -------------------------------------------------------
def batched_by_span(reqs: Sequence[RequestChunk], ctx: EncodeContext) -> torch.Tensor | None:
    active = list(_active(reqs))
    batch_items = [it for rc in reqs for it in rc.items]
    if not batch_items or len(batch_items[0].offsets) != 1:
        # The gate looks at the first item of the whole batch only; on failure the whole
        # batch takes the legacy full path.
        return _cat([p for rc in active if (p := _full(rc, ctx)) is not None])

    plan = []
    miss_items: list[Item] = []
    token_counts: list[int] = []
    for rc in active:
        flat = [o for it in rc.items for o in it.offsets]
        entries = []
        # zip pairs each item with *one* offset: right only if every item has one.
        for it, (s, e) in zip(rc.items, flat):
            if item_overlap(s, e, rc.prefix, rc.end) is None:
                continue
            hit = ctx.cache.get_single(it.hash)
            if hit is None:
                miss_items.append(it)
                token_counts.append(e - s + 1)  # placeholder span, not encoder rows
            else:
                ctx.stats.cache_hits += 1
            entries.append((rc, it, hit, s, e))
        plan.append(entries)

    fresh: dict[int, torch.Tensor] = {}
    if miss_items:
        out = ctx.encode(miss_items).embeddings
        # Raises "split_with_sizes expects split_sizes to sum exactly to ..." when the
        # spans do not add up to the rows, as on AMD CI with MiniCPM-V.
        for it, piece in zip(miss_items, torch.split(out, token_counts)):
            fresh[id(it)] = piece
            ctx.cache.set(it.hash, piece)
    pieces = []
    for entries in plan:
        for rc, it, hit, s, e in entries:
            rows = hit if hit is not None else fresh[id(it)]
            lo, hi = item_overlap(s, e, rc.prefix, rc.end)
            pieces.append(rows[lo:hi])
    return _cat(pieces)


# The registry's one home is ``paths.registry`` (torch-free, entries named lazily); this is
# the same object, under the name ``engines.reference`` and the asv suite (whose files also
# run against older packages, where the registry lived here) import.
ENCODE_STRATEGIES = registry.ENCODE_STRATEGIES
