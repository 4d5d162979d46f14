"""Which workload scales are there, and what does each one need?

The one scale table. A ``Scale`` names a size of everything at once: the vision tower's
configuration (each model family keys its towers by scale name), the workload shapes
(``measure.workload.SHAPES``) and the trace limits (``core.validate.LIMITS``). Every
``--scale`` choice, ``check_scale`` and the "needs a GPU" checks read it from here;
``tests/test_scales.py`` checks that every per-scale table covers exactly these names.

Adding a scale: one row here, then its entry in each per-scale table the test names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from vlmpath.core.errors import VlmpathError


@dataclass(frozen=True)
class Scale:
    name: str
    gpu: bool              # needs a CUDA or ROCm device (a CPU run refuses it; asv skips)
    description: str       # one line, shown in ``--scale`` help


#: In the order people meet them: the CPU scale first (also the default).
SCALES: Mapping[str, Scale] = MappingProxyType({s.name: s for s in (
    Scale("tiny", False, "small towers and media for a 2-core CPU (the default)"),
    Scale("full", True, "the real model dimensions in bf16 and full-size media; needs a GPU"),
)})
DEFAULT_SCALE = "tiny"


def check_scale(name: str) -> str:
    """``name`` when it is a scale; otherwise one error naming the choices."""
    if not isinstance(name, str) or name not in SCALES:
        raise VlmpathError(f"unknown scale {name!r}: choose one of {', '.join(SCALES)}")
    return name


def scale_help() -> str:
    """``--scale`` help text: each scale with its one-line description."""
    return "; ".join(f"{s.name}: {s.description}" for s in SCALES.values())
