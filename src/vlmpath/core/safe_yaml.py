"""How is a YAML file that a pull request can write read without trusting it?

``benchmarks/accepted.yaml`` and a thresholds ``--config`` are data a PR edits. PyYAML's
``safe_load`` already refuses ``!!python/...`` objects, but it expands aliases (an alias
bomb of under 500 bytes took 32 s and grows tenfold per 50 bytes), follows merge keys
(``<<``), keeps the last of two equal keys silently and recurses on deep nesting. ``load``
reads such a file within ``core.budget``'s bounds and refuses, in one ``VlmpathError``
naming the file and the line:

- anchors and aliases (``&a``, ``*a``): the bomb's only lever, and never needed in a config;
- explicit tags (``!!python/object``, ``!!binary``, ``!custom``, even ``!!str``);
- merge keys (``<<``) and a key given twice in one mapping;
- nesting deeper than ``MAX_DEPTH``, a file over ``MAX_YAML_BYTES``;
- ``.inf``, ``.nan`` and floats that overflow (``1e400``), and integers over 64 digits:
  a band or a count must be a finite, plain number.

Documents are parsed by PyYAML's pure-Python composer (the checks hook into it), which is
linear in the bounded input.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

from vlmpath.core import budget
from vlmpath.core.errors import VlmpathError
from vlmpath.core.safe_json import read_capped


class _Refused(Exception):
    """A bound breached while composing (becomes one VlmpathError)."""

    def __init__(self, why: str, mark=None):
        line = f" at line {mark.line + 1}" if mark is not None else ""
        super().__init__(f"{why}{line}")


@functools.lru_cache(maxsize=1)
def _loader_class():
    import yaml
    from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent, ScalarEvent

    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader with the module docstring's refusals."""

        def __init__(self, stream):
            super().__init__(stream)
            self._depth = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, AliasEvent):
                raise _Refused(f"an alias (*{str(event.anchor)[:40]}) is not allowed", event.start_mark)
            if isinstance(event, NodeEvent) and event.anchor is not None:
                raise _Refused(f"an anchor (&{str(event.anchor)[:40]}) is not allowed", event.start_mark)
            if isinstance(event, (ScalarEvent, CollectionStartEvent)) and event.tag not in (None, "!"):
                raise _Refused(f"the tag {str(event.tag)[:60]} is not allowed (plain values only)",
                               event.start_mark)
            self._depth += 1
            try:
                if self._depth > budget.MAX_DEPTH:
                    raise _Refused(f"nested more than {budget.MAX_DEPTH} deep", event.start_mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node, deep=False):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise _Refused("a merge key (<<) is not allowed", key_node.start_mark)
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    twice = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: PyYAML says so itself
                    continue
                if twice:
                    raise _Refused(f"the key {str(key)[:60]!r} appears twice", key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_float(self, node):
            value = super().construct_yaml_float(node)
            if not math.isfinite(value):
                raise _Refused(f"the number {str(node.value)[:40]} is not finite", node.start_mark)
            return value

        def construct_yaml_int(self, node):
            if len(str(node.value)) > budget.MAX_NUMBER_CHARS:
                raise _Refused(f"a number of {len(str(node.value))} characters (at most "
                               f"{budget.MAX_NUMBER_CHARS})", node.start_mark)
            return super().construct_yaml_int(node)

    BoundedLoader.add_constructor("tag:yaml.org,2002:float", BoundedLoader.construct_yaml_float)
    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    return BoundedLoader


def loads(text: str, where: str, fix: str = "fix the file") -> Any:
    """One YAML document parsed within the bounds; ``VlmpathError`` naming ``where``."""
    import yaml

    size = len(text.encode("utf-8", "surrogatepass"))
    if size > budget.MAX_YAML_BYTES:
        raise VlmpathError(f"{where}: {size} bytes, over the limit of {budget.MAX_YAML_BYTES}; {fix}")

    try:
        loader = _loader_class()(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as exc:
        raise VlmpathError(f"{where}: refused YAML ({exc}); {fix}") from None
    except yaml.YAMLError as exc:
        first = (str(exc).splitlines() or ["?"])[0]
        raise VlmpathError(f"{where}: not valid YAML ({first[:200]}); {fix}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise VlmpathError(f"{where}: not valid YAML ({type(exc).__name__}: {str(exc)[:120]}); {fix}") from None


def load_file(path: str | os.PathLike[str], what: str, fix: str = "fix the file",
              max_bytes: int = budget.MAX_YAML_BYTES) -> Any:
    """A YAML file read with ``safe_json.read_capped`` (regular file, size cap) and parsed
    with ``loads``."""
    data = read_capped(path, what, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VlmpathError(f"{what} {str(path)!r} is not UTF-8 (byte {exc.start}); {fix}") from None
    return loads(text, f"{what} {str(path)!r}", fix)
