"""Which strategies compete at each stage of the embedding path, by name, without torch?

The one home of the four stage registries: ``ENCODE_STRATEGIES`` (``paths.encode``),
``INJECTORS`` (``paths.inject``), ``COUNTERS`` (``paths.count``) and ``HASH_PATHS``
(``paths.hashing``). Each entry names its implementation as ``Lazy("module:attribute")``
(``core.registry``): the names, ``known_bad`` and ``default_names()`` are read here without
importing torch (seconds), so the CLI refuses a misspelt ``--encode batchd`` from this
table in well under one (``suite.inputs.check_choices``); ``REGISTRY[name]`` imports the
stage's module and returns the strategy, only where it runs.

A new strategy is its function (or ``HashPath``) in the stage's module and its entry here
(docs/contributing.md, "Adding a strategy"). ``STAGES`` maps the CLI's stage flags to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from vlmpath.core.registry import Lazy, Registry

# The values' types (``encode.EncodeStrategy``, ``inject.Injector``, ``count.CountQuery``,
# ``hashing.HashPath``) live in the stage modules, which need torch and which this module
# must not import, not even for annotations (each of them imports this one).
ENCODE_STRATEGIES: Registry[Callable[..., Any]] = Registry("encode strategy", {
    "per_request": Lazy("vlmpath.paths.encode:per_request"),
    "batched": Lazy("vlmpath.paths.encode:batched"),
    "batched_by_span": Lazy("vlmpath.paths.encode:batched_by_span"),
}, known_bad=frozenset({"batched_by_span"}))  # the faithful replay of #25910: out of the default suite
INJECTORS: Registry[Callable[..., None]] = Registry("inject strategy", {
    "where_index": Lazy("vlmpath.paths.inject:where_index"),
    "masked_scatter": Lazy("vlmpath.paths.inject:masked_scatter"),
    "cumsum_index_copy": Lazy("vlmpath.paths.inject:cumsum_index_copy"),
})
COUNTERS: Registry[Callable[..., int]] = Registry("count strategy", {
    "mask_sum": Lazy("vlmpath.paths.count:mask_sum"),
    "offsets": Lazy("vlmpath.paths.count:offsets"),
})
HASH_PATHS: Registry[Any] = Registry("hash path", {
    "rehash": Lazy("vlmpath.paths.hashing:REHASH"),
    "forwarded": Lazy("vlmpath.paths.hashing:FORWARDED"),
    "xxh3": Lazy("vlmpath.paths.hashing:XXH3"),
    "blake3": Lazy("vlmpath.paths.hashing:BLAKE3"),
})

#: The CLI's stage flag (``--encode``, ``--inject``, ``--count``, ``--hash``) -> its registry.
STAGES: Mapping[str, Registry[Any]] = MappingProxyType({
    "encode": ENCODE_STRATEGIES, "inject": INJECTORS, "count": COUNTERS, "hash": HASH_PATHS})
