"""What does one forward step of the multimodal embedding routine do, stage by stage?

``EmbedRoutine.run_step`` mirrors the engine's routine (embed-path.md sections 1-3) for a
batch of request chunks, with one named strategy per stage (``Pipeline``):

1. gather each modality's items per request (text-only requests stay in the batch);
2. encode: rows inside the step's chunks, through the ``encode`` strategy and the cache;
3. mask: ``isin(input_ids, pad_values).unsqueeze(-1)`` (a device bool, no sync);
4. count the step's placeholder tokens with the ``count`` strategy and check the rows
   against it strictly;
5. clamp ids into the vocabulary and look up the (seeded) text embedding table;
6. inject the rows with the ``inject`` strategy.

The ``hash`` stage (how the scheduler learns each item's content hash) runs when requests
arrive, before any step: see ``vlmpath.suite.measure``.

EVS videos (embed-path.md section 2, EVS): when the encode strategy's full path re-lays a
request's frame placeholders (``EncodeContext.relaid``), the routine rewrites that
request's token ids, remembers them for the request's later chunks (``request(rid)``),
rebuilds the step's ``input_ids`` before the mask, and tells the counter
(``ids_rewritten=True``): ``offsets`` then falls back to ``mask.sum().item()``, one sync
per step and modality, as in the engine. The engine's re-layout asserts
``len(input_ids) == extend_seq_len``, i.e. the EVS request is the whole batch; the
routine keeps that contract and raises ``EvsBatchError`` for a step in which an EVS
request's chunk path would run next to other requests (schedule EVS requests alone).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.pipelines import Pipeline
from vlmpath.measure.cache import EmbeddingCache
from vlmpath.measure.evs_layout import evs_relayout_ids
from vlmpath.measure.items import Item, Request, Step
from vlmpath.measure.path_ledger import PathLedger
from vlmpath.measure.workload import Workload
from vlmpath.paths.count import COUNTERS, CountQuery
from vlmpath.paths.encode import (
    ENCODE_STRATEGIES,
    EncodeContext,
    EncodeStats,
    RequestChunk,
    chunk_is_active,
)
from vlmpath.paths.inject import INJECTORS, check_length

DEFAULT_CACHE_BYTES = 100 * 2**20  # the engine's default SGLANG_VLM_CACHE_SIZE_MB


def text_table(vocab_size: int, hidden: int, dtype: torch.dtype, device: torch.device | str,
               seed: int = 0) -> torch.Tensor:
    """The language model's token embedding table, seeded (values do not matter; shapes do)."""
    gen = torch.Generator().manual_seed(seed + 17)
    return torch.randn(vocab_size, hidden, generator=gen).to(device=device, dtype=dtype)


class EvsBatchError(VlmpathError):
    """An EVS request shares a forward step with other requests."""


def cache_budget_bytes(workload: Workload, table: torch.Tensor, default: int) -> int:
    """The embedding cache's budget for ``workload``: its preset's own, in rows of its
    encoder's output (``Workload.cache_rows``: the cache presets fit it to their items; a row
    is as wide and of the dtype of the text ``table``), else ``default``. One home: the
    measured case, the asv benchmark and a bare routine agree."""
    if workload.cache_rows is None:
        return default
    return workload.cache_rows * table.shape[-1] * table.element_size()


class EmbedRoutine:
    """The embedding routine for one workload, one encoder and one pipeline. Holds the
    per-run state the engine holds per scheduler process: the cache and the counters."""

    def __init__(self, workload: Workload, encoder, pipeline: Pipeline, table: torch.Tensor, *,
                 cache_bytes: int | None = None,
                 encoder_region: Callable[[], AbstractContextManager] = nullcontext):
        self.workload, self.pipeline, self.table = workload, pipeline, table
        if cache_bytes is None:  # the preset's own budget (a cache preset's point), else the engine's default
            cache_bytes = cache_budget_bytes(workload, table, DEFAULT_CACHE_BYTES)
        self.device = table.device
        self.encode = ENCODE_STRATEGIES[pipeline.encode]
        self.inject = INJECTORS[pipeline.inject]
        self.count = COUNTERS[pipeline.count]
        self.cache = EmbeddingCache(cache_bytes)
        self.stats = EncodeStats()
        self.ledger = PathLedger(workload)
        self.ctx = EncodeContext(encoder, self.cache, self.stats, encoder_region, ledger=self.ledger)
        # EVS: requests whose frame placeholders were re-laid, by rid (ids and items as the
        # rest of the schedule sees them). Per routine, like the engine's per-request state.
        self._relaid: dict[int, Request] = {}

    def request(self, rid: int) -> Request:
        """A request as the routine sees it now: re-laid if an EVS video of it was encoded."""
        return self._relaid.get(rid) or self.workload.requests[rid]

    def _check_evs_alone(self, step: Step, reqs: list[Request]) -> None:
        if len(step.entries) < 2:
            return
        for r, e in zip(reqs, step.entries):
            evs = tuple(it for it in r.items if it.frame_tokens)
            if evs and chunk_is_active(RequestChunk(e.rid, evs, e.prefix, e.extend)):
                raise EvsBatchError(
                    f"step with requests {[x.rid for x in step.entries]}: request {e.rid} holds an EVS "
                    "video whose frame re-layout rewrites input_ids, which the engine supports only when "
                    "that request is the whole batch (it asserts len(input_ids) == extend_seq_len); "
                    "schedule EVS requests alone, one per forward step")

    def _relay(self, rid: int, old: tuple[Item, ...], new: tuple[Item, ...]) -> bool:
        """Remember a request's re-laid items and ids; True when its layout changed now."""
        new_of = {id(o): n for o, n in zip(old, new) if n is not o}
        if not new_of:
            return False  # already laid out this way (a later chunk)
        if rid in self._relaid:
            # A later chunk re-encoded (cache eviction) and got other per-frame counts: the
            # earlier chunks were placed with the old layout, so nothing consistent is left.
            raise VlmpathError(f"request {rid}: re-encoding its EVS video gave other per-frame counts "
                               "than its earlier chunks used; the encoder must be deterministic")
        req = self.request(rid)
        ids = req.input_ids
        for it in req.items:
            if id(it) in new_of:
                ids = evs_relayout_ids(ids, it, new_of[id(it)])
        self._relaid[rid] = Request(rid, ids, tuple(new_of.get(id(it), it) for it in req.items))
        return True

    def run_step(self, step: Step) -> torch.Tensor:
        """Input embeddings ``[step tokens, hidden]`` of one forward step."""
        self.ledger.begin_step(step)
        try:
            return self._run_step(step)
        finally:  # what the cache holds after the step, even a failed one
            self.ledger.evictions = self.cache.stats.evictions
            self.ledger.observe(self.cache.tensors(), self.cache.max_bytes)

    def _run_step(self, step: Step) -> torch.Tensor:
        reqs = [self.request(e.rid) for e in step.entries]
        self._check_evs_alone(step, reqs)
        host_ids = torch.cat([r.input_ids[e.prefix:e.prefix + e.extend] for r, e in zip(reqs, step.entries)])
        input_ids = host_ids.to(self.device, non_blocking=True)
        modalities = sorted({it.modality for r in reqs for it in r.items})
        injections = []
        for modality in modalities:
            chunks = [RequestChunk(e.rid, items, e.prefix, e.extend)
                      for r, e in zip(reqs, step.entries)
                      if (items := tuple(it for it in r.items if it.modality == modality))]
            self.ctx.relaid.clear()
            rows = self.encode(chunks, self.ctx)
            relaid = dict(self.ctx.relaid)  # EVS: the chunk path re-laid these requests
            self.ctx.relaid.clear()
            if relaid:
                changed = [self._relay(c.rid, c.items, relaid[c.rid]) for c in chunks if c.rid in relaid]
                if any(changed):  # the step's ids from the re-laid requests
                    reqs = [self.request(e.rid) for e in step.entries]
                    input_ids = torch.cat([r.input_ids[e.prefix:e.prefix + e.extend] for r, e in
                                           zip(reqs, step.entries)]).to(self.device, non_blocking=True)
                chunks = [RequestChunk(c.rid, relaid.get(c.rid, c.items), c.prefix, c.extend) for c in chunks]
            pads = torch.tensor([it.pad_value for c in chunks for it in c.items], dtype=torch.int64)
            mask = torch.isin(input_ids, pads.to(self.device, non_blocking=True)).unsqueeze(-1)
            count = self.count(CountQuery(
                mask,
                tuple(c.prefix for c in chunks),
                tuple(c.extend for c in chunks),
                tuple(tuple(o for it in c.items for o in it.offsets) for c in chunks),
                ids_rewritten=bool(relaid),  # EVS: the chunk path handed back new input_ids
            ))
            if rows is None:
                rows = self.table.new_empty((0, self.table.shape[1]))
            check_length(rows, count, f"step with {modality} items")
            if count:
                injections.append((mask, rows))
        ids = input_ids.clamp(0, self.table.shape[0] - 1)  # pad values are >= 1e6
        embeds = torch.nn.functional.embedding(ids, self.table)
        for mask, rows in injections:
            self.inject(embeds, mask, rows)
        return embeds
