"""Which encoders are there, which model family does each belong to, and how is one built?

The real registries, computed once from the model-family package
(``vlmpath.measure.families``): ``FAMILIES`` (family name -> ``Family``) and ``ENCODERS``
(encoder name -> factory, the union of the families' encoders; ``build_encoder``, the CLI
and the suite read it). ``family_of`` answers "whose arithmetic and tower does this
encoder use". Every encoder satisfies the ``Encoder`` protocol (defined with ``Family`` in
``families`` and re-exported here), reporting each item's true row count in
``EncodeOutput.item_rows``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import torch

from vlmpath.core.errors import UnknownNameError
from vlmpath.core.registry import Registry
from vlmpath.measure.families import (
    Encoder,
    EncoderFactory,
    Family,
    discover,
)

FAMILIES_PACKAGE = "vlmpath.measure.families"
#: The encoder of a workload that names none (a trace without an ``encoder`` line).
DEFAULT_ENCODER = "qwen2_5_vl"


def encoder_registry(families: Mapping[str, Family]) -> Registry[EncoderFactory]:
    """The union of ``families``' encoders (``discover`` already refused duplicate names)."""
    return Registry("encoder", {name: f for fam in families.values() for name, f in fam.encoders.items()})


def family_index(families: Mapping[str, Family]) -> Mapping[str, Family]:
    """Encoder name -> its family."""
    return MappingProxyType({name: fam for fam in families.values() for name in fam.encoders})


FAMILIES: Mapping[str, Family] = discover(FAMILIES_PACKAGE)
ENCODERS: Registry[EncoderFactory] = encoder_registry(FAMILIES)
_FAMILY_OF: Mapping[str, Family] = family_index(FAMILIES)


def family_of(encoder: str) -> Family:
    """The family whose arithmetic and tower ``encoder`` uses; unknown names are one error
    listing the known encoders."""
    try:
        return _FAMILY_OF[encoder]
    except (KeyError, TypeError):
        raise UnknownNameError("encoder", encoder, ENCODERS) from None


def build_encoder(name: str, scale: str, device: torch.device | str = "cpu", seed: int = 0,
                  weights_dir: str | Path | None = None) -> Encoder:
    """An encoder by registry name around a freshly built tower of its family."""
    fam = family_of(name)
    tower = fam.build_tower(scale, device, seed, weights_dir)
    return fam.encoders[name](tower, torch.device(device), seed)
