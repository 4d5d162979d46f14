"""Which errors does vlmpath raise on bad input, and how do they read?

Every user-facing failure is a ``VlmpathError`` whose message names the offending input
and says how to fix it. The CLI prints the message (no traceback) and exits with 2.
"""

from __future__ import annotations

from collections.abc import Iterable


class VlmpathError(Exception):
    """Bad input or environment: the message names the input and the fix."""


class UnknownNameError(VlmpathError, KeyError):
    """A strategy, preset, encoder or benchmark name that no registry knows."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        super().__init__(
            f"unknown {kind} {name!r}: choose one of {', '.join(self.choices)}"
        )

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return self.args[0]


class LengthMismatchError(VlmpathError, RuntimeError):
    """Encoder rows do not match what the placeholders or the mask expect."""


class EngineError(VlmpathError):
    """An engine spec, environment or release that vlmpath cannot use as asked
    (re-exported by ``vlmpath.engines.base``, where engine code imports it from)."""
