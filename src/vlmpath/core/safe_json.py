"""How is a JSON file (or an HTTP answer) that someone else wrote read without trusting it?

Artifacts, traces and results directories can come from code under test. Every such file
is read here: a regular file (not a device, FIFO or symlink), checked with ``fstat`` on the
open descriptor before a byte is read, read with a size cap (a sparse 1 TB file costs one
``read`` of ``max_bytes + 1``), and parsed with bounds on nesting depth and on the length
of every number (Python refuses ints over 4300 digits with a ValueError, and a 100k-deep
array exhausts the recursion limit). With ``strict=True`` (files whose numbers are counts
or shares: ``ir-grew.json``, ``profiles.json``, ``run.json``), ``NaN``, ``Infinity``, a
float that overflows (``1e400``) and a key given twice in one object are refused too; asv's own results keep ``NaN`` (its
"skipped") and the comparison judges non-finite values as not judged. Any breach is one
``VlmpathError`` naming the file, so the CLI prints one line and exits 2, never a
traceback. The bounds are ``core.budget``'s.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from vlmpath.core import budget
from vlmpath.core.errors import VlmpathError

#: Deepest nesting accepted (asv results nest 4 deep, profiles 3; 64 leaves room).
MAX_DEPTH = budget.MAX_DEPTH
#: Longest number literal accepted, in characters (a float's repr is at most 24).
MAX_NUMBER_CHARS = budget.MAX_NUMBER_CHARS
#: Default size cap of one file (asv results of a whole suite are a few MiB).
MAX_BYTES = budget.MAX_FILE_BYTES


def read_capped(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``: a regular file (symlinks refused) of at most ``max_bytes``."""
    p = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        why = "is a symlink" if p.is_symlink() else f"cannot be opened ({exc.strerror})"
        raise VlmpathError(f"{what} {str(p)!r} {why}; pass a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise VlmpathError(f"{what} {str(p)!r} is not a regular file; pass a regular file")
        if st.st_size > max_bytes:
            raise VlmpathError(f"{what} {str(p)!r} is {st.st_size} bytes, over the limit of {max_bytes}")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise VlmpathError(f"{what} {str(p)!r} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while we read it
        raise VlmpathError(f"{what} {str(p)!r} is over the limit of {max_bytes} bytes")
    return data


def read_stream_capped(stream, what: str, max_bytes: int, fix: str = "") -> bytes:
    """At most ``max_bytes`` of a stream someone else sends (an HTTP response: GitHub's API,
    a package index's JSON): one ``read`` of ``max_bytes + 1``, so a 200 MB answer is one
    error naming ``what``, not memory."""
    raw = stream.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise VlmpathError(f"{what} over {max_bytes} bytes; refused{f': {fix}' if fix else ''}")
    return raw


def _number(kind, strict: bool = False):
    def parse(text: str):
        if len(text) > MAX_NUMBER_CHARS:
            raise ValueError(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
        value = kind(text)
        if strict and not math.isfinite(value):
            raise ValueError(f"the number {text} is out of range (not a finite float)")
        return value
    return parse


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def _unique_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {str(twice)[:60]!r} appears twice in one object")
    return out


def _depth_ok(value: Any, limit: int) -> bool:
    # Iterative: the check itself must not recurse on hostile input.
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > limit:
                return False
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return True


def loads(text: str | bytes, where: str, fix: str = "", *, max_depth: int = MAX_DEPTH,
          said: str = "not JSON", strict: bool = False) -> Any:
    """``text`` parsed as JSON within the bounds; ``VlmpathError`` naming ``where`` (and
    saying ``said``, then why) otherwise. ``strict``: no NaN, Infinity, overflow or key
    given twice."""
    tail = f"; {fix}" if fix else ""
    extra = {"parse_constant": _no_constant, "object_pairs_hook": _unique_keys} if strict else {}
    try:
        value = json.loads(text, parse_int=_number(int), parse_float=_number(float, strict), **extra)
    except RecursionError:
        raise VlmpathError(f"{where}: {said} (nested more than {max_depth} deep){tail}") from None
    except json.JSONDecodeError as exc:
        raise VlmpathError(f"{where}: {said} ({exc.msg} at line {exc.lineno}){tail}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise VlmpathError(f"{where}: {said} ({str(exc)[:120]}){tail}") from None
    if not _depth_ok(value, max_depth):
        raise VlmpathError(f"{where}: {said} (nested more than {max_depth} deep){tail}")
    return value


def load_file(path: str | os.PathLike[str], what: str, fix: str = "", *, max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH, strict: bool = False) -> Any:
    """A JSON file read with ``read_capped`` and parsed with ``loads``."""
    data = read_capped(path, what, max_bytes)
    return loads(data, f"{what} {str(path)!r}", fix, max_depth=max_depth, strict=strict)


def check_file(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_BYTES) -> None:
    """Refuse a JSON file out of bounds before another parser (asv's) reads it."""
    load_file(path, what, "delete it or re-run", max_bytes=max_bytes)
