"""Which workloads exercise the split order, the embedding cache and per-chunk encoding?

The presets of issue 38, one builder each (``preset_specs``'s contract: a
``workload.PresetContext`` in, request specs and a chunk size out), named by their entries
in ``measure.presets``, each with the reference's expectation in docs/measures.md and
tests/test_path_ledger.py:

- ``split_order``: batched encoder calls with distinct row counts in an order that no
  reversal or rotation keeps (a split by the right sizes in the wrong order is red here);
- ``cache_oversize``: a small cache and one item larger than all of it;
- ``cache_dup_chunked`` / ``cache_dup_pressure``: the same item twice in one chunked
  request, with another request, or other items, forcing evictions;
- ``multi_span_chunks``: multi-span items under chunk boundaries before, between and after
  their spans;
- ``key_collision``: distinct items under one key (equal bytes, transposed grids; a forced
  key with half the span).

``oversize_after`` and ``two_and_a_half_items`` are the entries' ``after_build``: the chunk
size or cache budget that follows from the built requests.
"""

from __future__ import annotations

from vlmpath.measure.items import Request
from vlmpath.measure.workload import MediaSpec, PresetContext, RequestSpec

Specs = tuple[list[RequestSpec], int]


def split_order(c: PresetContext) -> Specs:
    # One batched encoder call holds five items of five distinct row counts (tiny: 16, 64,
    # 36 in the first request, 4, 25 in the second), in an order that no reversal or
    # rotation maps onto itself: a split by the right sizes in the wrong order misplaces
    # rows here (every other preset's calls hold uniform or palindromic counts).
    k, t = c.k, c.t
    specs = [RequestSpec((t(), c.image(112 * k), t(), c.image(224 * k), t(), c.image(168 * k), t())),
             RequestSpec((t(), c.image(56 * k), t(), c.image(140 * k), t()))]
    return specs, -1


def cache_oversize(c: PresetContext) -> Specs:
    # A cache of A + B + A/2 rows, one item (BIG) larger than all of it between normal
    # ones; the second request (its own step) needs A and B again: an oversize item that
    # flushes the cache before it is refused makes them evictions and re-encodes.
    k = c.k
    a, b = c.image(112 * k, content_id=9100), c.image(112 * k, content_id=9101)
    specs = [RequestSpec((8, a, 8, b, 8, c.image(280 * k), 8)), RequestSpec((8, a, 8, b, 8))]
    return specs, 0  # chunk: the first request's length (``oversize_after``)


def cache_dup_chunked(c: PresetContext) -> Specs:
    # The same item X twice in one chunked request (X, W, X), then a request (Y, X) whose Y
    # forces an eviction from a cache of 2.5 items: least-recently-used is W (X was just
    # read), so nothing is encoded twice; a cache that drops X while the request still
    # needs it, or whose hits do not refresh X, encodes X again.
    k = c.k
    x, w = c.image(224 * k, content_id=9200), c.image(224 * k, content_id=9201)
    specs = [RequestSpec((8, x, 8, w, 8, x, 8)), RequestSpec((8, c.image(224 * k), 8, x, 8))]
    return specs, c.shapes.long_chunk


def multi_span_chunks(c: PresetContext) -> Specs:
    # Multi-span items (regions split by text) under chunks whose boundaries fall inside a
    # span, between an item's spans, between items and after the last span; the second
    # item starts chunks after the first, so a path encoding it with the first encodes
    # it for a chunk that does not touch it.
    specs = [RequestSpec((8, c.regions(2), 40, c.regions(3), 8)),
             RequestSpec((8, c.regions(2), 8))]
    return specs, c.shapes.long_chunk


def cache_dup_pressure(c: PresetContext) -> Specs:
    # The same item X twice in one chunked request with two others between (X, W, Z, X), in
    # a cache of 2.5 items: when Z is stored, X's first occurrence is consumed but its
    # second is still to come. A cache that lets X go then (an LRU that does not know the
    # request still needs it, or a per-request reference count dropped at the first
    # occurrence: vLLM before #54284) encodes X again; one that holds it until its last
    # occurrence evicts W instead.
    k = c.k
    x = c.image(224 * k, content_id=9300)
    specs = [RequestSpec((8, x, 8, c.image(224 * k), 8, c.image(224 * k), 8, x, 8))]
    return specs, c.shapes.long_chunk


def key_collision(c: PresetContext) -> Specs:
    # Distinct items under one key: the same pixel bytes as a 8x16 and a 16x8 patch grid
    # (a hash of the bytes alone, blind to shape, gives both one key: same span, other
    # rows), and an item forced onto that key with half the span. A cache keyed by the
    # hash alone serves the second grid the first one's rows; a hit whose row count is
    # not the span must be refused and encoded (never cropped or crashing the step).
    k, t = c.k, c.t
    g = lambda h, w: MediaSpec("image", ((1, h * k, w * k),), content_id=9400)  # noqa: E731
    forced = MediaSpec("image", ((1, 8 * k, 8 * k),), key_of=9400)
    specs = [RequestSpec((t(), g(8, 16), t())), RequestSpec((t(), g(16, 8), t(), forced, t()))]
    return specs, -1


def oversize_after(requests: tuple[Request, ...]) -> tuple[int, int]:
    """``cache_oversize``: chunk = the first request's length; cache = A + B + A/2 rows."""
    a, b, big = requests[0].items
    budget = a.span + b.span + a.span // 2
    assert big.span > budget  # the preset's point: one item larger than the whole cache
    return requests[0].length, budget


def two_and_a_half_items(requests: tuple[Request, ...]) -> tuple[None, int]:
    """The cache-duplicate presets: the builder's chunk, a cache of 2.5 times X's rows."""
    return None, requests[0].items[0].span * 5 // 2
