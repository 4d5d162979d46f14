"""How does sglang's own embedding code handle our workloads, step by step?

``SglangEngine`` wraps an imported release (``sglang_api.SglangApi``: modules and seams)
and builds ``SglangRoutine``s, which the suite drives exactly like the reference routine
(``vlmpath.engines.base.Routine``):

- *requests*: every item becomes the engine's own ``MultimodalDataItem`` (modality,
  ``feature`` = our pixel values, inclusive ``offsets``, ``hash`` = the hash learnt at
  arrival), ``set_pad_value()`` derives the engine's pad values, and the request's token
  ids get the engine's placeholders (``padding_sequence`` where it exists, else
  ``pad_value``); one ``MultimodalInputs`` per request with items;
- *cache*: the engine's global embedding cache is re-initialised at the case's cache
  size for each routine (a fresh cache per pass, as the reference does); cache hits are
  lookups that return rows for a hash not stored during the same step;
- *encoder*: our encoder (the real Qwen2.5-VL tower, or the multi-region encoder) is the
  engine's ``data_embedding_func``; it maps the engine's items back to ours by hash,
  counts calls and items, and runs inside ``encoder_region`` (syncs inside the tower are
  counted apart, as for the reference);
- *steps*: each forward step of the workload's chunked-prefill schedule calls the
  engine's ``embed_mm_inputs`` with the step's prefix and extend lengths (requests with
  items only, as the engine filters them) and all the step's token ids (a copy: the
  engine clamps them in place).

``VLMPATH_ENGINE_FAULT=WORKLOAD:raise:MESSAGE`` (tests) makes the engine's
``embed_mm_inputs`` raise ``RuntimeError(MESSAGE)`` in routines of that workload: a fault
planted in the engine's function, seen through the suite's failed-case path.
``WORKLOAD:flip`` hands the engine each encoder call's rows in reverse order: a planted
misplacement that the accuracy must see; ``WORKLOAD:split_reversed`` / ``split_rotated``
make the engine's chunk module split its batched encoder output by the right sizes in the
wrong order (its ``torch.split`` seen through ``adapter_common.SplitPlant``, for that
routine's steps only).

*path counts* (``measure.path_ledger``): every item the engine asks to encode, with its
request's chunk; after every store into the engine's own ``MultiModalStaticCache`` the keys
it dropped (evictions) and the storage its entries keep alive, against its ``max_size``.

*server state*: before the first routine the engine sets up what sglang's server holds at
TP=1 on the table's device (``sglang_server_state``: published server args, distributed
environment and model-parallel groups), and ``close()`` takes it down; the seam
``server_state`` says which pieces (``*:bare``, tests only: none, to show the difference).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch

from vlmpath.core.errors import EngineError
from vlmpath.engines import adapter_common
from vlmpath.engines.adapter_common import EngineRoutineBase
from vlmpath.engines.behaviour import StepCalls
from vlmpath.engines.sglang_api import SglangApi, load_api
from vlmpath.measure.content_hash import HashStats
from vlmpath.measure.items import Step
from vlmpath.measure.workload import Workload, with_item_hashes
from vlmpath.paths.encode import EncodeStats

FAULT_ENV = adapter_common.FAULT_ENV
_MASK64 = 2**64 - 1


class _HitCounter:
    """Wraps the engine cache's lookups on the instance: a hit is rows returned for a hash
    that was not stored in the same step (0.5.23 stores, then reads the entry back)."""

    def __init__(self, cache, stats: EncodeStats, ledger=None):
        self.stats, self.stored, self.ledger = stats, set(), ledger
        get, get_single, put = cache.get, getattr(cache, "get_single", None), cache.set
        # ``get`` takes a list of item hashes and looks up their combined hash (``set`` stores
        # under the combined one): compare like with like.
        combine = getattr(cache, "combine_hashes", None) or (lambda hs: tuple(hs))

        def counted_get(hashes, *a, **kw):
            out = get(hashes, *a, **kw)
            key = combine(list(hashes)) if isinstance(hashes, (list, tuple)) else hashes
            if out is not None and key not in self.stored:
                self.stats.cache_hits += 1
            return out

        def counted_single(h, *a, **kw):
            out = get_single(h, *a, **kw)
            if out is not None and h not in self.stored:
                self.stats.cache_hits += 1
            return out

        def counted_set(h, *a, **kw):
            key = combine(list(h)) if isinstance(h, (list, tuple)) else h
            self.stored.add(key)
            if self.ledger is None:
                return put(h, *a, **kw)
            return self.ledger.observed_store(cache, put, key, h, *a, **kw)

        cache.get, cache.set = counted_get, counted_set
        if get_single is not None:
            cache.get_single = counted_single


class SglangRoutine(EngineRoutineBase):
    """One workload through the engine's embedding path (see the module docstring)."""

    engine = "sglang"

    def __init__(self, api: SglangApi, workload: Workload, encoder, table: torch.Tensor, *,
                 cache_bytes: int, encoder_region: Callable[[], AbstractContextManager] = nullcontext,
                 faults: str | None = None):
        super().__init__(api, workload, encoder, table, encoder_region=encoder_region, faults=faults)
        self.embedding = torch.nn.Embedding.from_pretrained(table, freeze=True)
        self._cache = api.new_cache(cache_bytes)
        self._hits = _HitCounter(self._cache, self.stats, self.ledger)
        self._ours: dict[int, object] = {}  # engine hash -> our Item (same content, same hash)
        self._our_item: dict[int, object] = {}  # id of the engine's item -> our Item
        self._inputs: dict[int, object] = {}
        self._ids: dict[int, torch.Tensor] = {}
        self.calls = StepCalls()  # what each encoder call held, per step (engines.behaviour)
        self._rid: dict[int, int] = {}  # id of the engine's item -> its request
        for r in workload.requests:
            ids, items = r.input_ids.clone(), []
            for it in r.items:
                e = api.schedule_batch.MultimodalDataItem(
                    modality=api.modality(it.modality), feature=it.feature,
                    offsets=[tuple(o) for o in it.offsets], hash=int(it.hash) & _MASK64)
                e.set_pad_value()
                for a, b in it.offsets:
                    ids[a:b + 1] = torch.tensor(api.padding(e, b - a + 1), dtype=torch.int64)
                self._ours[e.hash] = it
                self._our_item[id(e)] = it  # by the engine's item: colliding hashes stay apart
                self._rid[id(e)] = r.rid
                items.append(e)
            self._ids[r.rid] = ids
            if items:
                self._inputs[r.rid] = api.schedule_batch.MultimodalInputs(mm_items=items)
        self._funcs = {api.modality(m): self._embed for m in {it.modality for it in workload.items}}
        self._embed_mm_inputs = api.mm_utils.embed_mm_inputs
        if self.fault.raises:
            self._embed_mm_inputs = _raising(self.fault.raises)

    def _embed(self, items) -> torch.Tensor:
        """The engine's data_embedding_func: our encoder over the engine's items."""
        try:
            ours = [self._our_item.get(id(it)) or self._ours[it.hash] for it in items]
        except KeyError as exc:
            raise EngineError(f"the engine asked to encode an item whose hash {exc} no request holds") from exc
        self.stats.encoder_calls += 1
        self.stats.encoded_items += len(ours)
        self.ledger.encoded_by(ours, items, self._rid)
        self.calls.call(self._rid[id(it)] for it in items if id(it) in self._rid)
        with self.encoder_region():
            rows = self.encoder.encode(ours).embeddings
        return rows.flip(0) if self.fault.flip else rows

    def run_step(self, step: Step) -> torch.Tensor:
        self.ledger.begin_step(step)
        try:
            return self._run_step(step)
        finally:  # what the engine's cache holds after the step, even a failed one
            # ``mm_cache``: the engine cache's entries in every release the adapter drives
            self.ledger.observe_entries(getattr(self._cache, "mm_cache", None), getattr(self._cache, "max_size", None))

    def _run_step(self, step: Step) -> torch.Tensor:
        self._hits.stored.clear()
        self.calls.step()
        ids = torch.cat([self._ids[e.rid][e.prefix:e.prefix + e.extend] for e in step.entries])
        ids = ids.to(self.device, non_blocking=True)
        mm = [e for e in step.entries if e.rid in self._inputs]
        if not mm:
            return self.embedding(ids.clamp(0, self.embedding.num_embeddings - 1))
        # the planted wrong-order split (tests only): a plain call otherwise (counted glue)
        restore = _plant_split(self.api, self.fault.split_order) if self.fault.split_order else None
        try:
            out = self._embed_mm_inputs(
                mm_inputs_list=[self._inputs[e.rid] for e in mm],
                extend_prefix_lens=[e.prefix for e in mm],
                extend_seq_lens=[e.extend for e in mm],
                input_ids=ids.clone(),  # the engine clamps it in place
                input_embedding=self.embedding,
                data_embedding_func_mapping=self._funcs,
            )
        finally:
            if restore is not None:
                restore()
        return out[0] if isinstance(out, tuple) else out


def _raising(message: str):
    def embed_mm_inputs(*args, **kwargs):
        raise RuntimeError(message)

    return embed_mm_inputs


def _plant_split(api, order: str):
    """The planted wrong-order split (tests): the engine's embedding modules see ``torch``
    through ``SplitPlant``; returns what puts their own back (after the step)."""
    modules = {id(m): m for m in (api.mm_utils, api.chunk_module) if hasattr(m, "torch")}.values()
    saved = [(m, m.torch) for m in modules]
    for m, t in saved:
        m.torch = adapter_common.SplitPlant(t, order)

    def restore() -> None:
        for m, t in saved:
            m.torch = t

    return restore


class SglangEngine(adapter_common.ServerStateHolder):
    """An imported sglang release, as the suite's engine: routines, arrival, labels."""

    def __init__(self, label: str, api: SglangApi | None = None):
        self.api = api or load_api()
        self.label = label
        self.version = self.api.version
        self.seams = dict(self.api.seams)

    def engine_tower(self, encoder):
        """``encoder`` with sglang's own vision tower (``--tower engine``: ``sglang_tower``),
        built once per encoder inside the server state; the records say so (seam ``tower``)."""
        from vlmpath.engines.sglang_tower import TOWER_SEAM, engine_tower

        return self.engine_tower_of(encoder, engine_tower, TOWER_SEAM)

    def server_state_class(self):
        from vlmpath.engines.sglang_server_state import SglangServerState

        return SglangServerState

    def routine(self, workload: Workload, encoder, pipeline, table: torch.Tensor, *, cache_bytes: int,
                encoder_region: Callable[[], AbstractContextManager] = nullcontext) -> SglangRoutine:
        # ``pipeline`` names the reference's strategies; the engine's own code has one of each.
        self.ensure_server_state(table.device)
        return SglangRoutine(self.api, workload, encoder, table, cache_bytes=cache_bytes,
                             encoder_region=encoder_region, faults=self.faults)

    def arrive(self, wl: Workload, hash_name: str) -> tuple[Workload, float, HashStats]:
        """Every distinct feature through the engine's shared-memory wrapper and hash."""
        seen: dict[int, int] = {}
        features = []
        for it in wl.items:
            if it.hash not in seen:
                seen[it.hash] = len(features)
                features.append(it.feature)
        hashes, seconds, digests = self.api.arrive(features)
        stats = HashStats(sha256_digests=digests)
        return with_item_hashes(wl, {old: hashes[i] for old, i in seen.items()}), seconds, stats
