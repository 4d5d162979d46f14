"""Which closed sets of values do ``--tower`` and ``--counter`` take?

Each is a ``StrEnum`` (a member is its own name: it compares equal to ``"ours"``, is
written into JSON and printed as its name), parsed once where it enters (``parse``: the
CLI's argparse ``type``) and handed on as a member. ``core.scales.Scale`` is the same
kind of value, with a row of its own per scale. An engine's own choices are not here: its
registry entry declares them (``engines.registry.EngineOption``, ``engines.engine_options``).
"""

from __future__ import annotations

from enum import StrEnum

from vlmpath.core.errors import VlmpathError, did_you_mean


def parse_member(cls: type[StrEnum], text: object, given: str):
    """The member of ``cls`` named ``text``; otherwise one line naming ``given``, a close
    name and the choices."""
    if isinstance(text, cls):
        return text
    names = [m.value for m in cls]
    if isinstance(text, str) and text in names:
        return cls(text)
    raise VlmpathError(f"{given} {text!r}{did_you_mean(str(text), names)}: choose one of {', '.join(names)}")


class Tower(StrEnum):
    """Which vision tower an engine case runs: ours (the seeded transformers tower) or the
    engine's own (its adapter's ``engine_tower``)."""

    OURS = "ours"
    ENGINE = "engine"

    @classmethod
    def parse(cls, text: object, *, given: str = "--tower") -> Tower:
        return parse_member(cls, text, given)


class Counter(StrEnum):
    """How the count gates count: ``ops`` natively (Python bytecodes and aten elements,
    seconds) or ``callgrind`` (CPU instructions under Valgrind, minutes)."""

    OPS = "ops"
    CALLGRIND = "callgrind"

    @classmethod
    def parse(cls, text: object, *, given: str = "--counter") -> Counter:
        return parse_member(cls, text, given)

