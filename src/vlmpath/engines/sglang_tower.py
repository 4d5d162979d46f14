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
or kernel that stopped it. Every parameter is filled with NaN before loading: one left NaN
was not loaded, an error, not a run (no output comparison with ours: a change to sglang's
tower numerics is what ``--tower engine`` measures).

The golden rows are computed through the same encoder (each item alone), so accuracy says
whether sglang's path, its tower included, places each item's rows where they belong.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from vlmpath.core.errors import EngineError
from vlmpath.engines.adapter_common import swap_tower

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
        try:
            return self.inner(pixels, grid_thw=grid_thw)
        except (ImportError, NotImplementedError, RuntimeError) as exc:  # e.g. a CUDA-only attention kernel
            if isinstance(exc, RuntimeError) and "kernel" not in str(exc) and "CUDA" not in str(exc):
                raise
            raise _refusal("does not run", exc) from exc


def _refusal(what: str, exc: BaseException) -> EngineError:
    return EngineError(f"--tower engine: sglang's Qwen2.5-VL tower {what} on this device "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); use --tower ours")


def _unloaded(inner: torch.nn.Module) -> list[str]:
    """Parameters still holding the NaN they were filled with before loading."""
    return sorted(n for n, p in inner.named_parameters() if torch.isnan(p).any())


def build_sglang_tower(hf_tower: torch.nn.Module) -> SglangTower:
    """sglang's ``Qwen2_5_VisionTransformer`` with ``hf_tower``'s config and weights (inside
    the engine's server state)."""
    try:
        from sglang.srt.models.qwen2_5_vl import Qwen2_5_VisionTransformer, Qwen2_5_VLForConditionalGeneration
    except Exception as exc:  # an import the model file needs that this environment lacks
        raise _refusal("does not import", exc) from exc
    try:
        inner = Qwen2_5_VisionTransformer(hf_tower.config, norm_eps=1e-6, quant_config=None, prefix="visual")
        with torch.no_grad():
            for p in inner.parameters():  # what loading leaves NaN was not loaded
                p.fill_(float("nan"))
        state = {f"visual.{k}": v.detach().clone() for k, v in hf_tower.state_dict().items()}
        Qwen2_5_VLForConditionalGeneration.load_weights(_VisualOnly(inner), state.items())
    except EngineError:
        raise
    except Exception as exc:
        raise _refusal("could not be built or loaded", exc) from exc
    missing = _unloaded(inner)
    if missing:
        raise EngineError(f"--tower engine: sglang's tower did not take our tower's weights: {len(missing)} "
                          f"parameters unloaded (e.g. {missing[:3]})")
    param = next(hf_tower.parameters())
    return SglangTower(inner.to(param.device, param.dtype).eval(), hf_tower.config)


def engine_tower(encoder):
    """A copy of ``encoder`` whose tower is sglang's; encoders without our Qwen2.5-VL tower
    are refused, naming it."""
    return swap_tower(encoder, "sglang", build_sglang_tower)
