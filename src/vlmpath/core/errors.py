"""Which errors does vlmpath raise on bad input, and how do they read?

Every user-facing failure is a ``VlmpathError`` whose message names the offending input
and says how to fix it. The CLI prints the message (no traceback) and exits with 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'batched'?)`` when a choice is close to ``name`` (difflib), else ``""``."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class VlmpathError(Exception):
    """Bad input or environment: the message names the input and the fix."""


class UnknownNameError(VlmpathError, KeyError):
    """A strategy, preset, encoder or benchmark name that no registry knows."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        super().__init__(
            f"unknown {kind} {name!r}{did_you_mean(name, self.choices)}: choose one of {', '.join(self.choices)}"
        )

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return self.args[0]


class LengthMismatchError(VlmpathError, RuntimeError):
    """Encoder rows do not match what the placeholders or the mask expect."""


class EngineError(VlmpathError):
    """An engine spec, environment or release that vlmpath cannot use as asked
    (re-exported by ``vlmpath.engines.base``, where engine code imports it from)."""


class EngineOptionError(EngineError):
    """An engine option the engine does not declare, a value not among its choices, or one
    the release cannot honour (a model runner it does not have): refused before any case is
    measured (the CLI exits 2), not a failed case."""
