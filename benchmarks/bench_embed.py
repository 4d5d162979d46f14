"""The whole embedding routine: the ``default`` pipeline vs the ``legacy`` one (before #26082).

``default`` is read from ``vlmpath.engines.reference.DEFAULT_PIPELINE`` when the benchmark runs, so a
commit that changes the package's default changes what these rows measure. Every number
comes from one ``measure_case`` per (pipeline, preset): tok/s over device-timed steps
(median of the timed passes), placement accuracy against each item's golden rows, host-
device syncs outside the vision tower, and vision-tower calls. Tower build, workload
build, arrival and the warm-up pass are not timed.
"""

from __future__ import annotations

from vlmpath.suite import cases

from . import _common

_common.preimport_tower()


@_common.report_failures
class EmbedRoutine:
    params = (list(cases.PIPELINE_NAMES), list(cases.ROUTINE_PRESETS))
    param_names = ("pipeline", "preset")
    timeout = 600
    setup_cache = staticmethod(_common.routine_cache)

    def setup(self, cache, pipeline, preset):
        cases.bench_device(cache["scale"])  # full scale on a CPU-only machine: skipped
        self.case = cases.RoutineCase("embed", pipeline, preset)

    def track_tok_per_s(self, cache, pipeline, preset):
        return cases.require_ok(_common.case_summary(self.case, cache), "tok_per_s")

    track_tok_per_s.unit = "tok/s"

    def track_accuracy(self, cache, pipeline, preset):
        return float(_common.case_summary(self.case, cache)["accuracy"])

    track_accuracy.unit = "fraction"

    def track_syncs(self, cache, pipeline, preset):
        return cases.require_ok(_common.case_summary(self.case, cache), "syncs")

    track_syncs.unit = "syncs"

    def track_encoder_calls(self, cache, pipeline, preset):
        return cases.require_ok(_common.case_summary(self.case, cache), "encoder_calls")

    track_encoder_calls.unit = "calls"

    # Peak memory of one pass (vlmpath.measure.memory): lower is better, banded
    # (thresholds.yaml); not measured -> skipped, never 0.
    def track_peak_bytes(self, cache, pipeline, preset):
        return cases.require_measured(_common.case_summary(self.case, cache), "peak_bytes")

    track_peak_bytes.unit = "bytes"

    def track_reserved_bytes(self, cache, pipeline, preset):
        return cases.require_measured(_common.case_summary(self.case, cache), "reserved_bytes")

    track_reserved_bytes.unit = "bytes"
