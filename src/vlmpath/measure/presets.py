"""Which workload presets are there, and what is each one, without importing torch?

The one home of the preset names: ``PRESETS``, a ``Registry`` of ``PresetEntry`` rows, each
saying what the preset is, which encoder's family gives its arithmetic, its own fixed seed
and its builder, named as ``Lazy("module:function")`` and imported only by
``workload.build_preset`` (the builders need torch; reading this table does not, so the CLI
refuses a misspelt ``--workload vidoe`` from it at once: ``suite.inputs.check_choices``).

A preset's random stream is ``seed * SEED_STRIDE + entry.seed``: the entry's own number,
never its place in the table, so re-ordering the table or adding a preset before another
changes no workload. The seeds of the first fifteen are the positions they held when the
stream was still derived from the order (tests/test_preset_table.py pins their bytes).
Adding a preset: docs/contributing.md, "Adding a workload preset".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from vlmpath.core.errors import VlmpathError
from vlmpath.core.registry import Lazy, Registry

#: A workload read from a file is named ``trace:PATH`` (``catalog.workload_by_name``).
TRACE_PREFIX = "trace:"
#: Streams of one user seed are ``SEED_STRIDE`` apart; a preset's own seed stays below it.
SEED_STRIDE = 7919


@dataclass(frozen=True)
class PresetEntry:
    """One named workload preset."""

    name: str
    summary: str         # what it holds, one line
    encoder: str         # encoder registry name: its family's processor arithmetic
    seed: int            # its own stream; unique in the table, fixed once released
    # ``(workload.PresetContext) -> (request specs, chunk size)``; the context's ``t()`` and
    # variable regions draw from the preset's stream, in the order the builder calls them.
    specs: Lazy
    # ``(requests) -> (chunk size or None to keep the builder's, cache rows)`` for a preset
    # whose chunk size or cache budget follows from its built requests; None: neither.
    after_build: Lazy | None = None
    # Issue 38's path presets (split order, the cache, chunking): their numbers are accuracy
    # and the path ledger's counts, so the engine tests measure them in a set of their own.
    path_preset: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.seed < SEED_STRIDE:
            raise VlmpathError(f"preset {self.name!r}: seed {self.seed} must be in [0, {SEED_STRIDE})")

    def builders(self) -> tuple[Callable, Callable | None]:
        """``specs`` and ``after_build`` imported (an entry naming nothing: a one-line error)."""
        return self.specs.load(), (self.after_build.load() if self.after_build is not None else None)

    def stream(self, seed: int) -> int:
        """The random stream of this preset under the user's ``seed``."""
        return seed * SEED_STRIDE + self.seed


def preset_table(entries: Iterable[PresetEntry]) -> Registry[PresetEntry]:
    """The registry of ``entries`` in their order; two entries may share neither a name nor a
    seed (a shared seed would give two presets one random stream)."""
    entries = list(entries)
    for field in ("name", "seed"):
        seen: dict[object, str] = {}
        for e in entries:
            value = getattr(e, field)
            if value in seen:
                raise VlmpathError(f"presets {seen[value]!r} and {e.name!r} share the {field} {value!r}: "
                                   f"give {e.name!r} its own (the next free seed is "
                                   f"{max(x.seed for x in entries) + 1})")
            seen[value] = e.name
    return Registry("workload preset", {e.name: e for e in entries})


def _specs(name: str, module: str = "preset_specs") -> Lazy:
    return Lazy(f"vlmpath.measure.{module}:{name}")


_QWEN = "qwen2_5_vl"
#: Every preset, in the order the help text, ``vlmpath measure`` and the asv suite list them.
PRESETS: Registry[PresetEntry] = preset_table([
    PresetEntry("many_small_images", "many requests, two small images each", _QWEN, 0,
                _specs("many_small_images")),
    PresetEntry("few_large_images", "two requests, one large image each, no chunking", _QWEN, 1,
                _specs("few_large_images")),
    PresetEntry("video", "two requests, one video each", _QWEN, 2, _specs("video")),
    PresetEntry("multi_region", "MiniCPM-like items of N regions (one item, N x region rows), a single-region "
                "one first", "multi_region", 3, _specs("multi_region")),
    PresetEntry("chunked_long", "three images per request under a short chunk: items cut by chunk boundaries",
                _QWEN, 4, _specs("chunked_long")),
    PresetEntry("cache_reuse", "two images shared by six requests: cache hits", _QWEN, 5, _specs("cache_reuse")),
    PresetEntry("mixed", "images, a video, a text-only request and one image twice", _QWEN, 6, _specs("mixed")),
    PresetEntry("evs_video", "one EVS video (per-frame token counts decided by the data), chunked inside it",
                "evs", 7, _specs("evs_video")),
    PresetEntry("interleaved_modalities", "cache misses whose modalities alternate in prompt order, one step",
                _QWEN, 8, _specs("interleaved_modalities")),
    PresetEntry("split_order", "one batched call of five distinct row counts in an order no reversal or "
                "rotation keeps", _QWEN, 9, _specs("split_order", "path_presets"), path_preset=True),
    PresetEntry("cache_oversize", "a small cache and one item larger than all of it between normal ones",
                _QWEN, 10, _specs("cache_oversize", "path_presets"),
                _specs("oversize_after", "path_presets"), path_preset=True),
    PresetEntry("cache_dup_chunked", "X, W, X in one chunked request, then Y, X; a cache of 2.5 items",
                _QWEN, 11, _specs("cache_dup_chunked", "path_presets"),
                _specs("two_and_a_half_items", "path_presets"), path_preset=True),
    PresetEntry("multi_span_chunks", "multi-span items under chunk boundaries inside and between their spans",
                "multi_region", 12, _specs("multi_span_chunks", "path_presets"), path_preset=True),
    PresetEntry("cache_dup_pressure", "X, W, Z, X in one chunked request; a cache of 2.5 items",
                _QWEN, 13, _specs("cache_dup_pressure", "path_presets"),
                _specs("two_and_a_half_items", "path_presets"), path_preset=True),
    PresetEntry("key_collision", "distinct items under one key: transposed grids of equal bytes, a forced key",
                _QWEN, 14, _specs("key_collision", "path_presets"), path_preset=True),
])
#: The path presets (issue 38), in table order.
PATH_PRESETS: tuple[str, ...] = tuple(n for n, e in PRESETS.items() if e.path_preset)
