"""How does sglang's own Qwen2.5-VL vision tower stand in for ours (``--tower engine``)?

So that a pull request to sglang's tower (``sglang/srt/models/qwen2_5_vl.py``: window
indexing, rotary tables, ``cu_seqlens``, the vision attention backends, the merger) is
measured too, as ``vllm_tower`` does for vLLM. ``engine_tower(encoder)`` returns a copy of
one of our Qwen2.5-VL encoders whose tower is the release's ``Qwen2_5_VisionTransformer``,
built from the same (transformers) vision config and loaded with the same seeded (or real)
weights through sglang's own weight loading: ``Qwen2_5_VLForConditionalGeneration.load_weights``
(its HF-to-sglang name mapping: ``attn.qkv`` -> ``qkv_proj``, stacked ``gate_up_proj``)
called on a module holding only ``visual``, with ``encoder_only`` set as sglang's
encoder-only servers set it (language weights skipped).

It is built and run inside the engine's TP=1 server state (``sglang_server_state``): its
parallel linear layers ask for the TP group, its vision attention for the server args'
backend. A tower that does not build or run on this device is refused naming the import
or kernel that stopped it. After loading, one probe image goes through both towers: rows
that differ beyond float tolerance mean the weights did not land, an error, not a run.

The golden rows are computed through the same encoder (each item alone), so accuracy says
whether sglang's path, its tower included, places each item's rows where they belong.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch

from vlmpath.core.errors import EngineError

TOWER_SEAM = "sglang.srt.models.qwen2_5_vl.Qwen2_5_VisionTransformer"


class _VisualOnly(torch.nn.Module):
    """What ``Qwen2_5_VLForConditionalGeneration.load_weights`` reads: ``visual`` and a config."""

    def __init__(self, visual: torch.nn.Module):
        super().__init__()
        self.visual = visual
        self.config = SimpleNamespace(tie_word_embeddings=False, encoder_only=True, language_only=False)


class SglangTower(torch.nn.Module):
    """sglang's tower behind transformers' calling convention (``tower(pixels, grid_thw)``)."""

    def __init__(self, inner: torch.nn.Module, config):
        super().__init__()
        self.inner, self.config = inner, config

    def forward(self, pixels: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        return self.inner(pixels, grid_thw=grid_thw)


def _refusal(what: str, exc: BaseException) -> EngineError:
    return EngineError(f"--tower engine: sglang's Qwen2.5-VL tower {what} on this device "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); use --tower ours")


def _probe(hf_tower, tower: SglangTower) -> None:
    """One small image through both towers: the weights landed, or an error."""
    cfg = hf_tower.config
    side = 2 * cfg.spatial_merge_size
    grid = torch.tensor([[1, side, side]])
    param = next(hf_tower.parameters())
    dim = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size ** 2
    pixels = torch.randn(side * side, dim, generator=torch.Generator().manual_seed(0)).to(param.device, param.dtype)
    with torch.no_grad():
        ours = hf_tower(pixels, grid_thw=grid)
        ours = getattr(ours, "pooler_output", ours)
        ours = ours[0] if isinstance(ours, tuple) else ours
        theirs = tower(pixels, grid)
    tol = 1e-3 if param.dtype == torch.float32 else 5e-2
    err = (ours.float() - theirs.float()).abs().max().item() if ours.shape == theirs.shape else float("inf")
    if not err <= tol * max(1.0, ours.float().abs().max().item()):
        raise EngineError(f"--tower engine: sglang's tower did not take our tower's weights (probe image: max "
                          f"abs error {err:.3g}, shapes {tuple(ours.shape)} vs {tuple(theirs.shape)})")


def build_sglang_tower(hf_tower: torch.nn.Module) -> SglangTower:
    """sglang's ``Qwen2_5_VisionTransformer`` with ``hf_tower``'s config and weights (inside
    the engine's server state)."""
    try:
        from sglang.srt.models.qwen2_5_vl import Qwen2_5_VisionTransformer, Qwen2_5_VLForConditionalGeneration
    except Exception as exc:  # an import the model file needs that this environment lacks
        raise _refusal("does not import", exc) from exc
    try:
        inner = Qwen2_5_VisionTransformer(hf_tower.config, norm_eps=1e-6, quant_config=None, prefix="visual")
        state = {f"visual.{k}": v.detach().clone() for k, v in hf_tower.state_dict().items()}
        Qwen2_5_VLForConditionalGeneration.load_weights(_VisualOnly(inner), state.items())
    except EngineError:
        raise
    except Exception as exc:
        raise _refusal("could not be built or loaded", exc) from exc
    param = next(hf_tower.parameters())
    tower = SglangTower(inner.to(param.device, param.dtype).eval(), hf_tower.config)
    try:
        _probe(hf_tower, tower)
    except EngineError:
        raise
    except Exception as exc:  # e.g. a CUDA-only attention kernel
        raise _refusal("does not run", exc) from exc
    return tower


def engine_tower(encoder):
    """A copy of ``encoder`` whose tower is sglang's; encoders without our Qwen2.5-VL tower
    are refused, naming it."""
    tower = getattr(encoder, "tower", None)
    if tower is None or type(tower).__name__ != "Qwen2_5_VisionTransformerPretrainedModel":
        raise EngineError(f"--tower engine: encoder {getattr(encoder, 'name', '?')!r} has no Qwen2.5-VL tower "
                          "for sglang's to replace (use --tower ours)")
    swapped = copy.copy(encoder)  # the session's encoder stays ours
    swapped.tower = build_sglang_tower(tower)
    return swapped
