"""Through which of vLLM's model-runner code does a step encode, gather and merge?

Two drivers with one interface (``encode(scheduled)``, ``embeds(...)``, ``free(hash)``),
``DRIVERS[runner]`` for the runner ``vllm_runner_choice`` chose:

- ``V2Driver``: the v2 ``EncoderRunner`` (``vllm/v1/worker/gpu/mm/encoder_runner.py``, from
  0.15): ``prepare_mm_inputs`` + ``execute_mm_encoder`` into its ``EncoderCache``,
  ``gather_mm_embeddings`` (``is_mm_embed`` built with ``device="cpu"``) and
  ``get_inputs_embeds``. A clean constructor: the most stable seam.
- ``V1Driver``: the v1 ``GPUModelRunner``'s own methods (``_execute_mm_encoder``: its
  ``_batch_mm_inputs_from_scheduler`` sorts the items by modality, hashes alongside, and the
  outputs go into ``encoder_cache`` by hash; ``_gather_mm_embeddings``) on an object made
  with ``__new__`` and only the attributes those methods read (its ``__init__`` needs a
  full ``VllmConfig`` and a model), then the model's ``embed_input_ids`` as ``_preprocess``
  calls it. 0.11-0.14 (``is_mm_embed`` a ``CpuGpuBuffer`` whose host half is filled and
  copied to the device), and beside v2 from 0.15 (0.33: ``is_mm_embed`` made per step with
  ``device="cpu"``; the LoRA, EVS, timing, encoder-CUDA-graph and EC-connector branches off,
  as a default server has them).

Both mark what vLLM keeps on the host as host (``vlmpath.measure.syncs.host``): the mask
built with ``device="cpu"``, the v1 buffer's host half. ``device_mask`` (a test's plant)
leaves them unmarked, as if they lived on the device.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import torch

from vlmpath.measure.syncs import host


class V2Driver:
    def __init__(self, api, model, max_tokens: int, hidden: int, dtype, device, *, host_mask: bool):
        self.host_mask = host_mask
        self.cache = api.EncoderCache()
        self.runner = api.EncoderRunner(model, max_tokens, hidden, self.cache, dtype, device)

    def add_request(self, req) -> None:
        self.cache.add_request(req.request_id, req.mm_features)

    def encode(self, scheduled: dict[str, list[int]], reqs: dict) -> None:
        hashes, kwargs = self.runner.prepare_mm_inputs(scheduled)
        if kwargs:  # as the model state's execute_mm_encoder stores them
            for h, out in zip(hashes, self.runner.execute_mm_encoder(kwargs)):
                self.cache.encoder_outputs[h] = out

    def embeds(self, reqs: list, extend: list[int], ids: torch.Tensor) -> torch.Tensor:
        n = np.array(extend, dtype=np.int32)
        starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int32)
        mm, is_mm = self.runner.gather_mm_embeddings(
            [r.request_id for r in reqs], int(n.sum()), n, starts,
            np.array([r.num_prompt_tokens for r in reqs], dtype=np.int32),
            np.array([r.num_computed_tokens for r in reqs], dtype=np.int32))
        # built with device="cpu": host memory on a GPU too
        if self.host_mask:
            host(is_mm)
        out = self.runner.get_inputs_embeds(ids, mm, is_mm)
        return out[:ids.shape[0]].clone()  # the runner's buffer is reused by the next step

    def free(self, mm_hash: str) -> None:
        self.cache.free_encoder_cache(mm_hash)

    def held(self) -> dict:
        """The encoder outputs the runner's cache holds, by hash."""
        return self.cache.encoder_outputs


class V1Driver:
    def __init__(self, api, model, max_tokens: int, hidden: int, dtype, device, *, host_mask: bool):
        self.model, self.host_mask = model, host_mask
        runner = api.GPUModelRunner.__new__(api.GPUModelRunner)  # only what the two methods read
        runner.model, runner.device, runner.pin_memory = model, torch.device(device), False
        runner.requests, runner.encoder_cache = {}, {}
        runner.is_multimodal_pruning_enabled = runner.uses_mrope = False
        # 0.33: what a default server has (no LoRA, no mm processor stats, no encoder CUDA
        # graphs, no sequential video encoding); read by the branches _execute_mm_encoder skips
        runner.lora_config = runner.observability_config = runner.encoder_cudagraph_manager = None
        runner.requires_sequential_video_encoding = False
        self._buffer = None
        if "is_mm_embed.copy_to_gpu" in inspect.getsource(api.GPUModelRunner._gather_mm_embeddings):  # 0.11-0.14
            from vllm.v1.utils import CpuGpuBuffer

            runner.is_mm_embed = self._buffer = CpuGpuBuffer(max_tokens, dtype=torch.bool, device=device,
                                                             pin_memory=False)
            if host_mask:
                host(runner.is_mm_embed.cpu)  # the host half; copy_to_gpu gives the device half
        runner.input_batch = SimpleNamespace(req_ids=[])
        self.runner = runner

    def add_request(self, req) -> None:
        self.runner.requests[req.request_id] = req  # reads mm_features, num_computed_tokens

    def _output(self, scheduled: dict[str, list[int]], reqs: list, extend: list[int]):
        return SimpleNamespace(scheduled_encoder_inputs=scheduled, total_num_scheduled_tokens=sum(extend),
                               num_scheduled_tokens={r.request_id: n for r, n in zip(reqs, extend)},
                               ec_manager_metadata=None, free_encoder_mm_hashes=[])

    def encode(self, scheduled: dict[str, list[int]], reqs: dict) -> None:
        if scheduled:
            self.runner._execute_mm_encoder(self._output(scheduled, [], []))

    def embeds(self, reqs: list, extend: list[int], ids: torch.Tensor) -> torch.Tensor:
        self.runner.input_batch.req_ids = [r.request_id for r in reqs]
        mm, is_mm = self.runner._gather_mm_embeddings(self._output({}, reqs, extend))
        if self._buffer is None and self.host_mask:  # built with device="cpu" per step (0.33)
            host(is_mm)
        return self.model.embed_input_ids(ids, multimodal_embeddings=mm, is_multimodal=is_mm)

    def free(self, mm_hash: str) -> None:
        self.runner.encoder_cache.pop(mm_hash, None)  # as the runner does for freed hashes

    def held(self) -> dict:
        """The encoder outputs the runner's cache holds, by hash."""
        return self.runner.encoder_cache


DRIVERS = {"v1": V1Driver, "v2": V2Driver}
