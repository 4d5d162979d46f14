"""Encoders: the real transformers tower, seeded weights, and the row counts per item."""

from __future__ import annotations

import pytest
import torch

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.measure.encoders import ENCODERS
from vlmpath.measure.families.qwen2_5_vl import REGION_TOKENS, TOWERS, build_vision_tower
from vlmpath.measure.fidelity import TOLERANCES, relative_error
from vlmpath.measure.workload import (
    MediaSpec,
    RequestSpec,
    build_requests,
)


def _items(*media: MediaSpec, seed: int = 5):
    (req,) = build_requests([RequestSpec((3, *media, 2))], vocab_size=100, seed=seed)
    return req.items


def test_tower_is_transformers_qwen2_5_vl_in_eval_mode(session):
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VisionTransformerPretrainedModel,
    )

    tower = session.encoder("qwen2_5_vl", "tiny").tower
    assert isinstance(tower, Qwen2_5_VisionTransformerPretrainedModel)
    assert not any(m.training for m in tower.modules())
    cfg = TOWERS["tiny"]
    assert tower.config.depth == cfg.depth and tower.config.out_hidden_size == cfg.out_hidden_size
    assert next(tower.parameters()).dtype == torch.float32


def test_tower_weights_are_seeded(session):
    a = session.encoder("qwen2_5_vl", "tiny").tower.state_dict()  # built with seed 0
    b = build_vision_tower("tiny", "cpu", seed=0).state_dict()
    c = build_vision_tower("tiny", "cpu", seed=1).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    matrices = [k for k in a if a[k].dim() > 1]
    assert matrices and all(not torch.equal(a[k], c[k]) for k in matrices)


def test_unknown_scale_and_encoder():
    # A scale is refused where it is parsed (the CLI, VLMPATH_SCALE): the tower takes a Scale.
    with pytest.raises(VlmpathError, match="tiny, full"):
        Scale.parse("huge")
    with pytest.raises(UnknownNameError, match=", ".join(sorted(ENCODERS))):
        ENCODERS["minicpm"]


def test_qwen_rows_are_thw_over_four(session):
    enc = session.encoder("qwen2_5_vl", "tiny")
    items = _items(MediaSpec("image", ((1, 4, 6),)), 2, MediaSpec("video", ((2, 8, 4),)),
                   MediaSpec("image", ((1, 8, 8),)))
    out = enc.encode(items)
    assert out.item_rows == (6, 16, 16)
    assert tuple(enc.expected_rows(it) for it in items) == (6, 16, 16)
    assert tuple(it.span for it in items) == out.item_rows  # the processor counted the same
    assert out.embeddings.shape == (38, enc.out_dim)
    assert bool(torch.isfinite(out.embeddings).all())
    assert bool((out.embeddings.abs().sum(dim=1) > 0).all())  # rows carry content (issue 10)
    # Attention never crosses items: each item's rows match encoding it alone, within the
    # fp32 tolerance (a batched call tiles its matmuls differently; a row attending to
    # another item would be ~1.0 away).
    alone = [enc.encode([it]).embeddings for it in items]
    for got, want in zip(torch.split(out.embeddings, list(out.item_rows)), alone):
        assert relative_error(got, want) <= TOLERANCES[torch.float32]


def test_encode_needs_items(session):
    for name in ("qwen2_5_vl", "multi_region", "evs"):
        with pytest.raises(VlmpathError, match="at least one item"):
            session.encoder(name, "tiny").encode([])


@pytest.mark.parametrize("n", [1, 3])
def test_multi_region_rows_are_64_per_region(session, n):
    enc = session.encoder("multi_region", "tiny")
    grids = tuple([(1, 16, 16)] + [(1, 8, 8)] * (n - 1))
    (item,) = _items(MediaSpec("image", grids, regions=True))
    out = enc.encode([item])
    assert out.item_rows == (n * REGION_TOKENS,) and out.embeddings.shape[0] == n * REGION_TOKENS
    assert enc.expected_rows(item) == item.span == n * REGION_TOKENS
    # The trap #25910 fell into: the first placeholder span is one region only.
    assert item.first_span == REGION_TOKENS


def test_evs_keeps_frame_zero_and_prunes_by_data(session):
    enc = session.encoder("evs", "tiny")
    qwen = session.encoder("qwen2_5_vl", "tiny")
    (video,) = _items(MediaSpec("video", ((4, 8, 8),)))
    per_frame = 8 * 8 // 4
    out = enc.encode([video])
    (frames,) = out.frame_rows
    assert len(frames) == 4 and frames[0] == per_frame
    assert sum(frames) == out.item_rows[0] == out.embeddings.shape[0]
    assert sum(frames[1:]) == round(0.5 * 3 * per_frame)  # the keep share of later frames
    assert len(set(frames[1:])) > 1  # data-dependent: the frames keep different counts
    assert enc.expected_rows(video) is None  # not known in advance
    full = qwen.encode([video]).embeddings
    assert torch.equal(out.embeddings[:per_frame], full[:per_frame])  # frame 0 whole
    # Kept rows are rows of the unpruned output (pruning selects, never changes, rows).
    later = full[per_frame:]
    for row in out.embeddings[per_frame:]:
        assert bool((later == row).all(dim=1).any())
    # A single-frame item is not pruned.
    (image,) = _items(MediaSpec("image", ((1, 4, 4),)))
    assert enc.encode([image]).frame_rows == ((4,),)


def test_grid_thw_is_host_bookkeeping_on_cpu_and_device_resident_on_a_gpu():
    # transformers' tower multiplies position ids built from grid_thw with device
    # frequencies, so on a GPU the grid must live there; on a CPU run it stands for the
    # engine's host bookkeeping and must not be counted as syncs.
    from vlmpath.measure.families.qwen2_5_vl import _grid_tensor
    from vlmpath.measure.syncs import is_host
    from vlmpath.measure.workload import preset

    items = preset("many_small_images").items[:2]
    cpu = _grid_tensor(items, torch.device("cpu"))
    assert cpu.tolist() == [list(g) for it in items for g in it.grid_thw] and is_host(cpu)
    dev = _grid_tensor(items, torch.device("meta"))  # any non-CPU device takes this branch
    assert dev.device.type == "meta" and not is_host(dev)
