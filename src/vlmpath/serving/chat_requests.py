"""What does a preset look like as OpenAI-compatible chat requests with images?

``chat_requests(preset)`` turns each request of a seeded preset (``measure.workload``) into
one user message: its text spans as words (one word per text token id, from a fixed word
list) and its items as PNG images at the preset's sizes (a grid of ``t x h x w`` patches is
an image of ``14h x 14w`` pixels, so the served processor makes the same grid and the same
placeholder count). A video is sent as its ``t`` frames, one image each (frames as images:
no video processor on the server, the same tokens); a multi-region item is one image per
region. Pixels are seeded by the item's content hash, so equal content (``cache_reuse``)
is equal images. Same preset, scale and seed: the same bytes.
"""

from __future__ import annotations

import base64
import io
import random
from dataclasses import dataclass

from vlmpath.measure.items import Item, Request
from vlmpath.measure.workload import preset

PATCH_PX = 14
_WORDS = tuple("".join(random.Random(k).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1 + k % 5))
               for k in range(512))


@dataclass(frozen=True)
class ChatRequest:
    """One chat request of a preset: ``content`` is the user message's parts."""

    workload: str
    rid: int
    content: tuple[dict, ...]
    images: int

    def body(self, *, model: str | None, max_tokens: int, stream: bool, extra: dict) -> dict:
        out = {"messages": [{"role": "user", "content": list(self.content)}],
               "max_tokens": max_tokens, "temperature": 0, "stream": stream, **extra}
        if model:
            out["model"] = model
        return out


def _png_url(h_px: int, w_px: int, seed: int) -> str:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 256, (h_px, w_px, 3), dtype=np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _item_images(item: Item) -> list[str]:
    seed = item.hash & ((1 << 63) - 1)
    urls = []
    for g, (t, h, w) in enumerate(item.grid_thw):
        frames = t if item.modality == "video" else 1
        urls += [_png_url(h * PATCH_PX, w * PATCH_PX, seed + 1009 * g + f) for f in range(frames)]
    return urls


def _text(ids) -> str:
    return " ".join(_WORDS[int(i) % len(_WORDS)] for i in ids)


def request_parts(req: Request) -> tuple[tuple[dict, ...], int]:
    """The message parts of one preset request, in token order, and its image count."""
    parts: list[dict] = []
    images = 0
    pos = 0
    ids = req.input_ids
    for item in sorted(req.items, key=lambda it: it.offsets[0][0]):
        start, end = item.offsets[0][0], item.offsets[-1][1]
        if start > pos:
            parts.append({"type": "text", "text": _text(ids[pos:start])})
        urls = _item_images(item)
        parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
        images += len(urls)
        pos = end + 1
    if pos < len(ids):
        parts.append({"type": "text", "text": _text(ids[pos:])})
    if not parts:
        parts.append({"type": "text", "text": "hello"})
    return tuple(parts), images


def chat_requests(name: str, scale: str = "tiny", seed: int = 0) -> tuple[ChatRequest, ...]:
    """The preset ``name``'s requests as chat requests (``UnknownNameError`` for a bad name)."""
    wl = preset(name, scale, seed)
    out = []
    for req in wl.requests:
        parts, images = request_parts(req)
        out.append(ChatRequest(name, req.rid, parts, images))
    return tuple(out)
