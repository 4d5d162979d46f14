"""How is a routine pass counted without its vision tower, and what did a pass call?

Part of the instruction counter's fixed harness (``selfcheck/ir_worker.py`` loads it by file path,
like ``selfcheck/callgrind.py``; it imports only the standard library and torch, never
``vlmpath``, since the side under test may predate it):

- ``Recorder`` wraps a side's real encoder for one uncounted pass and keeps every call's
  items (by content hash) and output, in call order.
- ``Replay`` stands in for the encoder in the counted pass: each ``encode(items)`` returns
  the rows the real tower produced for those same items, in the same order, as a fresh
  tensor made before the count (``Recorder.replay``), so the count holds the routine's own
  code (scheduling, cache, hashing, batching and splitting, counting, injection) and the
  routine's own call bookkeeping, and not the tower's arithmetic. A call the recording did
  not make (other items, or more calls) raises: the replay never invents rows. ``left``
  says how many recorded calls the counted pass did not make (must be 0).
- ``CallCounts`` counts, over one uncounted pass, every Python function call (by file and
  qualified name) and every aten operator call (a dispatch mode): deterministic counts that
  name what a changed count is made of (``compare.ir_grew``).
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from dataclasses import replace


def _key(items) -> tuple:
    return tuple((it.hash, it.span) for it in items)


class _Forward:
    """Everything but ``encode`` goes to the real encoder (name, dtype, out_dim, expected_rows)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)


class Recorder(_Forward):
    """``memo``: outputs by items, shared by the recorders of one encoder: the tower is
    deterministic, so a call another case already made (the same preset through another
    pipeline) is answered with a copy of its rows instead of running the tower again."""

    def __init__(self, real, memo: dict | None = None):
        super().__init__(real)
        self.calls: list[tuple[tuple, object]] = []
        self.items: list[tuple] = []  # each call's items (the tower case takes its shapes from them)
        self._memo = {} if memo is None else memo

    def encode(self, items):
        key = _key(items)
        if key in self._memo:
            out = self._memo[key]
            out = replace(out, embeddings=out.embeddings.clone())
        else:
            out = self._memo[key] = self._real.encode(items)
        self.calls.append((key, out))
        self.items.append(tuple(items))
        return out

    def replay(self) -> Replay:
        """A replay with its own copies of every output (made now, outside any count)."""
        import torch

        with torch.no_grad():
            calls = [(k, replace(out, embeddings=out.embeddings.clone())) for k, out in self.calls]
        return Replay(self._real, calls)


class Replay(_Forward):
    def __init__(self, real, calls):
        super().__init__(real)
        self._queues: dict[tuple, deque] = {}
        for key, out in calls:
            self._queues.setdefault(key, deque()).append(out)

    def encode(self, items):
        queue = self._queues.get(_key(items))
        if not queue:
            raise RuntimeError(f"replayed encoder: no recorded tower call for these {len(items)} item(s); "
                               "the counted pass called the encoder differently from the recording pass")
        return queue.popleft()

    @property
    def left(self) -> int:
        return sum(len(q) for q in self._queues.values())


def _where(code) -> str:
    parts = code.co_filename.replace("\\", "/").split("/")
    if "vlmpath" in parts:  # the package under test: its own path, from the package down
        parts = parts[len(parts) - 1 - parts[::-1].index("vlmpath"):]
    else:
        parts = parts[-2:]
    return "/".join(parts) + ":" + getattr(code, "co_qualname", code.co_name)


_ops_file = __file__


class CallCounts:
    """``with CallCounts() as c: ...``; then ``c.python`` and ``c.aten`` (name -> calls)."""

    def __init__(self):
        self.python: Counter = Counter()
        self.aten: Counter = Counter()

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        aten = self.aten

        class _Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                aten[str(func.overloadpacket.__name__)] += 1
                return func(*args, **(kwargs or {}))

        py = self.python
        import torch.utils._python_dispatch as dispatch

        # The harness's own frames (this file, the dispatch mode's) are not the code under test.
        harness = {__file__, _ops_file, dispatch.__file__}

        def prof(frame, event, arg):
            if event == "call" and frame.f_code.co_filename not in harness:
                py[_where(frame.f_code)] += 1

        self._mode = _Ops()
        self._mode.__enter__()
        sys.setprofile(prof)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        self._mode.__exit__(*exc)
        return False

    def to_dict(self) -> dict:
        return {"python": dict(self.python), "aten": {f"aten::{k}": v for k, v in self.aten.items()}}
