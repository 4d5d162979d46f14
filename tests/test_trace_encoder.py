"""Traces name their encoder (an optional first line ``{"encoder": NAME}``); its family's
arithmetic reads the trace, and a bad name is one error listing the encoders."""

from __future__ import annotations

import pytest
import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.encoders import ENCODERS
from vlmpath.measure.traces import load_trace, parse_trace_bytes

PLAIN = b'{"segments": [{"text": 4}, {"image": [100, 60]}, {"text": 2}]}\n'
REGIONS = b'{"segments": [{"text": 3}, {"regions": [[224, 224], [112, 224]]}]}\n'


def _write(tmp_path, data: bytes):
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    return path


def test_an_unnamed_trace_keeps_the_old_rule():
    assert parse_trace_bytes(PLAIN, "t").encoder == "qwen2_5_vl"
    assert parse_trace_bytes(PLAIN + REGIONS, "t").encoder == "multi_region"


def test_a_named_encoder_is_used(tmp_path):
    named = load_trace(_write(tmp_path, b'{"encoder": "multi_region"}\n' + PLAIN))
    unnamed = load_trace(_write(tmp_path, PLAIN))
    assert named.model == "multi_region" and unnamed.model == "qwen2_5_vl"
    # same family: the same bytes for the same requests
    assert torch.equal(named.requests[0].input_ids, unnamed.requests[0].input_ids)
    assert named.items[0].grid_thw == unnamed.items[0].grid_thw == ((1, 8, 4),)


def test_an_unknown_encoder_is_one_error_listing_the_encoders():
    with pytest.raises(VlmpathError, match=r"t:1: unknown encoder 'minicpm'") as e:
        parse_trace_bytes(b'{"encoder": "minicpm"}\n' + PLAIN, "t")
    assert all(name in str(e.value) for name in ENCODERS)


@pytest.mark.parametrize("data, match", [
    (PLAIN + b'{"encoder": "qwen2_5_vl"}\n', "must be the first line"),
    (b'{"encoder": "qwen2_5_vl", "x": 1}\n' + PLAIN, "alone"),
    (b'{"encoder": 3}\n' + PLAIN, "alone"),
    (b'{"encoder": "qwen2_5_vl"}\n', "holds no requests"),
    (b'{"encoder": "qwen2_5_vl"}\n' + REGIONS, "name 'multi_region'"),
])
def test_bad_encoder_lines(data, match):
    with pytest.raises(VlmpathError, match=match):
        parse_trace_bytes(data, "t")
