"""Which engine runs the embedding routine, and what must a routine offer the suite?

The suite drives any routine through one small protocol (``Routine``): ``run_step(step)``
returns the step's input embeddings ``[step tokens, hidden]`` and ``stats`` counts
``encoder_calls``, ``encoded_items`` and ``cache_hits``. ``vlmpath.engines.reference`` is
our own model of the routine (the default); ``vlmpath.engines.sglang_adapter`` drives an
installed sglang's own code through the same protocol.

``EngineSpec`` is what ``--engine`` / ``--engine-src`` name, parsed once with errors that
say what to write instead:

- ``reference``: the in-process reference routine;
- ``sglang==X``: a cached engine environment (``vlmpath engine install sglang==X``);
- ``sglang@src:DIR`` (``--engine-src DIR``): a source tree put first on the measuring
  process's path, e.g. an sglang checkout's ``python/`` directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from vlmpath.core.errors import VlmpathError

ENGINE_ENV = "VLMPATH_ENGINE"        # the engine spec the asv suite measures with
ENGINE_PYTHON_ENV = "VLMPATH_ENGINE_PYTHON"
KNOWN_ENGINES = ("sglang", "vllm")
_RELEASE = re.compile(r"^([A-Za-z][\w.-]*)==([0-9][\w.+-]*)$")


class EngineError(VlmpathError):
    """An engine spec, environment or release that vlmpath cannot use as asked."""


class Routine(Protocol):
    """What the suite needs from a routine: one forward step at a time, and counters."""

    stats: object  # has encoder_calls, encoded_items, cache_hits

    def run_step(self, step) -> torch.Tensor: ...


@dataclass(frozen=True)
class EngineSpec:
    """One engine to measure with. ``kind`` is ``reference``, ``release`` or ``src``."""

    kind: str
    name: str = "reference"          # the engine project (``sglang``)
    version: str | None = None       # ``release``: the pinned version
    src: str | None = None           # ``src``: the absolute source directory

    @property
    def label(self) -> str:
        """The record's ``engine`` field: ``reference``, ``sglang==0.5.23``, ``sglang@src:/p``."""
        if self.kind == "reference":
            return "reference"
        if self.kind == "release":
            return f"{self.name}=={self.version}"
        return f"{self.name}@src:{self.src}"

    @property
    def slug(self) -> str:
        """A file- and machine-name-safe form of the label (``sglang-0.5.23``, ``sglang-src``)."""
        if self.kind == "reference":
            return "reference"
        if self.kind == "release":
            return f"{self.name}-{self.version}"
        return f"{self.name}-src"

    @property
    def in_process(self) -> bool:
        return self.kind == "reference"


def parse_engine(text: str | None, *, src: str | None = None) -> EngineSpec:
    """The spec for ``--engine TEXT`` and/or ``--engine-src DIR``.

    ``--engine-src`` wins over a release and needs no ``--engine`` (it may repeat
    ``--engine sglang``); anything else unknown raises ``EngineError`` naming the forms.
    """
    forms = ("'reference', 'sglang==X.Y.Z' or 'vllm==X.Y.Z' (after `vlmpath engine install NAME==X.Y.Z`) "
             "or --engine-src DIR")
    text = (text or "").strip()
    if src is not None:
        path = Path(src).expanduser()
        if not path.is_dir():
            raise EngineError(f"--engine-src {src!r} is not a directory: give the engine's source tree, "
                              "e.g. an sglang checkout's python/ directory (the one holding sglang/) or a "
                              "vLLM checkout (the one holding vllm/)")
        if text == "reference":
            raise EngineError("--engine reference and --engine-src exclude each other: drop one of them")
        named = text.split("==")[0].split("@")[0] if text else None
        if named is not None and named not in KNOWN_ENGINES:
            raise EngineError(f"--engine {text!r} with --engine-src: only {', '.join(KNOWN_ENGINES)} sources "
                              "are supported")
        held = [n for n in KNOWN_ENGINES if (path / n).is_dir()]
        name = named or (held[0] if len(held) == 1 else None)
        if name is None or not (path / name).is_dir():
            raise EngineError(f"--engine-src {src!r} has no {named or ' or '.join(KNOWN_ENGINES)}/ package inside: "
                              "give the directory that holds it (an sglang checkout's python/ directory, a "
                              "vLLM checkout's root)")
        return EngineSpec("src", name, None, str(path.resolve()))
    if text in ("", "reference"):
        return EngineSpec("reference")
    m = _RELEASE.match(text)
    if m:
        name, version = m.groups()
        if name not in KNOWN_ENGINES:
            raise EngineError(f"--engine {text!r}: unknown engine {name!r}; vlmpath drives "
                              f"{', '.join(KNOWN_ENGINES)} ({forms})")
        return EngineSpec("release", name, version)
    for name in KNOWN_ENGINES:
        if text.startswith(f"{name}@src:"):
            return parse_engine(name, src=text[len(f"{name}@src:"):])
    raise EngineError(f"--engine {text!r} is not an engine: write {forms}")
