"""The whole embedding routine: the ``default`` pipeline vs the ``legacy`` one (before #26082).

``default`` is read from ``vlmpath.engines.pipelines.DEFAULT_PIPELINE`` when the benchmark runs, so a
commit that changes the package's default changes what these rows measure. Every number
comes from one ``measure_case`` per (pipeline, preset): tok/s over device-timed steps
(median of the timed passes), placement accuracy against each item's golden rows, host-
device syncs outside the vision tower, vision-tower calls and (by hand, not in the table) the
receiver's hash seconds (``track_hash_s``). Tower build, workload
build, arrival and the warm-up pass are not timed. The ``track_`` methods are generated from
the metric table (``vlmpath.core.metrics``, rows whose ``routine`` names "embed").
"""

from __future__ import annotations

from vlmpath.suite import cases

from . import _common

_common.preimport_tower()


@_common.report_failures
@_common.metric_tracks("embed")  # track_tok_per_s, _accuracy, _syncs, _encoder_calls
class EmbedRoutine:
    params = (list(cases.PIPELINE_NAMES), list(cases.ROUTINE_PRESETS))
    param_names = ("pipeline", "preset")
    timeout = 600
    setup_cache = staticmethod(_common.routine_cache)

    def setup(self, cache, pipeline, preset):
        cases.bench_device(cache["scale"])  # full scale on a CPU-only machine: skipped
        self.case = cases.RoutineCase("embed", pipeline, preset)

    def track_hash_s(self, cache, pipeline, preset):
        # The receiver's hash time of the case's arrival (samples): its ratios (50x and more
        # for a planted re-hash) are large enough to judge on a CPU, which runs only this file.
        return _common.hash_s_track(self.case, cache)

    track_hash_s.unit = "seconds"
