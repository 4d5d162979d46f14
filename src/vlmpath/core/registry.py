"""How are competing strategies named and looked up?

A ``Registry`` is a read-only ``Mapping[str, T]`` built once at import from a literal
list of entries. Names are data: they are never passed to ``getattr``. Entries can be
marked *known-bad* (a faithful replay of a bug): they stay available by name but are
left out of ``default_names()``, which is what benchmark suites enumerate.

An entry may name its implementation instead of holding it: ``Lazy("module:attribute")``
is imported by the lookup (``registry[name]``), never by building the registry, so a
registry whose implementations need torch can be read for its names (the CLI's checks,
the help text) without loading torch, as ``engines.registry.EngineEntry`` names its
adapter. Names, membership, ``len`` and ``default_names()`` never import anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from vlmpath.core.errors import UnknownNameError, VlmpathError

T = TypeVar("T")


@dataclass(frozen=True)
class Lazy:
    """An implementation named as ``"module:attribute"``, imported only by ``load``."""

    target: str

    def __post_init__(self) -> None:
        module, _, attr = self.target.partition(":")
        if not module or not attr.isidentifier():
            raise VlmpathError(f"registry entry {self.target!r}: name an implementation as 'module:attribute'")

    def load(self) -> Any:
        module, _, attr = self.target.partition(":")
        found = getattr(importlib.import_module(module), attr, None)
        if found is None:
            raise VlmpathError(f"registry entry {self.target!r}: {module} defines no {attr!r}; "
                               "fix the entry's 'module:attribute'")
        return found


class Registry(Mapping[str, T], Generic[T]):
    """Named strategies of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str, entries: Mapping[str, T | Lazy], known_bad: frozenset[str] = frozenset()):
        unknown = set(known_bad) - set(entries)
        if unknown:
            raise ValueError(f"known_bad names not registered in {kind}: {sorted(unknown)}")
        self.kind = kind
        self._entries = MappingProxyType(dict(entries))
        self.known_bad = frozenset(known_bad)

    def __getitem__(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None
        # importlib keeps the module: a second lookup is a dict read and a getattr.
        return entry.load() if isinstance(entry, Lazy) else entry

    def __contains__(self, name: object) -> bool:  # Mapping's would look the entry up (and load it)
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def default_names(self) -> list[str]:
        """Sorted names a default suite runs: everything except known-bad replays."""
        return sorted(n for n in self._entries if n not in self.known_bad)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._entries)}, known_bad={sorted(self.known_bad)})"
