"""Per-request vs cross-request batched vision encoding (``vlmpath.paths.encode``).

Each case is a workload preset run through the whole routine with the default pipeline
except the encode stage.

- ``EncodeTime.time_routine``: every step of the schedule with a fresh embedding cache,
  ending in a device sync. Not timed (``setup``): tower build, workload build, arrival
  (hashing) and one warm-up pass.
- ``EncodeMetrics``: tok/s, accuracy and encoder calls of one ``measure_case`` per case
  (device-timed steps, golden-row fidelity), shared through ``_common.case_summary``; the
  ``track_`` methods are generated from the metric table (``vlmpath.core.metrics``).
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
@_common.metric_tracks("encode")  # track_tok_per_s, _accuracy, _encoder_calls
class EncodeMetrics:
    params = (list(cases.ENCODE_STRATEGY_NAMES), list(cases.ROUTINE_PRESETS))
    param_names = ("strategy", "preset")
    timeout = 600
    setup_cache = staticmethod(_common.routine_cache)

    def setup(self, cache, strategy, preset):
        cases.bench_device(cache["scale"])  # full scale on a CPU-only machine: skipped
        self.case = cases.RoutineCase("encode", strategy, preset)
