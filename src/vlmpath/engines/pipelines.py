"""Which named pipelines (one strategy per stage of the routine) are there?

``Pipeline`` and the registry of named pipelines (``NAMED_PIPELINES``: ``default``, the
stages after #26082, and ``legacy``, the same stages before it). Kept apart from the
routine (``engines.reference``, which needs torch) so that the CLI can offer the names as
``--pipeline`` choices without importing torch (the comment workflow installs none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Pipeline:
    """One strategy name per stage of the routine."""

    encode: str = "batched"
    inject: str = "masked_scatter"
    count: str = "offsets"
    hash: str = "forwarded"

    def validate(self) -> Pipeline:
        """Raise ``UnknownNameError`` (naming the choices) for any unknown stage name."""
        # The strategy registries import torch: read only when a pipeline is checked.
        from vlmpath.paths.count import COUNTERS
        from vlmpath.paths.encode import ENCODE_STRATEGIES
        from vlmpath.paths.hashing import HASH_PATHS
        from vlmpath.paths.inject import INJECTORS

        ENCODE_STRATEGIES[self.encode]
        INJECTORS[self.inject]
        COUNTERS[self.count]
        HASH_PATHS[self.hash]
        return self

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @property
    def label(self) -> str:
        return "+".join(f"{v}" for v in asdict(self).values())


# After #26082 (and with correct batching); and the same stages before #26082.
DEFAULT_PIPELINE = Pipeline()
LEGACY_PIPELINE = Pipeline(encode="batched", inject="where_index", count="mask_sum", hash="rehash")
NAMED_PIPELINES: Mapping[str, Pipeline] = MappingProxyType({"default": DEFAULT_PIPELINE, "legacy": LEGACY_PIPELINE})
