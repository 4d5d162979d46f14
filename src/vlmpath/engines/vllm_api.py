"""Which parts of vLLM's multimodal embedding path does this installed release have?

``VllmApi.load()`` imports the release in this process (after the torchvision shim, see
``torchvision_shim``; on a machine without a GPU with vLLM's CPU platform) and finds every
seam the adapter drives *by inspection* (which modules, classes, methods and source lines
exist), never by version string; ``seams_for(runner)`` gives the seams of the path through one
of its model runners (written into every record as ``engine_seams``):

- ``encoder``: ``v2_encoder_runner`` (``vllm/v1/worker/gpu/mm/encoder_runner.py``
  ``EncoderRunner``: prepare, execute, gather, merge; from 0.15) or
  ``v1_gpu_model_runner`` (``GPUModelRunner._execute_mm_encoder`` and
  ``_gather_mm_embeddings``; see ``vllm_runners``): the runner the engine drives
  (``vllm_runner_choice``; ``runners`` says which this release has);
- ``schedule``: ``scheduler._try_schedule_encoder_inputs`` with the real
  ``EncoderCacheManager`` (which items a step encodes, which the cache already holds);
- ``prepare``: ``skips_cached`` (``prepare_mm_inputs`` drops a hash already encoded) or
  ``trusts_scheduler``;
- ``gather``: ``feature_window`` (``get_mm_features_in_window``) or ``linear``;
- ``mask``: ``host`` when the gather builds ``is_mm_embed`` with ``device="cpu"`` (v2; 0.33's
  v1 too), ``device`` when it copies a host buffer to the device first (0.11-0.14's v1
  ``copy_to_gpu``);
- ``merge``: ``index_put`` (``inputs_embeds[is_multimodal] = rows``, #34246) or
  ``masked_scatter_`` (#22105), read from ``_merge_multimodal_embeddings``' source;
- ``platform``: how the CPU platform was obtained (``VLLM_TARGET_DEVICE`` or set by hand).

A release with neither runner raises one ``EngineError`` naming every missing piece.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field

from vlmpath.core.errors import EngineError, VlmpathError


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cpu_platform() -> str:
    """Make vLLM run on its CPU platform when torch has no GPU; returns how."""
    import torch

    if torch.cuda.is_available():
        return "detected"
    import vllm.platforms as platforms

    current = platforms.current_platform  # resolved lazily on first access
    if type(current).__name__ == "CpuPlatform":
        return "VLLM_TARGET_DEVICE=cpu"
    # 0.21 and 0.11 ignore VLLM_TARGET_DEVICE (they look for "+cpu" in torch's version).
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()
    return "CpuPlatform set by hand"


@dataclass
class VllmApi:
    """The imported modules and the seams this release offers."""

    version: str
    EncoderRunner: type | None     # v2 (from 0.15)
    EncoderCache: type | None
    GPUModelRunner: type | None    # v1 (0.11 on; 0.15 on beside v2)
    Scheduler: type
    EncoderCacheManager: type
    inputs: object          # vllm.multimodal.inputs
    interfaces: object      # vllm.model_executor.models.interfaces
    utils: object           # vllm.model_executor.models.utils
    Request: type           # vllm.v1.request.Request
    SamplingParams: type
    loaded: dict = field(default_factory=dict)  # how it was imported: platform, torchvision shim

    @classmethod
    def load(cls) -> VllmApi:
        from vlmpath.engines.torchvision_shim import ensure_torchvision_importable

        shimmed = ensure_torchvision_importable()
        warnings.filterwarnings("ignore")
        import torch

        if not torch.cuda.is_available():  # read at import by 0.33 (CpuPlatform); before vllm
            os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        try:
            import vllm

            platform = _cpu_platform()
            from vllm.model_executor.models import interfaces, utils
            from vllm.multimodal import inputs
            from vllm.v1.core.encoder_cache_manager import EncoderCacheManager
            from vllm.sampling_params import SamplingParams
            from vllm.v1.core.sched.scheduler import Scheduler
            from vllm.v1.request import Request
        except ImportError as exc:
            raise EngineError(f"vllm does not import in {sys.executable}: {exc}; build the engine "
                              "environment with `vlmpath engine install vllm==X`") from exc
        version = getattr(vllm, "__version__", "unknown")
        runner_mod = _optional("vllm.v1.worker.gpu.mm.encoder_runner")
        cache_mod = _optional("vllm.v1.worker.gpu.mm.encoder_cache")
        v2 = getattr(runner_mod, "EncoderRunner", None) and getattr(cache_mod, "EncoderCache", None)
        # The v1 runner's methods (0.11 on; beside v2 from 0.15): which one runs is chosen
        # per engine (vllm_runner_choice), so both are probed.
        gpu_runner = _optional("vllm.v1.worker.gpu_model_runner")
        v1 = getattr(gpu_runner, "GPUModelRunner", None)
        if not (hasattr(v1, "_execute_mm_encoder") and hasattr(v1, "_gather_mm_embeddings")):
            v1 = None
        wanted = {
            "v1.worker.gpu.mm.encoder_runner.EncoderRunner or GPUModelRunner._gather_mm_embeddings": v2 or v1,
            "Scheduler._try_schedule_encoder_inputs": getattr(Scheduler, "_try_schedule_encoder_inputs", None),
            "Scheduler._free_encoder_inputs": getattr(Scheduler, "_free_encoder_inputs", None),
            "models.utils._merge_multimodal_embeddings": getattr(utils, "_merge_multimodal_embeddings", None),
            "multimodal.inputs.MultiModalFeatureSpec": getattr(inputs, "MultiModalFeatureSpec", None),
        }
        missing = [k for k, v in wanted.items() if v is None]
        if missing:
            raise EngineError(f"vllm {version} at {os.path.dirname(vllm.__file__)} lacks {', '.join(missing)}: "
                              "the adapter drives vLLM's model runner and its scheduler; "
                              "this release cannot be measured")
        api = cls(version, runner_mod.EncoderRunner if v2 else None, cache_mod.EncoderCache if v2 else None, v1,
                  Scheduler, EncoderCacheManager, inputs, interfaces, utils, Request, SamplingParams)
        api.loaded = {"platform": platform, "torchvision_shim": ",".join(shimmed) or "none"}
        return api

    @property
    def runners(self) -> tuple[str, ...]:
        """The model runners this release has whose embedding path the adapter drives."""
        return tuple(n for n, c in (("v1", self.GPUModelRunner), ("v2", self.EncoderRunner)) if c is not None)

    def seams_for(self, runner: str) -> dict:
        """The seams of this release's path through ``runner`` (``v1`` or ``v2``)."""
        v2 = runner == "v2"
        runner = self.EncoderRunner if v2 else self.GPUModelRunner
        gather = inspect.getsource(runner.gather_mm_embeddings if v2 else runner._gather_mm_embeddings)
        merge = inspect.getsource(self.utils._merge_multimodal_embeddings)
        execute = inspect.getsource(runner.execute_mm_encoder if v2 else runner._execute_mm_encoder)
        if "masked_scatter_" in merge:
            merged = "masked_scatter_"
        elif "[is_multimodal] =" in merge:
            merged = "index_put"
        else:
            merged = "unknown"
        return {
            "encoder": "v2_encoder_runner" if v2 else "v1_gpu_model_runner",
            "schedule": "scheduler._try_schedule_encoder_inputs+EncoderCacheManager",
            "prepare": ("skips_cached" if v2 and "encoder_outputs" in inspect.getsource(runner.prepare_mm_inputs)
                        else "trusts_scheduler"),
            "gather": "feature_window" if "get_mm_features_in_window" in gather else "linear",
            # the mask's own copy (0.33's v1 gather also copies mrope positions to the device)
            "mask": "device" if "is_mm_embed.copy_to_gpu" in gather else "host" if 'device="cpu"' in gather
                    else "unknown",
            "merge": merged,
            "batching": ("group_and_batch_mm_kwargs" if "group_and_batch_mm_kwargs" in execute
                         else "group_mm_kwargs_by_modality" if "group_mm_kwargs_by_modality" in execute else "unknown"),
            **self.loaded,
        }


def load_api() -> VllmApi:
    """``VllmApi.load()`` with any import-time failure turned into an ``EngineError``."""
    try:
        return VllmApi.load()
    except VlmpathError:
        raise
    except Exception as exc:  # a broken source tree: say which and why, the run goes on
        raise EngineError(f"vllm could not be loaded: {type(exc).__name__}: {exc}") from exc
