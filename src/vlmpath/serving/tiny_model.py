"""How do we get a Qwen2.5-VL checkpoint a real server can load, with no model hub?

``write_tiny_qwen(dir)`` writes a complete, tiny (about 200k parameters) Qwen2.5-VL
checkpoint from a config with seeded random weights: ``config.json``, safetensors weights,
a generation config, a byte-level BPE tokenizer trained offline (``tokenizers``) on a
seeded word list with Qwen's special tokens (a word-level tokenizer breaks
``transformers serve``'s reply parsing), Qwen2.5-VL's chat template, and an image-only
processor class saved beside the model (``processing_vlmpath.py``, loaded with
``--trust-remote-code``): the stock processor insists on a video processor, which needs
torchvision, whose index wheel links against CUDA torch. Same seed, same bytes of weights
and tokenizer, so base and head serve one model.

Videos are sent as frames (one image each), so nothing needs a video processor.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from vlmpath.core.errors import VlmpathError

#: Qwen2.5-VL's special tokens, in Qwen's order (the ids differ: the vocabulary is tiny).
SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)

#: Qwen2.5-VL's chat template (images and videos as placeholders between vision marks).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_PROCESSOR_SOURCE = '''"""An image-only Qwen2.5-VL processor (no video processor: that needs torchvision)."""
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor


class VlmpathImageOnlyProcessor(Qwen2_5_VLProcessor):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.video_token = "<|video_pad|>"
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)
'''

VOCAB = 512
#: Text head_dim 32 (64 / 2 heads): vLLM's CPU attention serves head sizes 32, 64, 80, ...
#: only (head_dim 16 started, then killed the server at its first request).
TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=4096, rms_norm_eps=1e-6)
#: Multimodal RoPE sections (temporal, height, width): they sum to head_dim / 2.
MROPE_SECTION = [4, 6, 6]
VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2, window_size=112, out_hidden_size=64,
              fullatt_block_indexes=[1])
#: Images up to 448 x 448 px pass unresized (the presets' largest at tiny scale).
MIN_PIXELS, MAX_PIXELS = 28 * 28, 448 * 448


#: A low RoPE base and wide query/key weights make attention sharp and position-dependent, so
#: a greedy output changes when image rows move (with transformers' default init a row
#: shift moved the last logits by 0.002 against a 0.18 top-2 margin: invisible).
ROPE_THETA = 10.0
STD_VISION, STD_QK, STD_TEXT = 1.0, 1.0, 0.2


def _seeded_weights(model, tok, seed: int) -> None:
    """Matrices drawn N(0, std) by role (norms and biases keep their init); tokens that do
    not decode to printable ASCII get zero output weights, so a reply is visible text and
    two different replies never collapse into the same replacement characters."""
    import torch

    gen = torch.Generator().manual_seed(seed)  # every parameter drawn here: no global RNG
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                std = (STD_VISION if name.startswith("model.visual") else
                       STD_QK if ("q_proj" in name or "k_proj" in name) else STD_TEXT)
                p.normal_(0.0, std, generator=gen)
            elif "norm" in name or "ln_q" in name:
                p.fill_(1.0)
            else:  # biases
                p.normal_(0.0, 0.1, generator=gen)
        text = [tok.decode([i]) for i in range(len(tok))]
        silent = [i for i, t in enumerate(text) if not (t and t.isascii() and t.isprintable())]
        model.lm_head.weight[silent] = 0.0


def _corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 7))) for _ in range(400)]
    return [" ".join(rng.choice(words) for _ in range(12)) for _ in range(300)] + ["You are a helpful assistant."]


def _tokenizer(out: Path, seed: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   model_max_length=4096)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def write_tiny_qwen(out: str | os.PathLike[str], seed: int = 0) -> Path:
    """Write the tiny checkpoint into ``out`` (created; must be empty or absent); returns it.

    Written into a scratch folder beside ``out`` and renamed, so a half-written
    checkpoint never sits at ``out``."""
    from transformers import (GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                              Qwen2VLImageProcessorPil)

    dest = Path(out)
    if dest.exists() and any(dest.iterdir()):
        raise VlmpathError(f"--out {dest}: not empty; pass a new folder for the tiny checkpoint")
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".tiny-", dir=dest.parent))
    try:
        tok = _tokenizer(scratch, seed)
        ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
        text = dict(TEXT, vocab_size=len(tok), bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                    pad_token_id=ids["<|endoftext|>"],
                    rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA, "mrope_section": list(MROPE_SECTION)})
        cfg = Qwen2_5_VLConfig(text_config=text, vision_config=dict(VISION),
                               image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                               vision_start_token_id=ids["<|vision_start|>"],
                               vision_end_token_id=ids["<|vision_end|>"])
        model = Qwen2_5_VLForConditionalGeneration(cfg).eval()
        _seeded_weights(model, tok, seed)
        model.generation_config = GenerationConfig(do_sample=False, eos_token_id=ids["<|im_end|>"],
                                                   pad_token_id=ids["<|endoftext|>"],
                                                   bos_token_id=ids["<|endoftext|>"])
        model.save_pretrained(scratch)
        improc = Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=14,
                                          merge_size=2, temporal_patch_size=2)
        improc.save_pretrained(scratch)
        (scratch / "processing_vlmpath.py").write_text(_PROCESSOR_SOURCE, encoding="utf-8")
        (scratch / "processor_config.json").write_text(json.dumps({
            "processor_class": "VlmpathImageOnlyProcessor",
            "auto_map": {"AutoProcessor": "processing_vlmpath.VlmpathImageOnlyProcessor"},
        }, indent=2), encoding="utf-8")
        (scratch / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
        if dest.exists():
            dest.rmdir()
        os.replace(scratch, dest)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return dest
