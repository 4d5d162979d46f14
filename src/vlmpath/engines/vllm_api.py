"""Which parts of vLLM's multimodal embedding path does this installed release have?

``VllmApi.load()`` imports the release in this process (after the torchvision shim, see
``torchvision_shim``; on a machine without a GPU with vLLM's CPU platform) and finds every
seam the adapter drives *by inspection* (which modules, classes, methods and source lines
exist), never by version string, and records the choice in ``seams`` (written into every
record as ``engine_seams``):

- ``encoder``: ``v2_encoder_runner`` (``vllm/v1/worker/gpu/mm/encoder_runner.py``
  ``EncoderRunner``: prepare, execute, gather, merge; from 0.15);
- ``schedule``: ``scheduler._try_schedule_encoder_inputs`` with the real
  ``EncoderCacheManager`` (which items a step encodes, which the cache already holds);
- ``prepare``: ``skips_cached`` (``prepare_mm_inputs`` drops a hash already encoded) or
  ``trusts_scheduler``;
- ``gather``: ``feature_window`` (``get_mm_features_in_window``) or ``linear``;
- ``mask``: ``host`` when the gather builds ``is_mm_embed`` with ``device="cpu"``, else
  ``device``;
- ``merge``: ``index_put`` (``inputs_embeds[is_multimodal] = rows``, #34246) or
  ``masked_scatter_`` (#22105), read from ``_merge_multimodal_embeddings``' source;
- ``platform``: how the CPU platform was obtained (``VLLM_TARGET_DEVICE`` or set by hand).

A release without ``EncoderRunner`` (before 0.15, e.g. 0.11.1: its v1 runner methods need a
full ``VllmConfig``) raises one ``EngineError`` saying that this adapter cannot drive it.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineError


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
    EncoderRunner: type
    EncoderCache: type
    Scheduler: type
    EncoderCacheManager: type
    inputs: object          # vllm.multimodal.inputs
    interfaces: object      # vllm.model_executor.models.interfaces
    utils: object           # vllm.model_executor.models.utils
    Request: type           # vllm.v1.request.Request
    SamplingParams: type
    seams: dict = field(default_factory=dict)

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
        wanted = {
            "v1.worker.gpu.mm.encoder_runner.EncoderRunner": getattr(runner_mod, "EncoderRunner", None),
            "v1.worker.gpu.mm.encoder_cache.EncoderCache": getattr(cache_mod, "EncoderCache", None),
            "Scheduler._try_schedule_encoder_inputs": getattr(Scheduler, "_try_schedule_encoder_inputs", None),
            "Scheduler._free_encoder_inputs": getattr(Scheduler, "_free_encoder_inputs", None),
            "models.utils._merge_multimodal_embeddings": getattr(utils, "_merge_multimodal_embeddings", None),
            "multimodal.inputs.MultiModalFeatureSpec": getattr(inputs, "MultiModalFeatureSpec", None),
        }
        missing = [k for k, v in wanted.items() if v is None]
        if missing:
            raise EngineError(f"vllm {version} at {os.path.dirname(vllm.__file__)} lacks {', '.join(missing)}: "
                              "the adapter drives vLLM's v2 EncoderRunner (from 0.15) and its scheduler; "
                              "this release cannot be measured")
        api = cls(version, runner_mod.EncoderRunner, cache_mod.EncoderCache, Scheduler, EncoderCacheManager,
                  inputs, interfaces, utils, Request, SamplingParams)
        api.seams = api._detect(shimmed, platform)
        return api

    def _detect(self, shimmed: list[str], platform: str) -> dict:
        runner = self.EncoderRunner
        gather = inspect.getsource(runner.gather_mm_embeddings)
        merge = inspect.getsource(self.utils._merge_multimodal_embeddings)
        if "masked_scatter_" in merge:
            merged = "masked_scatter_"
        elif "[is_multimodal] =" in merge:
            merged = "index_put"
        else:
            merged = "unknown"
        return {
            "encoder": "v2_encoder_runner",
            "schedule": "scheduler._try_schedule_encoder_inputs+EncoderCacheManager",
            "prepare": ("skips_cached" if "encoder_outputs" in inspect.getsource(runner.prepare_mm_inputs)
                        else "trusts_scheduler"),
            "gather": "feature_window" if "get_mm_features_in_window" in gather else "linear",
            "mask": "host" if 'device="cpu"' in gather else "device",
            "merge": merged,
            "batching": "group_and_batch_mm_kwargs",
            "platform": platform,
            "torchvision_shim": ",".join(shimmed) or "none",
        }


def load_api() -> VllmApi:
    """``VllmApi.load()`` with any import-time failure turned into an ``EngineError``."""
    try:
        return VllmApi.load()
    except VlmpathError:
        raise
    except Exception as exc:  # a broken source tree: say which and why, the run goes on
        raise EngineError(f"vllm could not be loaded: {type(exc).__name__}: {exc}") from exc
