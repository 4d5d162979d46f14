"""Which parts of sglang's multimodal embedding path does this installed release have?

``SglangApi.load()`` imports the release in this process (after the torchvision shim, see
``torchvision_shim``) and finds every seam the adapter drives *by inspection* (which
modules, functions, classes and parameters exist), never by version string, and records
the choice in ``seams`` (written into every record as ``engine_seams``):

- ``cache``: the module whose ``init_mm_embedding_cache`` owns the global embedding cache
  (``mm_schedule`` from 0.5.23 on, ``mm_utils`` before);
- ``chunk_encoding``: ``batched_cross_request`` (one encoder call across requests,
  ``_batch_encode_per_image_misses``) or ``per_request``;
- ``count``: ``host_offsets`` (``_count_mm_tokens_in_extend``) or ``mask_sum_item``;
- ``scatter``: ``cumsum_index_copy`` (``_scatter_mm_embedding``), ``masked_scatter_`` or
  ``where_index`` (read from ``embed_mm_inputs``' source);
- ``pad``: ``padding_sequence`` (wide cyclic sentinels) or ``pad_value``;
- ``shm``: ``precomputed_hash`` (the tokenizer's hash rides along the shared-memory
  wrapper), ``rehash_after_materialize`` (``hash_feature`` cannot read the wrapper), or
  ``none``.

What the adapter cannot do without (``embed_mm_inputs``, ``MultimodalDataItem``,
``MultimodalInputs``, ``init_mm_embedding_cache``, ``Modality``) raises one
``EngineError`` naming every missing piece.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch

from vlmpath.core.errors import EngineError, VlmpathError


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@dataclass
class SglangApi:
    """The imported modules and the seams this release offers."""

    version: str
    mm_utils: object
    schedule_batch: object
    cache_module: object
    chunk_module: object
    seams: dict = field(default_factory=dict)

    @classmethod
    def load(cls) -> SglangApi:
        from vlmpath.engines.torchvision_shim import ensure_torchvision_importable

        shimmed = ensure_torchvision_importable()
        warnings.filterwarnings("ignore")  # the AWQ/GGUF "only CUDA" warnings of the import chain
        try:
            import sglang
            from sglang.srt.managers import mm_utils, schedule_batch
        except ImportError as exc:
            raise EngineError(f"sglang does not import in {sys.executable}: {exc}; build the engine "
                              "environment with `vlmpath engine install sglang==X`") from exc
        wanted = {
            "mm_utils.embed_mm_inputs": getattr(mm_utils, "embed_mm_inputs", None),
            "mm_utils.init_mm_embedding_cache": getattr(mm_utils, "init_mm_embedding_cache", None),
            "schedule_batch.MultimodalDataItem": getattr(schedule_batch, "MultimodalDataItem", None),
            "schedule_batch.MultimodalInputs": getattr(schedule_batch, "MultimodalInputs", None),
            "schedule_batch.Modality": getattr(schedule_batch, "Modality", None),
        }
        missing = [k for k, v in wanted.items() if v is None]
        if missing:
            raise EngineError(f"sglang {getattr(sglang, '__version__', '?')} at {os.path.dirname(sglang.__file__)} "
                              f"lacks {', '.join(missing)}: the adapter drives the embedding path through "
                              "these; this release cannot be measured")
        cache_module = importlib.import_module(mm_utils.init_mm_embedding_cache.__module__)
        sched = _optional("sglang.srt.managers.mm_schedule")
        chunk = sched if sched is not None and hasattr(sched, "get_embedding_and_mask") else mm_utils
        api = cls(getattr(sglang, "__version__", "unknown"), mm_utils, schedule_batch, cache_module, chunk)
        api.seams = api._detect(shimmed)
        return api

    # --- seams -----------------------------------------------------------------------------
    def _detect(self, shimmed: list[str]) -> dict:
        mu, item_cls = self.mm_utils, self.schedule_batch.MultimodalDataItem
        src = inspect.getsource(mu.embed_mm_inputs)
        if hasattr(mu, "_scatter_mm_embedding"):
            scatter = "cumsum_index_copy"
        elif "masked_scatter_" in src:
            scatter = "masked_scatter_"
        elif "torch.where" in src:
            scatter = "where_index"
        else:
            scatter = "unknown"
        return {
            "cache": f"{self.cache_module.__name__}.init_mm_embedding_cache",
            "chunk_encoding": ("batched_cross_request" if hasattr(self.chunk_module, "_batch_encode_per_image_misses")
                               else "per_request"),
            "chunk_module": self.chunk_module.__name__,
            "count": "host_offsets" if hasattr(self.chunk_module, "_count_mm_tokens_in_extend") else "mask_sum_item",
            "scatter": scatter,
            "pad": "padding_sequence" if hasattr(item_cls, "padding_sequence") else "pad_value",
            "shm": self._shm_seam(),
            "torchvision_shim": ",".join(shimmed) or "none",
        }

    def _shm_seam(self) -> str:
        shm = getattr(self.mm_utils, "ShmPointerMMData", None)
        if shm is None or not hasattr(self.mm_utils, "hash_feature"):
            return "none"
        if "precomputed_hash" in inspect.signature(shm.__init__).parameters:
            return "precomputed_hash"
        return "rehash_after_materialize"

    # --- pieces the routine uses -----------------------------------------------------------
    def modality(self, name: str):
        return getattr(self.schedule_batch.Modality, name.upper())

    def padding(self, item, n: int) -> list[int]:
        """The placeholder ids the engine writes for ``n`` positions of ``item``."""
        if self.seams["pad"] == "padding_sequence":
            return list(item.padding_sequence(n))
        return [item.pad_value] * n

    def new_cache(self, nbytes: int):
        """Initialise the engine's global embedding cache at ``nbytes`` and return it."""
        self.mm_utils.init_mm_embedding_cache(nbytes)
        cache = getattr(self.cache_module, "embedding_cache", None)
        if cache is None:
            raise EngineError(f"{self.cache_module.__name__}.init_mm_embedding_cache left no embedding_cache; "
                              "the adapter cannot find the engine's cache")
        return cache

    # --- arrival ---------------------------------------------------------------------------
    def arrive(self, features: list[torch.Tensor]) -> tuple[list[int], float, int]:
        """Send each feature through the engine's shared-memory wrapper and learn its hash on
        the receiving side, as this release does; returns (hashes, receiver seconds, digests
        computed by the receiver)."""
        mu, seam = self.mm_utils, self.seams["shm"]
        if seam == "none":  # no wrapper: the scheduler hashes what it gets
            t0 = time.perf_counter()
            hashes = [int(mu.hash_feature(f)) for f in features]
            return hashes, time.perf_counter() - t0, len(features)
        shm_cls = mu.ShmPointerMMData
        if seam == "precomputed_hash":  # the tokenizer's work, not timed
            sent = [shm_cls(f, precomputed_hash=int(mu.hash_feature(f))) for f in features]
        else:
            sent = [shm_cls(f) for f in features]
        received = pickle.loads(pickle.dumps(sent))
        done: set[int] = set()  # materialize() releases and unlinks a segment: once each

        def materialize(i: int) -> torch.Tensor:
            done.add(i)
            return received[i].materialize()

        try:
            t0 = time.perf_counter()
            if seam == "precomputed_hash":
                hashes = [int(mu.hash_feature(r)) for r in received]
                digests = 0
            else:  # hash_feature cannot read the wrapper: hash the materialised tensor
                hashes = [int(mu.hash_feature(materialize(i))) for i in range(len(received))]
                digests = len(received)
            seconds = time.perf_counter() - t0
        finally:
            for i in range(len(received)):
                if i not in done:
                    materialize(i)  # the scheduler's copy; frees the segment
        return hashes, seconds, digests


def load_api() -> SglangApi:
    """``SglangApi.load()`` with any import-time failure turned into an ``EngineError``."""
    try:
        return SglangApi.load()
    except VlmpathError:
        raise
    except Exception as exc:  # a broken source tree: say which and why, the run goes on
        raise EngineError(f"sglang could not be loaded: {type(exc).__name__}: {exc}") from exc
