"""Every registered encoder satisfies the Encoder protocol (vlmpath.measure.encoders), and
does what the protocol's members promise: rows of out_dim in dtype, one count per item,
the expected count when it is known up front. ``assert_encoder_contract`` is also run on
a toy family outside the registry (tests/test_family_discovery.py)."""

from __future__ import annotations

import pytest
import torch

from vlmpath.measure.encoders import ENCODERS, family_of
from vlmpath.measure.families import EncodeOutput, Encoder, Family
from vlmpath.measure.workload import MediaSpec, RequestSpec, build_requests


def family_items(fam: Family, scale: str = "tiny"):
    """An image and a two-frame video, sized by ``fam``'s own arithmetic."""
    image = fam.grid_for_image(56, 84, scale)
    _, h, w = fam.grid_for_image(112, 56, scale)
    specs = [RequestSpec((3, MediaSpec("image", (image,)), 2, MediaSpec("video", ((2, h, w),))))]
    (req,) = build_requests(specs, vocab_size=100, seed=5, family=fam)
    return req.items


def assert_encoder_contract(enc, items) -> None:
    assert isinstance(enc, Encoder)
    assert isinstance(enc.out_dim, int) and enc.out_dim > 0 and isinstance(enc.dtype, torch.dtype)
    out = enc.encode(items)
    assert isinstance(out, EncodeOutput) and len(out.item_rows) == len(items)
    assert out.embeddings.shape == (sum(out.item_rows), enc.out_dim) and out.embeddings.dtype == enc.dtype
    for it, rows in zip(items, out.item_rows):
        expected = enc.expected_rows(it)
        assert expected is None or expected == rows


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_each_registered_encoder_is_an_encoder(session, name):
    assert_encoder_contract(session.encoder(name, "tiny"), family_items(family_of(name)))


def test_a_class_missing_a_member_is_not_an_encoder():
    class NoCount:  # planted: lacks expected_rows
        out_dim, dtype = 8, torch.float32

        def encode(self, items):
            raise AssertionError("not called")

    class Full(NoCount):
        def expected_rows(self, item):
            return None

    assert not isinstance(NoCount(), Encoder)
    assert isinstance(Full(), Encoder)
