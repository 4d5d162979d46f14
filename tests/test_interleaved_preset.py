"""Does ``interleaved_modalities`` hold what a grouped-order runner gets wrong, and does the
reference place it right?

The preset's one step holds cache misses whose modalities alternate in prompt order, within
one request (image, video, image) and across requests (the first's last image, then video,
image), at row counts that differ per modality, so grouped order cannot equal prompt order
by accident. Every one of the reference's encode strategies places every row (1.00).
"""

from __future__ import annotations

from vlmpath.measure.workload import preset
from vlmpath.paths.registry import ENCODE_STRATEGIES
from vlmpath.suite.engine_run import measure_cases
from vlmpath.suite.measure import plan_cases


def test_the_misses_alternate_modalities_within_and_across_requests_at_different_row_counts():
    wl = preset("interleaved_modalities")
    assert len(wl.steps) == 1 and len({e.rid for e in wl.steps[0].entries}) == 2
    order = [[it.modality for it in sorted(r.items, key=lambda x: x.offsets[0][0])] for r in wl.requests]
    assert order == [["image", "video", "image"], ["video", "image"]]
    assert len({it.hash for it in wl.items}) == len(wl.items)  # all misses
    rows = {m: {it.span for it in wl.items if it.modality == m} for m in ("image", "video")}
    assert rows["image"].isdisjoint(rows["video"]), rows


def test_the_references_own_strategies_place_every_row():
    strategies = ENCODE_STRATEGIES.default_names()
    recs = measure_cases(plan_cases(workloads=["interleaved_modalities"], encode=strategies), "reference",
                         repeat=1, count=False)
    assert len(recs) == len(strategies) >= 2
    for r in recs:
        assert r.error is None and r.accuracy == 1.0 and r.placed == r.items == 5, (r.pipeline, r.error)
