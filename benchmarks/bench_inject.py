"""Writing encoder rows into the text embeddings, and counting the step's placeholders.

Inputs are a preset's busiest forward step (``cases.inject_inputs``): the real placeholder
layout, seeded values. ``Inject`` times ``where_index`` (``torch.where`` + index: a sync on
a GPU) against ``masked_scatter`` (no sync), and reports each one's bandwidth as a fraction
of a plain copy of the same rows (``CopyReference``), which cancels the machine's memory
speed out of the comparison. ``Count`` times ``mask_sum`` (``.item()``, a sync) against
``offsets`` (host arithmetic). Sync counts use ``vlmpath.measure.syncs.count_syncs``. Input
building and one warm-up call are in ``setup``; each timed call ends in a device sync.
"""

from __future__ import annotations

import statistics

from vlmpath.measure import timing  # not `import time_fn`: asv would collect it as a benchmark
from vlmpath.suite import cases
from vlmpath.measure.platform import sync
from vlmpath.measure.syncs import syncs_of
from vlmpath.paths.count import COUNTERS
from vlmpath.paths.inject import INJECTORS

from . import _common, _compat

#: Timed calls behind each bandwidth fraction (median of each side).
_FRACTION_REPEAT = 21


def _copy_rows(inp) -> None:
    # The reference: the same rows written into the same number of destination rows,
    # contiguously (no mask, no index): what the memory system allows.
    inp.dest[: inp.count].copy_(inp.rows)


@_common.report_failures
class Inject:
    params = (list(cases.INJECT_STRATEGY_NAMES), list(cases.INJECT_PRESETS))
    param_names = ("strategy", "preset")
    timer = _common.TIMER
    repeat = (6, 20, 5.0)
    rounds = _common.ROUNDS

    def setup(self, strategy, preset):
        scale = cases.scale_from_env()
        self.device = cases.bench_device(scale)
        self.inp = cases.inject_inputs(preset, scale, self.device)
        self.inject = INJECTORS[strategy]
        self.inject(self.inp.dest, self.inp.mask, self.inp.rows)  # warm-up
        sync(self.device)

    def time_inject(self, strategy, preset):
        self.inject(self.inp.dest, self.inp.mask, self.inp.rows)
        sync(self.device)

    def track_syncs(self, strategy, preset):
        return float(syncs_of(self.inject, self.inp.dest, self.inp.mask, self.inp.rows).count)

    track_syncs.unit = _compat.metrics.METRIC_BY_NAME["syncs"].unit

    def track_bandwidth_fraction(self, strategy, preset):
        inp, dev = self.inp, self.device
        ours = timing.time_fn(lambda: self.inject(inp.dest, inp.mask, inp.rows), dev, repeat=_FRACTION_REPEAT)
        ref = timing.time_fn(lambda: _copy_rows(inp), dev, repeat=_FRACTION_REPEAT)
        return statistics.median(ref.samples) / max(statistics.median(ours.samples), 1e-12)

    # Not "fraction": that unit means accuracy, compared exactly. This is a timing ratio,
    # higher is better, judged within the noise band.
    track_bandwidth_fraction.unit = _compat.metrics.METRIC_BY_NAME["bandwidth_fraction"].unit


@_common.report_failures
class CopyReference:
    """The plain copy behind ``Inject.track_bandwidth_fraction``, in absolute GB/s."""

    params = (list(cases.INJECT_PRESETS),)
    param_names = ("preset",)

    def setup(self, preset):
        scale = cases.scale_from_env()
        self.device = cases.bench_device(scale)
        self.inp = cases.inject_inputs(preset, scale, self.device)

    def track_copy_bandwidth(self, preset):
        t = timing.time_fn(lambda: _copy_rows(self.inp), self.device, repeat=_FRACTION_REPEAT)
        return self.inp.moved_bytes / max(statistics.median(t.samples), 1e-12) / 1e9

    track_copy_bandwidth.unit = _compat.metrics.METRIC_BY_NAME["copy_bandwidth"].unit


@_common.report_failures
class Count:
    params = (list(cases.COUNT_STRATEGY_NAMES), list(cases.INJECT_PRESETS))
    param_names = ("strategy", "preset")
    timer = _common.TIMER
    repeat = (6, 20, 5.0)
    rounds = _common.ROUNDS

    def setup(self, strategy, preset):
        scale = cases.scale_from_env()
        self.device = cases.bench_device(scale)
        self.query = cases.inject_inputs(preset, scale, self.device).query
        self.count = COUNTERS[strategy]
        self.count(self.query)

    def time_count(self, strategy, preset):
        self.count(self.query)
        sync(self.device)

    def track_syncs(self, strategy, preset):
        return float(syncs_of(self.count, self.query).count)

    track_syncs.unit = _compat.metrics.METRIC_BY_NAME["syncs"].unit
