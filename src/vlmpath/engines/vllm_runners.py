"""Through which of vLLM's model-runner code does a step encode, gather and merge?

Two drivers with one interface (``encode(scheduled)``, ``embeds(...)``, ``free(hash)``),
chosen by ``VllmApi.seams["encoder"]``:

- ``V2Driver``: the v2 ``EncoderRunner`` (``vllm/v1/worker/gpu/mm/encoder_runner.py``, from
  0.15): ``prepare_mm_inputs`` + ``execute_mm_encoder`` into its ``EncoderCache``,
  ``gather_mm_embeddings`` (``is_mm_embed`` built with ``device="cpu"``) and
  ``get_inputs_embeds``. A clean constructor: the most stable seam.
- ``V1Driver``: the v1 ``GPUModelRunner``'s own methods (``_execute_mm_encoder``,
  ``_gather_mm_embeddings``: ``is_mm_embed`` is a ``CpuGpuBuffer`` whose host half is filled
  and copied to the device) on an object made with ``__new__`` and only the attributes those
  methods read (its ``__init__`` needs a full ``VllmConfig``), then the model's
  ``embed_input_ids`` as ``_preprocess`` calls it. 0.11-0.14.

Both mark what vLLM keeps on the host as host (``vlmpath.measure.syncs.host``): the v2
mask, the v1 buffer's host half. ``device_mask`` (a test's plant) leaves the v2 mask
unmarked, as if it lived on the device.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from vlmpath.measure.syncs import host


class V2Driver:
    def __init__(self, api, model, max_tokens: int, hidden: int, dtype, device, *, device_mask: bool = False):
        self.api, self.device_mask = api, device_mask
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
        if self.api.seams["mask"] == "host" and not self.device_mask:
            host(is_mm)
        out = self.runner.get_inputs_embeds(ids, mm, is_mm)
        return out[:ids.shape[0]].clone()  # the runner's buffer is reused by the next step

    def free(self, mm_hash: str) -> None:
        self.cache.free_encoder_cache(mm_hash)


class V1Driver:
    def __init__(self, api, model, max_tokens: int, hidden: int, dtype, device, *, device_mask: bool = False):
        from vllm.v1.utils import CpuGpuBuffer

        self.model = model
        runner = api.GPUModelRunner.__new__(api.GPUModelRunner)  # only what the two methods read
        runner.model, runner.device, runner.pin_memory = model, torch.device(device), False
        runner.requests, runner.encoder_cache = {}, {}
        runner.is_multimodal_pruning_enabled = runner.uses_mrope = False
        runner.is_mm_embed = CpuGpuBuffer(max_tokens, dtype=torch.bool, device=device, pin_memory=False)
        if not device_mask:
            host(runner.is_mm_embed.cpu)  # the host half; copy_to_gpu gives the device half
        runner.input_batch = SimpleNamespace(req_ids=[])
        self.runner = runner

    def add_request(self, req) -> None:
        self.runner.requests[req.request_id] = req  # reads mm_features, num_computed_tokens

    def _output(self, scheduled: dict[str, list[int]], reqs: list, extend: list[int]):
        return SimpleNamespace(scheduled_encoder_inputs=scheduled, total_num_scheduled_tokens=sum(extend),
                               num_scheduled_tokens={r.request_id: n for r, n in zip(reqs, extend)})

    def encode(self, scheduled: dict[str, list[int]], reqs: dict) -> None:
        if scheduled:
            self.runner._execute_mm_encoder(self._output(scheduled, [], []))

    def embeds(self, reqs: list, extend: list[int], ids: torch.Tensor) -> torch.Tensor:
        self.runner.input_batch.req_ids = [r.request_id for r in reqs]
        mm, is_mm = self.runner._gather_mm_embeddings(self._output({}, reqs, extend))
        return self.model.embed_input_ids(ids, multimodal_embeddings=mm, is_multimodal=is_mm)

    def free(self, mm_hash: str) -> None:
        self.runner.encoder_cache.pop(mm_hash, None)  # as the runner does for freed hashes
