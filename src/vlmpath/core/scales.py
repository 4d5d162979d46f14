"""Which workload scales are there, and what does each one need?

The one scale table. A ``Scale`` names a size of everything at once: the vision tower's
configuration (each model family keys its towers by scale name), the workload shapes
(``measure.workload.SHAPES``) and the trace limits (``core.validate.LIMITS``). Every
``--scale`` choice and the "needs a GPU" checks read it from here;
``tests/test_scales.py`` checks that every per-scale table covers exactly these names.

A scale is parsed once where it enters (``Scale.parse``: the CLI's ``--scale`` and the
benchmark processes' ``VLMPATH_SCALE``, ``suite.bench_env``) and travels as a ``Scale``
from there. It is a ``StrEnum``, so a member is its own name: it indexes the per-scale
tables, is written into records and JSON as ``"tiny"``, and prints as ``tiny``.

Adding a scale: one member here, then its entry in each per-scale table the test names.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from vlmpath.core.errors import VlmpathError, did_you_mean


class Scale(StrEnum):
    """A workload scale: its name (the value), whether it needs a GPU, one line of help."""

    gpu: bool              # needs a CUDA or ROCm device (a CPU run refuses it; asv skips)
    description: str       # one line, shown in ``--scale`` help

    def __new__(cls, value: str, gpu: bool, description: str):
        member = str.__new__(cls, value)
        member._value_ = value
        member.gpu, member.description = gpu, description
        return member

    # In the order people meet them: the CPU scale first (also the default).
    TINY = ("tiny", False, "small towers and media for a 2-core CPU (the default)")
    FULL = ("full", True, "the real model dimensions in bf16 and full-size media; needs a GPU")

    def __repr__(self) -> str:  # messages quote a scale as they quote its name: 'tiny'
        return repr(self.value)

    @classmethod
    def parse(cls, text: object, *, given: str = "--scale") -> Scale:
        """The scale ``text`` names; otherwise one error naming ``given`` (the flag or the
        ``VARIABLE=`` it came from), a close name and the choices."""
        if isinstance(text, cls):
            return text
        if isinstance(text, str) and text in cls._value2member_map_:
            return cls(text)
        shown = f"{given}{text!r}" if given.endswith("=") else f"{given} {text!r}"
        raise VlmpathError(f"{shown} is not a scale{did_you_mean(str(text), SCALES)}: "
                           f"choose one of {', '.join(SCALES)}")


#: Each scale by name (read-only), in ``Scale``'s order.
SCALES: Mapping[str, Scale] = MappingProxyType({s.value: s for s in Scale})
DEFAULT_SCALE = Scale.TINY


def scale_help() -> str:
    """``--scale`` help text: each scale with its one-line description."""
    return "; ".join(f"{s.value}: {s.description}" for s in Scale)
