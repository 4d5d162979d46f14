"""Which mistakes can be planted in vLLM's own multimodal code, and how does a server get them?

A plant is one edit of the installed vLLM's text, anchored on a line that must be there
exactly once (else one line naming the file and the release: the plant no longer fits),
served through an overlay (``serving.overlay``) so every server process runs it. The
mistakes a base/head pair exists to catch, in the code vLLM serves with (not transformers'):

- ``shift``: the merge (``model_executor/models/utils.py``, ``_merge_multimodal_embeddings``)
  writes the first image's rows shifted by one row (``torch.roll``): a misplaced-row bug;
- ``split``: the model runner (``v1/worker/gpu_model_runner.py``, ``_execute_mm_encoder``,
  which the CPU runner inherits) re-splits a batch's encoder rows by the items' placeholder
  counts in another order (sorted) instead of the rows the encoder returned per item: the
  shape of sglang #25910 (rows land on the wrong item whenever one encoder batch holds
  items of different sizes);
- ``delay:S``: the same runner sleeps S seconds before each encoder batch: a slowdown in
  the encoder path of known size.

``plant_overlay(python, spec, out)`` builds the overlay of a plant for the vLLM installed
in ``python``'s env.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.serving.launch import delay_seconds
from vlmpath.serving.overlay import build_overlay, installed_package

MERGE = "model_executor/models/utils.py"
RUNNER = "v1/worker/gpu_model_runner.py"


@dataclass(frozen=True)
class Edit:
    path: str       # relative to the vllm package
    anchor: str     # a line (stripped of indentation) that must occur exactly once
    lines: tuple[str, ...]  # inserted after the anchor, at its indentation


def edits(spec: str) -> tuple[Edit, ...]:
    """The edits of plant ``spec`` (``shift``, ``split``, ``delay:S``); else one line naming it."""
    if spec == "shift":
        return (Edit(MERGE, "mm_embeds_flat = _flatten_embeddings(multimodal_embeddings)", (
            "# VLMPATH PLANT shift: the first item's rows shifted by one row",
            "_n0 = int(multimodal_embeddings[0].shape[0])",
            "mm_embeds_flat = torch.cat([torch.roll(mm_embeds_flat[:_n0], 1, 0), mm_embeds_flat[_n0:]])",
        )),)
    if spec == "split":
        return (Edit(RUNNER, "# Cache the encoder outputs by mm_hash", (
            "# VLMPATH PLANT split: the batch's rows re-split by placeholder counts, in another order",
            "_counts = sorted(int(o.shape[0]) for o in encoder_outputs)",
            "if encoder_outputs:",
            "    encoder_outputs = list(torch.cat(list(encoder_outputs)).split(_counts))",
        )),)
    s = delay_seconds(spec)  # one reading of delay:S for every plant site
    if s is not None:
        return (Edit(RUNNER, "encoder_outputs: list[torch.Tensor] = []", (
            f"# VLMPATH PLANT delay: {s:g} s before each encoder batch",
            f"__import__('time').sleep({s!r})",
        )),)
    raise VlmpathError(f"--plant {spec!r} (vLLM): use shift (the merge writes one image's rows shifted), "
                       "split (encoder rows re-split by placeholder counts, #25910's shape) or delay:S "
                       "(S seconds, 0-60, before each encoder batch)")


def apply(text: str, edit: Edit, where: str) -> str:
    """``text`` with ``edit``'s lines inserted after its anchor (exactly one match)."""
    lines = text.splitlines(keepends=True)
    hits = [i for i, ln in enumerate(lines) if ln.strip() == edit.anchor]
    if len(hits) != 1:
        raise VlmpathError(f"vLLM plant: {where} has the line {edit.anchor!r} {len(hits)} times, not once: "
                           "this release's code moved; update vlmpath.serving.engine_plants")
    i = hits[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    return "".join(lines[: i + 1] + [f"{indent}{ln}\n" for ln in edit.lines] + lines[i + 1:])


def planted_files(package_dir: Path, spec: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in edits(spec):
        text = out.get(e.path) or (package_dir / e.path).read_text(encoding="utf-8")
        out[e.path] = apply(text, e, str(package_dir / e.path))
    return out


def plant_overlay(python: str, spec: str, out: str | Path) -> Path:
    """The overlay folder (at ``out``) serving plant ``spec`` over ``python``'s installed vLLM."""
    edits(spec)  # refused before anything is looked up
    pkg = installed_package(python, "vllm")
    return build_overlay(pkg, planted_files(pkg, spec), out)
