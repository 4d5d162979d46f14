"""Which workload does a name mean: a named preset, or a trace file?

``workload_by_name`` is the one resolver the CLI, the case registry and the benchmarks use:
``trace:<path>`` replays a JSONL trace (``traces``), anything else is a preset
(``workload.preset``). It sits above both so that neither imports the other back.
"""

from __future__ import annotations

from vlmpath.core.scales import DEFAULT_SCALE
from vlmpath.measure.presets import TRACE_PREFIX
from vlmpath.measure.traces import load_trace
from vlmpath.measure.workload import Workload, preset


def workload_by_name(name: str, scale: str = DEFAULT_SCALE, seed: int = 0) -> Workload:
    """A preset by name, or a trace when ``name`` is ``trace:<path>``."""
    if name.startswith(TRACE_PREFIX):
        return load_trace(name[len(TRACE_PREFIX):], scale, seed)
    return preset(name, scale, seed)
