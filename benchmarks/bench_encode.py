"""Per-request vs cross-request batched vision encoding (``vlmpath.paths.encode``).

Each case is a workload preset run through the whole routine with the default pipeline
except the encode stage.

- ``EncodeTime.time_routine``: every step of the schedule with a fresh embedding cache,
  ending in a device sync. Not timed (``setup``): tower build, workload build, arrival
  (hashing) and one warm-up pass.
- ``EncodeMetrics``: tok/s, accuracy and encoder calls of one ``measure_case`` per case
  (device-timed steps, golden-row fidelity), shared through ``_common.case_summary``.
"""

from __future__ import annotations

from vlmpath.suite import cases

from . import _common

_common.preimport_tower()


@_common.report_failures
class EncodeTime:
    params = (list(cases.ENCODE_STRATEGY_NAMES), list(cases.ROUTINE_PRESETS))
    param_names = ("strategy", "preset")
    timer = _common.TIMER
    repeat = _common.ROUTINE_REPEAT
    rounds = _common.ROUNDS
    number = 1
    warmup_time = 0  # the warm-up is the explicit pass in setup
    timeout = 600

    def setup(self, strategy, preset):
        scale = cases.scale_from_env()
        self.device = cases.bench_device(scale)
        self.pipeline = cases.encode_pipeline(strategy)
        self.wl, self.encoder, self.table = _common.prepared(preset, self.pipeline.hash, scale, self.device)
        _common.run_schedule(self.wl, self.encoder, self.pipeline, self.table, self.device)

    def time_routine(self, strategy, preset):
        _common.run_schedule(self.wl, self.encoder, self.pipeline, self.table, self.device)


@_common.report_failures
class EncodeMetrics:
    params = (list(cases.ENCODE_STRATEGY_NAMES), list(cases.ROUTINE_PRESETS))
    param_names = ("strategy", "preset")
    timeout = 600
    setup_cache = staticmethod(_common.routine_cache)

    def setup(self, cache, strategy, preset):
        cases.bench_device(cache["scale"])  # full scale on a CPU-only machine: skipped
        self.case = cases.RoutineCase("encode", strategy, preset)

    def track_tok_per_s(self, cache, strategy, preset):
        return cases.require_ok(_common.case_summary(self.case, cache), "tok_per_s")

    track_tok_per_s.unit = "tok/s"

    def track_accuracy(self, cache, strategy, preset):
        # Reported even when the case failed: the lower accuracy IS the finding.
        return float(_common.case_summary(self.case, cache)["accuracy"])

    track_accuracy.unit = "fraction"

    def track_encoder_calls(self, cache, strategy, preset):
        # A failed case made fewer calls: that must not read as an improvement.
        return cases.require_ok(_common.case_summary(self.case, cache), "encoder_calls")

    track_encoder_calls.unit = "calls"

    # Peak memory of one pass (vlmpath.measure.memory): lower is better, banded
    # (thresholds.yaml); not measured -> skipped, never 0.
    def track_peak_bytes(self, cache, strategy, preset):
        return cases.require_measured(_common.case_summary(self.case, cache), "peak_bytes")

    track_peak_bytes.unit = "bytes"

    def track_reserved_bytes(self, cache, strategy, preset):
        return cases.require_measured(_common.case_summary(self.case, cache), "reserved_bytes")

    track_reserved_bytes.unit = "bytes"
