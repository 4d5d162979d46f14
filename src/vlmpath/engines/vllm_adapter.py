"""How does vLLM's own embedding code handle our workloads, step by step?

``VllmEngine`` wraps an imported release (``vllm_api.VllmApi``: modules and seams) and
builds ``VllmRoutine``s, which the suite drives exactly like the reference routine
(``vlmpath.engines.base.Routine``):

- *requests*: every item becomes the engine's own ``MultiModalFeatureSpec``: identifier =
  the hash learnt at arrival, ``PlaceholderRange(offset, length, is_embed)`` from the first
  to the last placeholder of the item (``is_embed`` marks the spans inside, as vLLM does for
  an item with text between its spans), ``data`` = a ``MultiModalKwargsItem`` of our pixel
  values and grid (the grid ``keep_on_cpu``, as Qwen2.5-VL declares it) and the item's index;
  placeholders become an in-vocabulary token id (vLLM's mask, not the ids, says where rows go);
- *scheduling*: per step, the scheduler's own ``_try_schedule_encoder_inputs`` (on a
  ``Scheduler`` made with ``__new__``: only the attributes that method reads) with the real
  ``EncoderCacheManager`` decides which items to encode; encoded items are allocated, and
  ``_free_encoder_inputs`` and the manager's freed hashes release them as vLLM does; the
  encoder budget holds every item of the workload, so the scheduler never trims our chunk (an error if it
  did: the schedule is the workload's);
- *encoder*: the release's model runner (``vllm_runners``: the v2 ``EncoderRunner`` or the v1
  ``GPUModelRunner`` methods, by default the one the release's own server picks on this device:
  ``VllmConfig.use_v2_model_runner``, see ``vllm_runner_choice``; the entry's option ``runner``
  (``--engine-option runner=v1``, or its own flag ``--vllm-runner``) forces one; the seam
  ``runner`` says which and why; vLLM's ``group_and_batch_mm_kwargs`` or
  ``group_mm_kwargs_by_modality``: one call per modality group, across requests) calls our
  model's ``embed_multimodal``, which runs our encoder (the seeded tower) inside
  ``encoder_region`` and counts calls and items; outputs go into the runner's encoder cache by
  hash. Cache hits: the manager finding a hash it did not allocate in the same step;
- *merge*: the runner's gather (``is_mm_embed``), then ``embed_input_ids``: vLLM's own
  ``SupportsMultiModal`` method (``_merge_multimodal_embeddings``) over our seeded table.

Syncs: vLLM keeps ``is_mm_embed`` and ``keep_on_cpu`` fields on the host by design; they
are marked host (``vlmpath.measure.syncs.host``) when the seams say so, so a CPU count
means what it would on a GPU.

``VLMPATH_ENGINE_FAULT`` as for sglang: ``WORKLOAD:raise:MESSAGE`` makes the step raise;
``WORKLOAD:flip`` hands the engine each encoder call's rows in reverse order;
``WORKLOAD:device_mask`` leaves vLLM's host mask unmarked (as if it lived on the device);
``WORKLOAD:split_reversed`` / ``split_rotated`` make the model's ``embed_multimodal`` split its
batched output by the right sizes in the wrong order (where vLLM's models split it).

*path counts* (``measure.path_ledger``): every item the runner hands the model, with its
request's chunk; evictions are the hashes the ``EncoderCacheManager`` freed to make room
(``get_freed_mm_hashes``); after each step's encode, the storage the runner's encoder cache
(v1 ``encoder_cache``, v2 ``EncoderCache.encoder_outputs``) keeps alive, against the
manager's size in embeddings times a row's bytes.

*worker state*: before the first routine (or the engine's tower) the engine sets up what a
vLLM worker holds at TP=1 on that device (``vllm_server_state``: the current ``VllmConfig``,
distributed environment and model-parallel groups); ``close()`` takes it down; the seam
``server_state`` says which pieces (``*:bare``, tests only: none).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from types import SimpleNamespace

import torch

from vlmpath.core.errors import EngineError
from vlmpath.engines import adapter_common
from vlmpath.engines.adapter_common import EngineRoutineBase
from vlmpath.engines.behaviour import StepCalls
from vlmpath.engines.vllm_api import VllmApi, load_api
from vlmpath.engines.vllm_runners import DRIVERS
from vlmpath.measure.content_hash import HashStats
from vlmpath.measure.items import Step
from vlmpath.measure.syncs import host
from vlmpath.measure.workload import Workload, with_item_hashes
from vlmpath.paths.encode import EncodeStats

FAULT_ENV = adapter_common.FAULT_ENV
# Our fields of each item, and which vLLM keeps on the host (MultiModalFieldConfig.keep_on_cpu).
FIELDS = {"pixel_values": False, "image_grid_thw": True, "vlmpath_item": True}


def _model_class(api: VllmApi):
    """A multimodal model for vLLM's runner: vLLM's own ``SupportsMultiModal`` methods
    (``embed_input_ids`` -> ``_merge_multimodal_embeddings``) over our table and encoder."""

    class _Text(torch.nn.Module):
        def __init__(self, table):
            super().__init__()
            self.embedding = torch.nn.Embedding.from_pretrained(table, freeze=True)

        def embed_input_ids(self, input_ids):
            return self.embedding(input_ids)

    class VlmpathModel(torch.nn.Module, api.interfaces.SupportsMultiModal):
        _has_oov_mm_tokens = False  # placeholders are in-vocabulary ids (see the module docstring)
        # 0.1x: batch by field config, and keep these fields on the host (as Qwen2.5-VL does)
        merge_by_field_config = True
        multimodal_cpu_fields = frozenset(k for k, on_cpu in FIELDS.items() if on_cpu)

        def __init__(self, table, embed_multimodal):
            torch.nn.Module.__init__(self)
            self.language_model = _Text(table)
            self._embed = embed_multimodal

        def get_language_model(self):
            return self.language_model

        def embed_multimodal(self, **kwargs):
            return self._embed(**kwargs)

    return VlmpathModel


def _step_items_span(workload: Workload) -> int:
    """The most placeholder rows of the items that one step's chunks touch."""
    best = 0
    for step in workload.steps:
        total = 0
        for e in step.entries:
            for it in workload.requests[e.rid].items:
                if any(a < e.prefix + e.extend and b >= e.prefix for a, b in it.offsets):
                    total += it.span
        best = max(best, total)
    return best


class _HitCounter:
    """A hit: the cache manager holds a hash this routine did not allocate in the same step."""

    def __init__(self, manager, stats: EncodeStats):
        self.stats, self.allocated = stats, set()
        check, allocate = manager.check_and_update_cache, manager.allocate

        def counted_check(request, i):
            out = check(request, i)
            if out and request.mm_features[i].identifier not in self.allocated:
                self.stats.cache_hits += 1
            return out

        def counted_allocate(request, i):
            self.allocated.add(request.mm_features[i].identifier)
            return allocate(request, i)

        manager.check_and_update_cache, manager.allocate = counted_check, counted_allocate


class VllmRoutine(EngineRoutineBase):
    """One workload through vLLM's embedding path (see the module docstring)."""

    engine = "vLLM"
    evs_where = "the model's mm_pruner, not the shared embedding path"

    def __init__(self, api: VllmApi, workload: Workload, encoder, table: torch.Tensor, *, runner: str,
                 mask: str, cache_bytes: int, encoder_region: Callable[[], AbstractContextManager] = nullcontext,
                 faults: str | None = None):
        super().__init__(api, workload, encoder, table, encoder_region=encoder_region, faults=faults)
        self._items = list(workload.items)
        index = {id(it): k for k, it in enumerate(self._items)}
        rid_of = {id(it): r.rid for r in workload.requests for it in r.items}
        self._rid = [rid_of.get(id(it)) for it in self._items]
        self.calls = StepCalls()  # what each encoder call held, per step (engines.behaviour)
        placeholder = table.shape[0] - 1  # any in-vocabulary id: the mask says where rows go
        inputs = api.inputs
        self._ids, self._reqs = {}, {}
        max_tokens = max((sum(e.extend for e in s.entries) for s in workload.steps), default=1)
        # The encoder budget: every item of the workload at once, so that the scheduler never
        # trims a chunk (vLLM's own budget would; the schedule is the workload's).
        self._budget = sum(it.span for it in workload.items) + max_tokens
        for r in workload.requests:
            ids = r.input_ids.clone()
            feats = []
            for it in sorted(r.items, key=lambda x: x.offsets[0][0]):
                first, last = it.offsets[0][0], it.offsets[-1][1]
                is_embed = None
                if len(it.offsets) > 1:  # text between the spans: vLLM's is_embed marks the spans
                    # made by vLLM's processor on the host, read back by PlaceholderRange
                    is_embed = host(torch.zeros(last - first + 1, dtype=torch.bool))
                    for a, b in it.offsets:
                        is_embed[a - first:b - first + 1] = True
                for a, b in it.offsets:
                    ids[a:b + 1] = placeholder
                values = {"pixel_values": it.feature, "image_grid_thw": torch.tensor(it.grid_thw, dtype=torch.int64),
                          "vlmpath_item": torch.tensor([index[id(it)]])}
                data = inputs.MultiModalKwargsItem({k: self._elem(v, FIELDS[k], it.modality, k)
                                                    for k, v in values.items()})
                feats.append(inputs.MultiModalFeatureSpec(
                    data=data, modality=it.modality, identifier=str(it.hash),
                    mm_position=inputs.PlaceholderRange(offset=first, length=last - first + 1, is_embed=is_embed)))
            self._ids[r.rid] = ids
            self._reqs[r.rid] = self._request(str(r.rid), ids.tolist(), feats)
        hidden = table.shape[1]
        # The encoder cache in embeddings (vLLM sizes it in tokens): our bytes over a row's.
        # vLLM sizes its encoder cache to hold at least its encoder budget and the largest item
        # (an item larger than the cache is never scheduled; a full cache trims the chunk,
        # which the adapter refuses): floored at the items any one step touches.
        slots = max(1, cache_bytes // (hidden * table.element_size()), _step_items_span(workload))
        self.manager = api.EncoderCacheManager(slots)
        self._budget_bytes = slots * hidden * table.element_size()
        self._hits = _HitCounter(self.manager, self.stats)
        sched = api.Scheduler.__new__(api.Scheduler)  # only what the encoder methods read
        sched.is_encoder_decoder = False
        sched.scheduler_config = SimpleNamespace(disable_chunked_mm_input=False)
        sched.encoder_cache_manager = self.manager
        sched.ec_connector = None
        sched.encoder_cache_mismatch_reqs = set()
        self.scheduler = sched
        model = _model_class(api)(table, self._embed)
        # ``mask``: the seam; where vLLM keeps it on the host (or fills a host half), marked so
        self.driver = DRIVERS[runner](api, model, max_tokens, hidden, table.dtype, self.device,
                                      host_mask=mask != "unknown" and self.fault.kind != "device_mask")
        for req in self._reqs.values():
            self.driver.add_request(req)

    def _request(self, rid: str, ids: list[int], feats: list):
        """vLLM's own Request (0.11 also takes the eos token id, positionally)."""
        params = inspect.signature(self.api.Request).parameters
        args = (rid, ids, self.api.SamplingParams(max_tokens=1), None) + ((None,) if "eos_token_id" in params else ())
        return self.api.Request(*args, mm_features=feats)

    def _elem(self, data: torch.Tensor, keep_on_cpu: bool, modality: str, key: str):
        """One field of an item, batched; 0.1x elements also carry modality and key, and
        keep fields on the host through the model's ``multimodal_cpu_fields`` instead."""
        inputs = self.api.inputs
        names = {f.name for f in dataclasses.fields(inputs.MultiModalFieldElem)}
        field_names = {f.name for f in dataclasses.fields(inputs.MultiModalBatchedField)}
        field = inputs.MultiModalBatchedField(**({"keep_on_cpu": keep_on_cpu} if "keep_on_cpu" in field_names else {}))
        extra = {"modality": modality, "key": key} if "modality" in names else {}
        return inputs.MultiModalFieldElem(data=data, field=field, **extra)

    def _embed(self, **kwargs) -> list[torch.Tensor]:
        """The model's embed_multimodal: our encoder over the batch vLLM grouped."""
        for k, on_cpu in FIELDS.items():  # vLLM left these on the host (keep_on_cpu)
            if on_cpu and isinstance(kwargs.get(k), torch.Tensor):
                host(kwargs[k])
        idx = kwargs["vlmpath_item"]
        idx = idx.flatten().tolist() if isinstance(idx, torch.Tensor) else [int(t) for t in idx]
        ours = [self._items[k] for k in idx]
        self.calls.call(self._rid[k] for k in idx if self._rid[k] is not None)
        self.stats.encoder_calls += 1
        self.stats.encoded_items += len(ours)
        self.ledger.encoded(ours, [self._rid[k] for k in idx])
        with self.encoder_region():
            out = self.encoder.encode(ours)
        rows = out.embeddings.flip(0) if self.fault.flip else out.embeddings
        return list(rows.split(adapter_common.reorder_sizes(out.item_rows, self.fault.split_order)))

    def run_step(self, step: Step) -> torch.Tensor:
        if self.fault.raises:
            raise RuntimeError(self.fault.raises)
        self._hits.allocated.clear()
        self.calls.step()
        self.ledger.begin_step(step)
        budget = self._budget
        scheduled: dict[str, list[int]] = {}
        for e in step.entries:
            req = self._reqs[e.rid]
            # (to schedule, new tokens, budget, external loads[, duplicates from 0.2x]): by position
            todo, new, budget = self.scheduler._try_schedule_encoder_inputs(req, e.prefix, e.extend, budget)[:3]
            if new != e.extend:
                raise EngineError(f"vLLM's scheduler trimmed request {e.rid}'s chunk from {e.extend} to {new} "
                                  "tokens; the adapter runs the workload's schedule as given")
            for i in todo:
                self.manager.allocate(req, i)
            if todo:
                scheduled[req.request_id] = todo
        reqs = [self._reqs[e.rid] for e in step.entries]
        for e, r in zip(step.entries, reqs):
            r.num_computed_tokens = e.prefix  # what the runner's request state holds this step
        # As the scheduler's output tells the runner: the hashes evicted by this step's
        # allocations are dropped before the encoder runs.
        self._free_evicted()
        self.driver.encode(scheduled, reqs)
        self.ledger.observe_entries(self.driver.held(), self._budget_bytes)
        ids = torch.cat([self._ids[e.rid][e.prefix:e.prefix + e.extend] for e in step.entries])
        embeds = self.driver.embeds(reqs, [e.extend for e in step.entries], ids.to(self.device, non_blocking=True))
        for e, r in zip(step.entries, reqs):
            r.num_computed_tokens = e.prefix + e.extend
            self.scheduler._free_encoder_inputs(r)
        self._free_evicted()
        return embeds

    def _free_evicted(self) -> None:
        freed = self.manager.get_freed_mm_hashes()
        self.ledger.evictions += len(freed)  # dropped to make room (a freeable entry is kept until then)
        for h in freed:
            self.driver.free(h)


class VllmEngine(adapter_common.ServerStateHolder):
    """An imported vLLM release, as the suite's engine: routines, arrival, labels."""

    def __init__(self, label: str, api: VllmApi | None = None, options: Mapping[str, str] | None = None):
        from vlmpath.engines.known.vllm import ENGINE
        from vlmpath.engines.vllm_runner_choice import choose
        from vlmpath.engines.vllm_runner_choice import label as runner_label

        self.api = api or load_api()
        self.label = label
        self.version = self.api.version
        # ``options``: the run's values of the entry's options (``engines.engine_options``),
        # untouched on the way; ``runner`` is this adapter's alone: a release without it refuses
        self.options = dict(options or {})
        self.runner, why = choose(self.api, self.options.get("runner", ENGINE.option("runner").default))
        self.seams = {**self.api.seams_for(self.runner), "runner": runner_label(self.runner, why)}

    def server_state_class(self):
        from vlmpath.engines.vllm_server_state import VllmServerState

        return VllmServerState

    def engine_tower(self, encoder):
        """``encoder`` with vLLM's own vision tower (``--tower engine``: ``vllm_tower``),
        built once per encoder; the records say so (seam ``tower``)."""
        from vlmpath.engines.vllm_tower import TOWER_SEAM, engine_tower

        return self.engine_tower_of(encoder, engine_tower, TOWER_SEAM)

    def routine(self, workload: Workload, encoder, pipeline, table: torch.Tensor, *, cache_bytes: int,
                encoder_region: Callable[[], AbstractContextManager] = nullcontext) -> VllmRoutine:
        # ``pipeline`` names the reference's strategies; the engine's own code has one of each.
        self.ensure_server_state(table.device)
        return VllmRoutine(self.api, workload, encoder, table, runner=self.runner, mask=self.seams["mask"],
                           cache_bytes=cache_bytes, encoder_region=encoder_region, faults=self.faults)

    def arrive(self, wl: Workload, hash_name: str) -> tuple[Workload, float, HashStats]:
        """Every distinct feature hashed by vLLM's own ``MultiModalHasher`` (what its processor
        does before the scheduler sees an item); the item's hash is its first 64 bits."""
        import time

        from vllm.multimodal.hasher import MultiModalHasher

        # 0.2x takes the algorithm as its first argument (the processor passes its configured
        # one, blake3 by default); 0.1x reads it from vllm.envs.
        first = "algorithm" in inspect.signature(MultiModalHasher.hash_kwargs).parameters
        args = ("blake3",) if first else ()
        seen: dict[int, int] = {}
        t0 = time.perf_counter()
        for it in wl.items:
            if it.hash not in seen:
                digest = MultiModalHasher.hash_kwargs(*args, model_id="vlmpath", **{it.modality: it.feature})
                seen[it.hash] = int(digest[:16], 16)
        seconds = time.perf_counter() - t0
        return with_item_hashes(wl, seen), seconds, HashStats(fast_digests=len(seen))
