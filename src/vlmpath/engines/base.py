"""Which engine runs the embedding routine, and what must a routine and an adapter offer?

The suite drives any routine through one small protocol (``Routine``): ``run_step(step)``
returns the step's input embeddings ``[step tokens, hidden]`` and ``stats`` counts
``encoder_calls``, ``encoded_items`` and ``cache_hits``. ``vlmpath.engines.reference`` is
our own model of the routine (the default); an engine's adapter (``EngineAdapter``, named
by its entry in ``vlmpath.engines.registry``) builds routines that drive an installed
engine's own code through the same protocol.

``EngineSpec`` is what ``--engine`` / ``--engine-src`` name, parsed once (``EngineSpec.parse``,
at the CLI) with errors that say what to write instead (NAME is any engine of the registry, e.g. ``sglang``):

- ``reference``: the in-process reference routine;
- ``NAME==X``: a cached engine environment (``vlmpath engine install NAME==X``);
- ``NAME@src:DIR`` (``--engine-src DIR``): a source tree put first on the measuring
  process's path, e.g. an sglang checkout's ``python/`` directory; the engine is the one
  whose package DIR holds (or ``--engine NAME``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from vlmpath.core.errors import EngineError, did_you_mean
from vlmpath.engines import registry

if TYPE_CHECKING:  # torch stays out of parsing: the CLI parses specs before any measuring
    import torch

_RELEASE = re.compile(r"^([A-Za-z][\w.-]*)==([0-9][\w.+-]*)$")


@runtime_checkable
class Routine(Protocol):
    """What the suite needs from a routine: one forward step at a time, and counters."""

    stats: object  # has encoder_calls, encoded_items, cache_hits

    def run_step(self, step) -> torch.Tensor: ...


@runtime_checkable
class EngineAdapter(Protocol):
    """What the suite needs from an engine (an entry's ``adapter`` class, built as
    ``Class(label)`` in the process that measures): routines over the engine's own code,
    the engine's own arrival (hashing) of a workload, and what to record."""

    label: str                     # the spec's label (``EngineSpec.label``)
    version: str | None            # the imported engine's version
    seams: Mapping[str, str]       # which variant of each seam this release has

    def routine(self, workload, encoder, pipeline, table: torch.Tensor, *, cache_bytes: int,
                encoder_region: Callable[[], AbstractContextManager] = ...) -> Routine: ...

    def arrive(self, wl, hash_name: str) -> tuple: ...  # (workload with hashes, seconds, HashStats)


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

    @classmethod
    def parse(cls, text: str | None, *, src: str | None = None) -> EngineSpec:
        """The spec for ``--engine TEXT`` and/or ``--engine-src DIR`` (or a label read back
        from where it crossed a process boundary: ``VLMPATH_ENGINE``, a worker's job).

        ``--engine-src`` wins over a release and needs no ``--engine`` (it may name the engine,
        ``--engine sglang``); anything else unknown raises ``EngineError`` naming the forms.
        ``EngineSpec.parse(spec.label) == spec``.
        """
        return _parse(text, src)

    @classmethod
    def for_tree(cls, src: str | Path, name: str | None = None) -> EngineSpec:
        """The ``src`` spec of a source tree vlmpath checked out itself (each side of ``ci pr
        --engine-src``): ``name`` is the engine (None: the one whose package the tree holds);
        a tree without the package is an ``EngineError`` naming the fix."""
        return _src_spec(name or "", str(src))


def _forms() -> str:
    names = registry.names()
    example = registry.get(names[0]).example if names else "NAME==X.Y.Z"
    releases = ", ".join(f"'{n}==X.Y.Z'" for n in names)
    return f"'reference', {releases} (after `vlmpath engine install {example}`) or --engine-src DIR"


def _src_spec(text: str, src: str) -> EngineSpec:
    """``--engine-src DIR`` (with ``--engine`` empty, ``NAME`` or ``NAME==X``)."""
    path = Path(src).expanduser()
    if text == "reference":
        raise EngineError("--engine reference and --engine-src exclude each other: drop one of them")
    if not path.is_dir():
        raise EngineError(f"--engine-src {src!r} is not a directory: give the engine's source tree, "
                          "e.g. an sglang checkout's python/ directory (the one holding sglang/)")
    name = re.split(r"==|@src:", text, maxsplit=1)[0] if text else ""
    entry = registry.get(name) if name else registry.engine_of_tree(path)
    if entry is None:
        known = registry.entries().values()
        subs = [path / d for e in known if (d := e.package_root(path))]
        fix = (f"--engine-src {subs[0]}" if subs else "the directory that holds it ("
               + "; ".join(e.checkout_hint or e.name for e in known) + ")")
        raise EngineError(f"--engine-src {src!r} has no engine package inside "
                          f"({', '.join(e.import_name + '/' for e in known)}): give {fix}")
    if not entry.holds_package(path):
        sub = entry.package_root(path)
        fix = f"--engine-src {path / sub}" if sub else f"the directory that holds it ({entry.checkout_hint or '?'})"
        raise EngineError(f"--engine-src {src!r} has no {entry.import_name}/ package inside: give {fix}")
    return EngineSpec("src", entry.name, None, str(path.resolve()))


def _parse(text: str | None, src: str | None) -> EngineSpec:
    text = (text or "").strip()
    if src is not None:
        return _src_spec(text, src)
    if text in ("", "reference"):
        return EngineSpec("reference")
    m = _RELEASE.match(text)
    if m:
        name, version = m.groups()
        if name not in registry.names():
            raise EngineError(f"--engine {text!r}: unknown engine {name!r}{did_you_mean(name, registry.names())}; "
                              "vlmpath drives "
                              f"{', '.join(registry.names())} ({_forms()})")
        return EngineSpec("release", name, version)
    name, sep, rest = text.partition("@src:")
    if sep and name in registry.names():
        return _src_spec(name, rest)
    if text in registry.names():  # a name alone: which release?
        raise EngineError(f"--engine {text!r} is not an engine spec without a release: write {text}==X.Y.Z (after `vlmpath engine "
                          f"install {text}==X.Y.Z`), or pass --engine-src DIR for a source tree")
    raise EngineError(f"--engine {text!r} is not an engine{did_you_mean(text, ['reference', *registry.names()])}: "
                      f"write {_forms()}")
