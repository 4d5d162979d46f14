"""How much work does one region of a Python + torch program do, counted natively and exactly?

The PR job's default counter (``selfcheck.ir_cases``, counter ``ops``), the native alternative
to callgrind that issue 22 asked to be measured: callgrind needs ~7 CPU-minutes per side just
to start torch and record the tower under Valgrind, so a whole CPU PR job could not fit in
15 minutes; this counter runs at native speed outside the counted region and ~20-50x slower
inside it, so a side's 16 routine cases and its towers count in well under a minute.

One count (``OpCounter.count``) holds two deterministic tallies over the region, kept apart
(``parts``) and gated apart, because they differ by orders of magnitude (a tiny routine case
executes ~20k bytecodes and writes ~700k elements: summed, a 10% growth of the Python work
would read as 0.3%):

- **Python bytecodes executed** (``sys.settrace`` with per-opcode events), per function,
  outside torch's own package (its Python glue runs per operator and is the aten tally's
  business): the routine's own scheduling, caching, hashing bookkeeping, batching,
  splitting and counting. An extra pass over the items per step, or an extra helper, is
  more bytecodes.
- **aten elements written**: each aten operator call (a ``TorchDispatchMode``) weighs the
  number of elements of the tensors it returns (a view, which writes nothing, weighs 1),
  per operator: an extra copy of the rows, an added ``torch.sort``, a larger gather.

What it cannot see (said in docs/counts.md): work inside a C function that is not an aten
operator (``hashlib``'s SHA-256 is one call whatever the bytes), and the cost of an
operator beyond its output size (a matmul weighs its output, not its FLOPs). callgrind
(counter ``callgrind``) remains for those.

Determinism: the garbage collector is off during a count (a collection would run
finalizers' bytecodes at a moment set by allocation history), the harness's own frames
(this file, torch's dispatch-mode plumbing) are not counted, and the caller pins
``PYTHONHASHSEED``. The module imports only the standard library and torch (lazily): the
worker loads it by file path while ``vlmpath`` resolves to the side under test.
"""

from __future__ import annotations

import gc
import json
import sys
from collections import Counter
from pathlib import Path

UNIT = "ops"


def _where(code) -> str:
    """``vlmpath/…/file.py:qualname`` for the package under test, else the last two path parts."""
    parts = code.co_filename.replace("\\", "/").split("/")
    if "vlmpath" in parts:
        parts = parts[len(parts) - 1 - parts[::-1].index("vlmpath"):]
    else:
        parts = parts[-2:]
    return "/".join(parts) + ":" + getattr(code, "co_qualname", code.co_name)


def _numel(out) -> int:
    import torch

    if isinstance(out, torch.Tensor):
        return out.numel()
    if isinstance(out, (tuple, list)):
        return sum(_numel(o) for o in out)
    return 0


class OpCounter:
    """The same interface as ``selfcheck.callgrind.Counter``: ``instrument`` (nothing to switch
    here), ``count(fn) -> int`` and ``last`` (the breakdown file of the last count, when
    ``dumps`` is given: ``{"python": {function: bytecodes}, "aten": {op: elements}}``)."""

    unit = UNIT

    def __init__(self, dumps: str | Path | None = None, harness: tuple[str, ...] = ()):
        self._dumps = Path(dumps) if dumps else None
        self._harness = frozenset(harness)  # the caller's own files: not the code under test
        self._n = 0
        self.last: Path | None = None
        self.breakdown: dict = {}
        self.parts: dict[str, int] = {}  # the last count's tallies: bytecodes, elements

    def instrument(self, on: bool) -> None:  # callgrind's switch; native counting needs none
        return None

    def count(self, fn) -> int:
        import torch.utils._python_dispatch as dispatch
        from torch.utils._python_dispatch import TorchDispatchMode

        # Plain dicts: a Counter's ``__missing__`` is Python code, and the dispatch mode below
        # would have it counted as the region's own.
        by_code: dict = {}
        aten: dict = {}

        class _Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                name = f"aten::{func.overloadpacket.__name__}"
                aten[name] = aten.get(name, 0) + (1 if func.is_view else max(1, _numel(out)))
                return out

        harness = {__file__, dispatch.__file__, *self._harness}
        torch_dir = str(Path(dispatch.__file__).parents[1]) + "/"  # as co_filename spells it

        def local(frame, event, arg):
            if event == "opcode":
                code = frame.f_code
                by_code[code] = by_code.get(code, 0) + 1
            return local

        def on_call(frame, event, arg):
            where = frame.f_code.co_filename
            if where in harness or where.startswith(torch_dir):
                return None
            frame.f_trace_opcodes = True
            return local

        was_enabled = gc.isenabled()
        # The youngest generation only (the set-up's and warm-up's fresh garbage): a full
        # collection cost ~0.25 s per count with torch loaded (355k objects), more than the
        # counted pass, and makes no count more exact: the collector is off during the count.
        gc.collect(0)
        gc.disable()
        mode = _Ops()
        mode.__enter__()
        sys.settrace(on_call)
        try:
            fn()
        finally:
            sys.settrace(None)
            mode.__exit__(None, None, None)
            if was_enabled:
                gc.enable()
        python: Counter = Counter()
        for code, n in by_code.items():
            python[_where(code)] += n
        self.breakdown = {"python": dict(python), "aten": dict(aten)}
        self.parts = {"bytecodes": sum(python.values()), "elements": sum(aten.values())}
        if self._dumps is not None:
            self._n += 1
            self.last = self._dumps.with_name(f"{self._dumps.name}.{self._n}.ops.json")
            self.last.write_text(json.dumps({**self.breakdown, "tallies": self.parts}, sort_keys=True),
                                 encoding="utf-8")
        # The callgrind-shaped interface returns one number; the gates read ``parts``.
        return sum(self.parts.values())
