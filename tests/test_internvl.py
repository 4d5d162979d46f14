"""InternVL, the second real family: transformers' InternVLVisionModel plus projector, its
tile arithmetic (448 px tiles, 14 px patches, pixel shuffle 0.5: 256 rows per tile), and
its place outside the default presets and the benchmark suite. Its placement self-test
runs with the other encoders' in tests/test_measure_selftest.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from vlmpath.core.errors import LengthMismatchError, VlmpathError
from vlmpath.measure.encoders import FAMILIES, family_of
from vlmpath.measure.families import is_norm
from vlmpath.measure.families.internvl import TOWERS, InternVLEncoder, build_tower, tile_layout
from vlmpath.measure.presets import PRESETS
from vlmpath.measure.workload import MediaSpec, RequestSpec, build_requests

FAM = FAMILIES["internvl"]


def _items(*grids, seed=3):
    specs = [RequestSpec((2, *(MediaSpec("image", (g,)) for g in grids), 1))]
    return build_requests(specs, 100, seed, family=FAM)[0].items


@pytest.mark.parametrize(("px", "layout", "tiles"), [
    ((448, 448), (1, 1), 1),        # one tile, no thumbnail
    ((448, 896), (2, 1), 3),        # two tiles side by side + thumbnail
    ((1344, 448), (1, 3), 4),       # a tall image: one column of three + thumbnail
    ((2000, 3000), (3, 2), 7),      # capped at 12 tiles: the 3:2 layout that fits
])
def test_full_scale_tile_arithmetic(px, layout, tiles):
    assert tile_layout(*px, 448) == layout
    grid = FAM.grid_for_image(*px, "full")
    assert grid == (tiles, 32, 32) and FAM.tokens_of_grid(grid) == 256 * tiles


def test_full_width_tower_returns_256_rows_per_tile():
    # every full width and the 448 px tile, one block, fp32 (a CPU smoke of the shapes)
    cfg = replace(TOWERS["full"], depth=1, dtype=torch.float32)
    enc = InternVLEncoder(build_tower("full", config=cfg), torch.device("cpu"))
    items = _items(FAM.grid_for_image(448, 448, "full"))
    out = enc.encode(items)
    assert out.item_rows == (256,) == (items[0].span,) and out.embeddings.shape == (256, 3584)
    assert items[0].feature.shape == (1024, 588)


def test_tiny_rows_equal_the_placeholder_spans(session):
    enc = session.encoder("internvl", "tiny")
    items = _items(FAM.grid_for_image(200, 300, "tiny"), FAM.grid_for_image(100, 100, "tiny"))
    out = enc.encode(items)
    assert out.item_rows == tuple(it.span for it in items) == tuple(enc.expected_rows(it) for it in items)
    assert out.item_rows == (16 * 7, 16 * 1) and enc.out_dim == TOWERS["tiny"].out_dim == 256


def test_tower_is_transformers_internvl_with_seeded_weights(session):
    from transformers.models.internvl.modeling_internvl import (
        InternVLMultiModalProjector,
        InternVLVisionModel,
    )

    tower = session.encoder("internvl", "tiny").tower
    assert isinstance(tower.vision, InternVLVisionModel) and isinstance(tower.projector, InternVLMultiModalProjector)
    assert not any(m.training for m in tower.modules())
    norms = {name: m for name, m in tower.named_modules() if is_norm(m)}
    assert "projector.layer_norm" in norms and len(norms) == 2 * TOWERS["tiny"].depth + 1
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in norms.values())
    # layer scale at the config's value: at 0 (the seeded default of 1-D parameters) every
    # block would add nothing to the residual stream
    scales = [p for name, p in tower.named_parameters() if name.endswith(("lambda_1", "lambda_2"))]
    assert len(scales) == 2 * TOWERS["tiny"].depth and all(bool((p == 0.1).all()) for p in scales)
    a = build_tower("tiny", seed=0).state_dict()
    b = build_tower("tiny", seed=1).state_dict()
    assert all(torch.equal(v, tower.state_dict()[k]) for k, v in a.items())
    assert any(not torch.equal(a[k], b[k]) for k in a if a[k].dim() > 1)


def test_grids_that_are_not_tiles_are_refused(session):
    with pytest.raises(VlmpathError, match="fixed tiles of 8 x 8"):
        FAM.check_grid([1, 8, 16], "trace:1", "tiny")
    enc = session.encoder("internvl", "tiny")
    with pytest.raises(LengthMismatchError, match="not tiles of 8 x 8"):
        enc.encode(_items((1, 32, 32)))  # a full-scale tile on the tiny tower
    with pytest.raises(VlmpathError, match="no multi-region items"):
        build_requests([RequestSpec((MediaSpec("image", ((1, 8, 8),), regions=True),))], 100, 0, family=FAM)


def test_internvl_is_not_in_the_default_presets():
    assert family_of("internvl") is FAM
    assert all(family_of(enc).name == "qwen2_5_vl" for enc in (e.encoder for e in PRESETS.values()))


def test_a_trace_naming_internvl_is_measured_end_to_end(tmp_path, session):
    from vlmpath.engines.pipelines import Pipeline
    from vlmpath.measure.catalog import workload_by_name
    from vlmpath.suite.measure import Case, measure_case

    path = tmp_path / "internvl.jsonl"
    path.write_text('{"encoder": "internvl"}\n'
                    '{"segments": [{"text": 5}, {"image": [200, 300]}, {"text": 3}]}\n'
                    '{"segments": [{"text": 2}, {"image_grid": [2, 8, 8]}, {"image": [90, 90]}, {"text": 4}]}\n')
    wl = workload_by_name(f"trace:{path}", "tiny")
    assert wl.model == "internvl" and [it.span for it in wl.items] == [112, 32, 16]
    rec = measure_case(Case(f"trace:{path}", Pipeline()), session, repeat=1, count=False)
    assert rec.error is None and rec.accuracy == 1.0 and rec.items == 3
