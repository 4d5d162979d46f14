"""Which names do the strategy registries and the workload presets accept, without torch?

The registries themselves (``paths.encode.ENCODE_STRATEGIES``, ``paths.inject.INJECTORS``,
``paths.count.COUNTERS``, ``paths.hashing.HASH_PATHS``, ``measure.workload.PRESETS``) live in
modules that import torch, which takes seconds; a misspelt ``--encode batchd`` must be
refused in well under one (``core.validate.check_choices``, called by the CLI before any
heavy import). So the names are also listed here, and tests/test_bad_input.py fails when
a registry and this table disagree: a new strategy is one more name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: stage flag -> (the registry's kind, its names); the kinds read as the registries' messages.
STAGE_NAMES: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType({
    "encode": ("encode strategy", ("batched", "batched_by_span", "per_request")),
    "inject": ("inject strategy", ("cumsum_index_copy", "masked_scatter", "where_index")),
    "count": ("count strategy", ("mask_sum", "offsets")),
    "hash": ("hash path", ("blake3", "forwarded", "rehash", "xxh3")),
})
#: The workload presets (``measure.workload.PRESETS``), in its order.
PRESET_NAMES: tuple[str, ...] = ("many_small_images", "few_large_images", "video", "multi_region",
                                 "chunked_long", "cache_reuse", "mixed", "evs_video", "interleaved_modalities",
                                 # issue 38 (history): the split-order and cache presets
                                 "split_order", "cache_oversize", "cache_dup_chunked", "multi_span_chunks",
                                 "cache_dup_pressure", "key_collision")
#: A workload read from a file is named ``trace:PATH``.
TRACE_PREFIX = "trace:"
