"""What requests does each of the placement presets hold?

One builder per preset of ``measure.presets`` (the table names each one lazily): it takes
the preset's ``workload.PresetContext`` (the scale's shapes, the family's grid of a square
image, and the text lengths drawn from the preset's own stream) and returns its request
specs and chunk size (-1: no chunking). The stream is drawn in the order a builder calls
``c.t()`` and ``c.regions(..., variable=True)``, so a builder's call order is part of its
workload. Issue 38's path presets are in ``measure.path_presets``.
"""

from __future__ import annotations

from vlmpath.measure.workload import MediaSpec, PresetContext, RequestSpec

Specs = tuple[list[RequestSpec], int]


def many_small_images(c: PresetContext) -> Specs:
    px = c.shapes.small_px
    return [RequestSpec((c.t(), c.image(px), c.t(), c.image(px), c.t())) for _ in range(c.shapes.n_small)], c.shapes.chunk


def few_large_images(c: PresetContext) -> Specs:
    return [RequestSpec((c.t(), c.image(c.shapes.large_px), c.t())) for _ in range(2)], -1


def video(c: PresetContext) -> Specs:
    return [RequestSpec((c.t(), c.video(), c.t())) for _ in range(2)], c.shapes.chunk


def multi_region(c: PresetContext) -> Specs:
    # The first request is a plain single-region image, so a batch-level gate that
    # looks only at the first item lets the multi-region items after it through.
    specs = [RequestSpec((c.t(), c.regions(1), c.t()))]
    specs += [RequestSpec((c.t(), c.regions(n, variable=True), c.t())) for n in (3, 2, 4)]
    specs += [RequestSpec((c.t(), c.regions(1), c.t()))]
    return specs, c.shapes.chunk


def chunked_long(c: PresetContext) -> Specs:
    s = c.shapes
    return [RequestSpec((c.t(), c.image(s.region_px), c.t(), c.image(s.region_px), c.t(), c.image(s.small_px), c.t()))
            for _ in range(2)], s.long_chunk


def cache_reuse(c: PresetContext) -> Specs:
    pool = [c.image(c.shapes.small_px, content_id=9000 + k) for k in range(2)]
    return [RequestSpec((c.t(), pool[i % 2], c.t(), pool[(i + 1) % 2], c.t())) for i in range(6)], c.shapes.chunk


def mixed(c: PresetContext) -> Specs:
    s = c.shapes
    specs = [
        RequestSpec((c.t(), c.image(s.small_px), c.t())),
        RequestSpec((c.t(),)),  # a text-only request in the batch
        RequestSpec((c.t(), c.image(s.region_px), c.t(), c.image(s.small_px, content_id=7000), c.t())),
        RequestSpec((c.t(), c.video(), c.t())),
        RequestSpec((c.t(), c.image(s.small_px, content_id=7000), c.t())),
    ]
    return specs, s.chunk


def evs_video(c: PresetContext) -> Specs:
    # One request: its frame re-layout rewrites the step's input ids, which the engine
    # supports only when that request is the whole batch. The long-prompt chunk size
    # puts step boundaries inside the video.
    return [RequestSpec((c.t(), MediaSpec("video", (c.shapes.evs_grid,), evs=True), c.t()))], c.shapes.long_chunk


def interleaved_modalities(c: PresetContext) -> Specs:
    # Cache misses whose modalities alternate in prompt order, within a request (image,
    # video, image) and across requests (the first's last image, then video, image), in
    # one step, at row counts that differ per modality: an encoder runner that groups by
    # modality and hands the outputs back in grouped order misplaces rows here (vLLM
    # #15605, #32249), and nowhere else (``mixed`` misses are already grouped).
    px = c.shapes.small_px
    specs = [RequestSpec((c.t(), c.image(px), c.t(), c.video(), c.t(), c.image(px), c.t())),
             RequestSpec((c.t(), c.video(), c.t(), c.image(px), c.t()))]
    return specs, -1
