"""Is the tiny Qwen2.5-VL checkpoint complete, offline, seeded, and the kind a server can parse?

Written once into a temporary folder (no hub): the processor loads with trust_remote_code
and has no video processor (none needs torchvision), the tokenizer is byte-level (any text
round-trips, unlike a word-level one) with Qwen's special tokens at the ids the config
names, the chat template puts one image placeholder run per image, the same seed writes the
same weights and tokenizer, and a folder that is not empty is refused in one line.
"""

from __future__ import annotations

import json

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.serving.tiny_model import SPECIAL_TOKENS, write_tiny_qwen


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_qwen(tmp_path_factory.mktemp("tiny") / "m")


def test_the_processor_is_image_only_and_the_tokenizer_byte_level(tiny):
    from PIL import Image
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(tiny, trust_remote_code=True)
    assert getattr(proc, "video_processor", None) is None
    tok = proc.tokenizer
    text = "Grüße, 画像 #42 {ok}"
    assert tok.decode(tok(text)["input_ids"]) == text
    cfg = json.loads((tiny / "config.json").read_text())
    assert cfg["image_token_id"] == tok.convert_tokens_to_ids("<|image_pad|>")
    assert all(tok.convert_tokens_to_ids(t) != tok.unk_token_id for t in SPECIAL_TOKENS)
    img = Image.new("RGB", (112, 112))
    msgs = [{"role": "user", "content": [{"type": "image", "image": img}, {"type": "text", "text": "hi"}]}]
    inp = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)
    ids = list(inp["input_ids"][0])
    assert ids.count(cfg["image_token_id"]) == 16  # 8 x 8 patches, 2 x 2 merged
    assert tuple(inp["image_grid_thw"][0]) == (1, 8, 8)


def test_the_same_seed_writes_the_same_checkpoint_and_a_full_folder_is_refused(tiny, tmp_path):
    again = write_tiny_qwen(tmp_path / "again")
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (again / name).read_bytes() == (tiny / name).read_bytes(), name
    with pytest.raises(VlmpathError, match="not empty"):
        write_tiny_qwen(again)
