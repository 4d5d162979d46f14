"""How many questions of a small labelled image set does a served model answer right?

``load_labelled(FILE.jsonl)`` reads one ``{"image": path, "question": ..., "answer": ...}``
object per line (blank lines skipped), bounded: the file at most ``MAX_FILE_BYTES`` and
``MAX_ITEMS`` items, texts capped, each image a path inside the file's own directory (after
symlinks: ``..`` or a link out is refused), at most ``MAX_IMAGE_BYTES`` and
``MAX_IMAGE_PIXELS``, decoded here (PIL, the size checked before the pixels are read) and
sent re-encoded as PNG. Anything else is one ``VlmpathError`` naming the file and line.

``ask_labelled(server, items)`` asks every question alone (concurrency 1), greedily
(temperature 0, at most ``max_tokens``, the server may stop early: an answer is short), and
returns the run document's ``labelled`` part: the set's name, the answers and the outputs.
The score is not taken from that part: ``score`` recomputes it from the outputs and answers
(exact match after ``normalise``), so a file cannot claim a score its outputs do not give.
"""

from __future__ import annotations

import base64
import io
import json
import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError

MAX_FILE_BYTES = 1 << 20
MAX_ITEMS = 500
MAX_QUESTION = 4000
MAX_ANSWER = 1000
MAX_IMAGE_BYTES = 8 << 20
MAX_IMAGE_PIXELS = 4096 * 4096
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.:-]")
_SPACE = re.compile(r"\s+")
_EDGE = string.punctuation + string.whitespace


@dataclass(frozen=True)
class LabelledItem:
    line: int
    image_url: str
    question: str
    answer: str


def normalise(text: str) -> str:
    """NFKC, lower case, inner whitespace runs to one space, whitespace and ASCII punctuation
    stripped at both ends ("The cat." and "the  cat" match; "cats" and "cat" do not)."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip(_EDGE)


def set_name(path: str | Path) -> str:
    """The row's ``set`` parameter: the file's stem in safe characters (at most 64)."""
    return (_NAME_BAD.sub("_", Path(path).stem) or "labelled")[:64]


def _image_url(root: Path, value: object, where: str) -> str:
    from PIL import Image

    if not isinstance(value, str) or not value or len(value) > 1000:
        raise VlmpathError(f"{where}: \"image\" is not a path (a text of at most 1000 characters)")
    path = (root / value).resolve()
    if not path.is_relative_to(root):
        raise VlmpathError(f"{where}: image {value[:100]!r} is outside the file's directory {str(root)!r}; "
                           "keep the images beside the JSONL file")
    if not path.is_file():
        raise VlmpathError(f"{where}: image {value[:100]!r} is not a file")
    if path.stat().st_size > MAX_IMAGE_BYTES:
        raise VlmpathError(f"{where}: image {value[:100]!r} is larger than {MAX_IMAGE_BYTES} bytes")
    try:
        with Image.open(path) as img:
            w, h = img.size  # from the header: checked before any pixel is decoded
            if w * h > MAX_IMAGE_PIXELS:
                raise VlmpathError(f"{where}: image {value[:100]!r} is {w}x{h}, over {MAX_IMAGE_PIXELS} pixels")
            rgb = img.convert("RGB")
    except VlmpathError:
        raise
    except Exception as exc:  # noqa: BLE001 - PIL raises many kinds for a broken file
        raise VlmpathError(f"{where}: image {value[:100]!r} does not decode ({exc.__class__.__name__})") from None
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _text(obj: dict, key: str, cap: int, where: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or len(v) > cap:
        raise VlmpathError(f"{where}: {key!r} is not a text of at most {cap} characters")
    return v


def load_labelled(path: str | Path) -> tuple[LabelledItem, ...]:
    """The labelled set of ``path`` (module doc)."""
    from vlmpath.core.safe_json import read_capped

    p = Path(path)
    raw = read_capped(p, "--labelled", MAX_FILE_BYTES)
    root = p.resolve().parent
    items = []
    for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"--labelled {str(p)!r} line {n}"
        if len(items) == MAX_ITEMS:
            raise VlmpathError(f"{where}: more than {MAX_ITEMS} items; keep the set small")
        try:
            obj = json.loads(line)
        except ValueError:
            raise VlmpathError(f"{where}: not a JSON object; write one {{\"image\", \"question\", "
                               "\"answer\"}} per line") from None
        if not isinstance(obj, dict):
            raise VlmpathError(f"{where}: not a JSON object with \"image\", \"question\" and \"answer\"")
        question, answer = _text(obj, "question", MAX_QUESTION, where), _text(obj, "answer", MAX_ANSWER, where)
        items.append(LabelledItem(n, _image_url(root, obj.get("image"), where), question, answer))
    if not items:
        raise VlmpathError(f"--labelled {str(p)!r}: no items; write one {{\"image\", \"question\", \"answer\"}} per line")
    return tuple(items)


def _body(item: LabelledItem, model: str | None, max_tokens: int) -> dict:
    content = [{"type": "image_url", "image_url": {"url": item.image_url}}, {"type": "text", "text": item.question}]
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0,
            "stream": True}
    return {**body, "model": model} if model else body


def ask_labelled(server, items: Sequence[LabelledItem], name: str, *, max_tokens: int = 32,
                 timeout_s: float = 60.0) -> dict:
    """Every question asked alone, greedily; the run document's ``labelled`` part."""
    from vlmpath.serving.client import Outcome, stream_chat

    outcomes = []
    for item in items:
        code = server.exited()
        outcomes.append(Outcome(error=f"server exited with code {code}")
                        if code is not None else stream_chat(server.url, _body(item, server.model, max_tokens),
                                                             timeout_s))
    errors = [o.error for o in outcomes if not o.ok]
    return {"set": name, "answers": [i.answer for i in items], "outputs": [o.text if o.ok else None for o in outcomes],
            "errors": len(errors), "error": errors[0][:400] if errors else None}


def score(part: dict) -> tuple[int, int]:
    """(correct, items) of a checked ``labelled`` part: outputs equal to answers after ``normalise``."""
    pairs = list(zip(part["outputs"], part["answers"]))
    return sum(o is not None and normalise(o) == normalise(a) for o, a in pairs), len(pairs)
