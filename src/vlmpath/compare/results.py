"""What did one benchmark run measure, read back from disk as typed records?

The public face of reading results: the records (``records.py``), the asv reader
(``asv_results.py``), the pytest-benchmark reader (``pytest_results.py``) and the
failure-file format (``vlmpath.core.failures``), importable from one place. Nothing here
compares or formats: that is ``compare.verdict`` and ``vlmpath.render``.

Why a case failed: asv stores only ``null`` for a benchmark that raised. ``vlmpath run``
files the benchmarks' own messages beside the results as
``<machine>/vlmpath-failures-<sha8>.json``; ``load_asv`` puts each into ``Metric.error`` of
the matching failed case. With no such file a failed case keeps the generic
``NO_RESULT_ERROR``; an unreadable one is a note on the machine's run.
"""

from __future__ import annotations

from vlmpath.compare.asv_results import (
    existing_commits,
    load_asv,
    param_display,
    read_fingerprint,
)
from vlmpath.compare.pytest_results import EXTRA_INFO_UNITS, load_pytest_benchmark
from vlmpath.compare.records import (
    FINGERPRINT_KEYS,
    FINGERPRINT_PREFIX,
    NO_RESULT_ERROR,
    SCHEMA_VERSION,
    TOOLCHAIN_KEYS,
    Fingerprint,
    MachineRun,
    Metric,
    RunResults,
    backend_from_name,
    merge_runs,
)
from vlmpath.core.atomic import write_text as write_text_atomic
from vlmpath.core.failures import FAILURES_PREFIX, Failure, failures_path, read_failures

__all__ = [
    "EXTRA_INFO_UNITS", "FAILURES_PREFIX", "FINGERPRINT_KEYS", "FINGERPRINT_PREFIX", "NO_RESULT_ERROR",
    "SCHEMA_VERSION", "TOOLCHAIN_KEYS", "Failure", "Fingerprint", "MachineRun", "Metric", "RunResults",
    "backend_from_name", "existing_commits", "failures_path", "load_asv", "load_pytest_benchmark",
    "merge_runs", "param_display", "read_failures", "read_fingerprint", "write_text_atomic",
]
