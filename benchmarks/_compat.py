"""Which names does the suite take from a package that may be older than the suite?

asv runs these (head's) benchmark files against every commit's package, the base of a
PR included. Each name an older package lacks gets an explicit, named shim here, never a
silent copy in the benchmark modules.

- ``failures``: the failure-file format (``vlmpath.core.failures``, since issue 15). A
  package from before then lacks the module; the shim loads the same file from this
  suite's own checkout (``../src/vlmpath/core/failures.py``), so the format still has one
  home. It needs only ``vlmpath.core.errors``, which every layered package has.
- ``ENGINE_METRICS``: the table's rows for ``bench_engine``; a package whose table has
  no ``engine`` path gets this checkout's rows (its record has the same fields, and a
  number it lacks is skipped, never 0).
- ``SERVE_METRICS``: the table's ``serve_*`` rows for ``bench_serve``; a table without
  them gets this checkout's rows (a package without ``vlmpath.serving`` skips them all);
  ``SERVE_PRESETS``/``SERVE_CONCURRENCY``: its axes, as introduced, for a package without them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from vlmpath.suite import cases as _cases


def _core_module_from_checkout(name: str):
    path = Path(__file__).resolve().parents[1] / "src" / "vlmpath" / "core" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"vlmpath_suite_compat_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"the package under test lacks vlmpath.core.{name} and {path} is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


try:
    from vlmpath.core import failures
except ImportError:  # compat: packages before vlmpath.core.failures
    failures = _core_module_from_checkout("failures")

try:
    from vlmpath.core import metrics
except ImportError:  # compat: packages before vlmpath.core.metrics
    metrics = _core_module_from_checkout("metrics")

try:
    ENGINE_METRICS = metrics.routine_metrics("engine")
except ValueError:  # compat: tables before the engine path was a column (bench_engine's tracks)
    ENGINE_METRICS = _core_module_from_checkout("metrics").routine_metrics("engine")

try:
    from vlmpath.core.asv_names import BENCHMARK_PREFIXES
except ImportError:  # compat: packages before vlmpath.core.asv_names (asv's own list)
    BENCHMARK_PREFIXES = ("timeraw_", "time_", "peakmem_", "mem_", "track_")

#: asv name (class.method) -> the comment line its hand-written method had (see above).
HISTORY_COMMENTS = {
    "EncodeMetrics.track_accuracy": "Reported even when the case failed: the lower accuracy IS the finding.",
    "EncodeMetrics.track_encoder_calls": "A failed case made fewer calls: that must not read as an improvement.",
}

try:
    SERVE_METRICS = tuple(m for m in metrics.METRICS if m.name.startswith("serve_"))
    if not SERVE_METRICS:
        raise ValueError("no serve rows")
except (AttributeError, ValueError):  # compat: tables before the serve rows (bench_serve's tracks)
    SERVE_METRICS = tuple(m for m in _core_module_from_checkout("metrics").METRICS if m.name.startswith("serve_"))

#: The serve axes (``suite.cases.SERVE_PRESETS``/``SERVE_CONCURRENCY``); a package from
#: before them gets the axes they were introduced with, so both sides discover one set.
SERVE_PRESETS = tuple(getattr(_cases, "SERVE_PRESETS", ("many_small_images", "video", "multi_region")))
SERVE_CONCURRENCY = tuple(getattr(_cases, "SERVE_CONCURRENCY", (1, 4)))
