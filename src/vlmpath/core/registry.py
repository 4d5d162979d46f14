"""How are competing strategies named and looked up?

A ``Registry`` is a read-only ``Mapping[str, T]`` built once at import from a literal
list of entries. Names are data: they are never passed to ``getattr``. Entries can be
marked *known-bad* (a faithful replay of a bug): they stay available by name but are
left out of ``default_names()``, which is what benchmark suites enumerate.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from vlmpath.core.errors import UnknownNameError

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Named strategies of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str, entries: Mapping[str, T], known_bad: frozenset[str] = frozenset()):
        unknown = set(known_bad) - set(entries)
        if unknown:
            raise ValueError(f"known_bad names not registered in {kind}: {sorted(unknown)}")
        self.kind = kind
        self._entries = MappingProxyType(dict(entries))
        self.known_bad = frozenset(known_bad)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def default_names(self) -> list[str]:
        """Sorted names a default suite runs: everything except known-bad replays."""
        return sorted(n for n in self._entries if n not in self.known_bad)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._entries)}, known_bad={sorted(self.known_bad)})"
