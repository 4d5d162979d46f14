"""What does vLLM's own worker set up before its model runner runs, at TP=1 on this device?

A vLLM worker makes its ``VllmConfig`` current and builds the distributed environment and
model-parallel groups before the first step; code in the runner's and the model's path may
read either (``get_current_vllm_config()``, ``get_tensor_model_parallel_world_size()``,
``get_tp_group()``). ``VllmServerState`` sets up what a default server at tensor-parallel
size 1 holds and takes it down again (``close``), in reverse order:

- *config*: a default ``VllmConfig()`` (TP=1, PP=1) made current with
  ``set_current_vllm_config``, as ``Worker.init_device``/``load_model`` and
  ``WorkerWrapperBase`` run the worker's work under it. Without a ``ModelConfig``: vLLM
  inspects a model class in a subprocess that has no vlmpath torchvision shim, so a
  Qwen2.5-VL ``ModelConfig`` cannot be built on this CPU image;
- *groups*: ``init_distributed_environment(1, 0, file://..., local_rank, backend)`` with the
  platform's ``dist_backend`` (gloo on a CPU) and ``ensure_model_parallel_initialized(1, 1)``,
  as ``v1.worker.gpu_worker.init_worker_distributed_environment`` does (the CPU worker calls
  the same function). Taken down with ``destroy_model_parallel`` and
  ``destroy_distributed_environment``; groups somebody else built are used, never destroyed.

``what`` says which pieces were set up (recorded as the seam ``server_state``). Which model
runner the server would build from this config is ``vllm_runner_choice``'s question (the
seam ``runner``).
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path

import torch

from vlmpath.core.errors import EngineError


class VllmServerState:
    """The TP=1 worker state around the adapter's routines (see the module docstring)."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.what: list[str] = []
        self._stack = ExitStack()
        try:
            tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="vlmpath-vllm-server-")))
            self._config()
            self._groups(tmp)
        except Exception as exc:
            self._stack.close()
            raise EngineError(f"vLLM's TP=1 worker state could not be set up ({type(exc).__name__}: {exc}); "
                              "the adapter runs the engine's path only as its worker would") from exc

    @property
    def seam(self) -> str:
        return "+".join(self.what) or "none"

    def close(self) -> None:
        self._stack.close()

    def _config(self) -> None:
        from vllm.config import VllmConfig, set_current_vllm_config

        self.config = VllmConfig()
        self._stack.enter_context(set_current_vllm_config(self.config))
        self.what.append("set_current_vllm_config")

    def _groups(self, tmp: Path) -> None:
        from vllm.distributed import parallel_state as ps

        if torch.distributed.is_initialized() or ps.model_parallel_is_initialized():
            self.what.append("groups_already_built")
            return
        from vllm.platforms import current_platform

        backend = getattr(current_platform, "dist_backend", None) or ("gloo" if self.device.type == "cpu" else "nccl")
        ps.init_distributed_environment(1, 0, f"file://{tmp / 'rendezvous'}", self.device.index or 0, backend)
        self._stack.callback(ps.destroy_distributed_environment)
        ps.ensure_model_parallel_initialized(1, 1)
        self._stack.callback(ps.destroy_model_parallel)  # runs first: groups before the world
        self.what.append(f"groups(tp=1,{backend})")
