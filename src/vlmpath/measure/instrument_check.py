"""Are the instruments still the ones that were loaded, after the code under test ran?

The code under test and the instruments share a process: two lines appended to a routine
(``SyncCount.count = property(lambda self: 0)``) would make every sync count read zero.
So each instrument module records what it is made of when it is imported, before any code
under test can reach it (``pristine``, called on the module's last line: the module's own
functions and classes, every class attribute, every function's code object), and the torch
and clock entry points the instruments patch or read (``Tensor.item``, ``nonzero``, the
dispatch and function mode stacks, ``perf_counter``...). After each case, ``verify`` reads
them again: anything rebound, or any code object swapped, is named, and the case is one
failure that says so (``INSTRUMENT_CHANGED``), never a number.

Two checks stand behind the torch entry points: identity with the snapshot, and that the
C-implemented ones are still C-implemented (a Python wrapper put in before the snapshot was
taken is caught by the second).

What this cannot catch (docs/ci-security.md): code in the same process that also rewrites
this module or the snapshots; the trusted side's defence against that is the yardstick
classification of the changed files (a PR that edits the instruments is never green) and
review of the code under test.

Entry points: ``pristine(module_name)`` (the last line of each instrument module) and
``verify()`` -> the one-line failure or None (``suite.measure.measure_case``, after the
case ran).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from types import MappingProxyType

#: The modules whose objects are instruments (each calls ``pristine`` on its last line).
INSTRUMENTS = (
    "vlmpath.measure.syncs",
    "vlmpath.measure.timing",
    "vlmpath.measure.memory",
    "vlmpath.measure.fidelity",
    "vlmpath.measure.instrument_check",
)
#: The start of the error of a case whose instruments changed while it ran.
INSTRUMENT_CHANGED = "an instrument changed while the case ran"
PRISTINE = "_VLMPATH_PRISTINE"

# torch entry points the sync counter relies on (the Python-level readbacks its function
# mode sees, the mode stacks themselves) and the clocks: (owner path, attribute). Ops such
# as ``torch.nonzero`` are not listed: a wrapper around one still reaches the dispatcher,
# where the counter sees it; and engines may wrap them by design.
_TORCH_POINTS = (
    ("torch.Tensor", "item"), ("torch.Tensor", "tolist"), ("torch.Tensor", "cpu"), ("torch.Tensor", "numpy"),
    ("torch.Tensor", "__bool__"), ("torch.Tensor", "__int__"), ("torch.Tensor", "__float__"),
    ("torch.Tensor", "__index__"),
    ("torch._C", "_push_on_torch_dispatch_stack"), ("torch._C", "_pop_torch_dispatch_stack"),
    ("torch._C", "_push_on_torch_function_stack"), ("torch._C", "_pop_torch_function_stack"),
    ("torch.utils._python_dispatch.TorchDispatchMode", "__enter__"),
    ("torch.utils._python_dispatch.TorchDispatchMode", "__exit__"),
    ("torch.overrides.TorchFunctionMode", "__enter__"), ("torch.overrides.TorchFunctionMode", "__exit__"),
    ("time", "perf_counter"), ("time", "perf_counter_ns"), ("time", "monotonic"),
)


def _resolve(path: str):
    head, *rest = path.split(".")
    obj = sys.modules.get(head)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


def _parts(name: str, obj, out: dict) -> None:
    out[name] = obj
    code = getattr(obj, "__code__", None)
    if code is not None:
        out[name + ".__code__"] = code
    if isinstance(obj, property):
        for acc in ("fget", "fset", "fdel"):
            f = getattr(obj, acc)
            if f is not None:
                out[f"{name}.{acc}"] = f
                if hasattr(f, "__code__"):
                    out[f"{name}.{acc}.__code__"] = f.__code__
    func = getattr(obj, "__func__", None)  # classmethod / staticmethod
    if func is not None and hasattr(func, "__code__"):
        out[name + ".__func__.__code__"] = func.__code__


def _module_parts(module) -> dict:
    """Every function and class the module defines, every attribute of those classes."""
    out: dict = {}
    for name, obj in list(vars(module).items()):
        if getattr(obj, "__module__", None) != module.__name__ or name == PRISTINE:
            continue
        if inspect.isclass(obj):
            out[name] = obj
            for attr, val in list(vars(obj).items()):
                if attr in ("__dict__", "__weakref__", "__doc__", "__annotations__", "__dataclass_fields__",
                            "__dataclass_params__", "__match_args__", "__static_attributes__",
                            "__firstlineno__", "__parameters__", "__orig_bases__", "__abstractmethods__",
                            "_abc_impl"):
                    continue
                _parts(f"{name}.{attr}", val, out)
        elif inspect.isfunction(obj):
            _parts(name, obj, out)
    return out


def torch_points() -> dict:
    """The torch and clock entry points as they are now (a missing one reads as None)."""
    return {f"{owner}.{attr}": getattr(_resolve(owner), attr, None) for owner, attr in _TORCH_POINTS
            if owner.split(".")[0] in sys.modules}


def pristine(module_name: str) -> Mapping:
    """Record ``module_name``'s parts and the torch entry points on the module itself
    (call on the module's last line: nothing imported later has touched it yet)."""
    module = sys.modules[module_name]
    snap = MappingProxyType({"parts": MappingProxyType(_module_parts(module)),
                             "torch": MappingProxyType(torch_points())})
    setattr(module, PRISTINE, snap)
    return snap


def _native(obj) -> bool:
    """Implemented in C (a builtin, a method descriptor, a wrapper slot), not Python code."""
    return not (inspect.isfunction(obj) or inspect.ismethod(obj) or hasattr(obj, "__code__"))


def _changed(module_name: str) -> list[str]:
    module = sys.modules.get(module_name)
    if module is None:
        return []
    snap = getattr(module, PRISTINE, None)
    if not isinstance(snap, MappingProxyType):
        return [f"{module_name} (its snapshot is gone)"]
    now = _module_parts(module)
    short = module_name.rsplit(".", 1)[-1]
    out = [f"{short}.{k}" for k, v in snap["parts"].items() if now.get(k) is not v]
    out += [f"{short}.{k} (added)" for k in now.keys() - snap["parts"].keys()]
    cur = torch_points()
    out += [k for k, v in snap["torch"].items() if cur.get(k) is not v]
    return out


def verify() -> str | None:
    """One line naming what changed among the instruments since they were loaded, or None."""
    changed: list[str] = []
    for name in INSTRUMENTS:
        changed += [c for c in _changed(name) if c not in changed]
    for key, obj in torch_points().items():
        native_once = key.startswith(("torch.Tensor.", "torch._C.", "time."))
        if native_once and obj is not None and not _native(obj) and key not in changed:
            changed.append(f"{key} (Python code in place of torch's)")
    # One name per changed thing: "SyncCount.count", not also its getter and code object.
    changed = [c for c in changed if not any(c != o and c.startswith(o + ".") for o in changed)]
    if not changed:
        return None
    shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
    return f"{INSTRUMENT_CHANGED}: {shown}; its numbers are not read"


pristine(__name__)
