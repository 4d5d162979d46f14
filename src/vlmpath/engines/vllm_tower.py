"""How does vLLM's own Qwen2.5-VL vision tower stand in for ours (``--tower engine``)?

So that a pull request to vLLM's tower (``vllm/model_executor/models/qwen2_5_vl.py``:
window indexing, rotary tables, the attention's sequence splits, the merger) is measured
too. ``engine_tower(encoder)`` returns a copy of one of our Qwen2.5-VL encoders
(``qwen2_5_vl``, ``multi_region``, ``evs``: everything but the tower stays ours) whose
tower is the release's ``Qwen2_5_VisionTransformer``, built from the same config and
loaded with the same seeded (or real) weights through vLLM's own ``load_weights`` (its
HF-to-vLLM name mapping: fused ``qkv``, stacked ``gate_up_proj``), then each linear layer's
``process_weights_after_loading`` as vLLM's model loader runs it. On a CPU it is built as
vLLM runs it there: ``custom_ops=["none"]`` (the native PyTorch ops), the SDPA attention the
CPU platform selects, and a one-process gloo "tensor-parallel" group (vLLM's parallel
linear layers ask for it).

The golden rows are computed through the same encoder (each item alone), so accuracy says
whether vLLM's path, its tower included, places each item's rows where they belong;
measured on 0.33.0 the vLLM tower's output equals transformers' within 4e-6 (fp32, tiny).
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path

import torch

from vlmpath.core.errors import EngineError
from vlmpath.engines.adapter_common import swap_tower

TOWER_SEAM = "vllm.model_executor.models.qwen2_5_vl.Qwen2_5_VisionTransformer"


def _vllm_config():
    from vllm.config import CompilationConfig, VllmConfig

    return VllmConfig(compilation_config=CompilationConfig(custom_ops=["none"]))


def _ensure_parallel_state() -> None:
    """vLLM's parallel layers need a (here: one-process) tensor-parallel group; made once."""
    from vllm.distributed import parallel_state as ps

    if ps.model_parallel_is_initialized():
        return
    if not torch.distributed.is_initialized():
        # A file rendezvous: no port to collide with another measuring process.
        init = Path(tempfile.mkdtemp(prefix="vlmpath-vllm-dist-")) / "rendezvous"
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                        distributed_init_method=f"file://{init}", backend="gloo")
    ps.initialize_model_parallel(1, 1)


class VllmTower(torch.nn.Module):
    """vLLM's tower behind transformers' calling convention (``tower(pixels, grid_thw)``):
    what our encoders call. ``config`` is transformers' (our encoders read its sizes)."""

    def __init__(self, inner: torch.nn.Module, config, vllm_config):
        super().__init__()
        self.inner, self.config, self._vllm_config = inner, config, vllm_config

    def forward(self, pixels: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        from vllm.config import set_current_vllm_config

        # The grid is host bookkeeping (marked host on a CPU run, as vLLM keeps it): a list.
        with set_current_vllm_config(self._vllm_config):
            return self.inner(pixels, grid_thw=grid_thw.tolist())


def build_vllm_tower(hf_tower: torch.nn.Module) -> VllmTower:
    """vLLM's ``Qwen2_5_VisionTransformer`` with ``hf_tower``'s config and weights."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VisionTransformer

    cfg = _vllm_config()
    params = inspect.signature(Qwen2_5_VisionTransformer.__init__).parameters
    with set_current_vllm_config(cfg):
        _ensure_parallel_state()
        kw = {"norm_eps": 1e-6, "prefix": "visual"}
        inner = Qwen2_5_VisionTransformer(hf_tower.config, **{k: v for k, v in kw.items() if k in params})
        state = {k: v.detach().clone() for k, v in hf_tower.state_dict().items()}
        loaded = inner.load_weights(state.items())
        wanted = {n for n, _ in inner.named_parameters()}
        if not wanted <= set(loaded):
            missing = sorted(wanted - set(loaded))
            raise EngineError(f"vLLM's tower did not take our tower's weights: {len(missing)} parameters "
                              f"unloaded (e.g. {missing[:3]})")
        for m in inner.modules():  # what vLLM's model loader runs after loading (CPU gemm set-up)
            method = getattr(m, "quant_method", None)
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(m)
    param = next(hf_tower.parameters())
    return VllmTower(inner.to(param.device, param.dtype).eval(), hf_tower.config, cfg)


def engine_tower(encoder):
    """A copy of ``encoder`` whose tower is vLLM's; encoders without our Qwen2.5-VL tower
    (another family) are refused, naming it."""
    return swap_tower(encoder, "vLLM", build_vllm_tower)
