"""The embedding routine as an ENGINE runs it: ``reference`` and engine releases side by side.

Which engine measures is a property of the run, not of a benchmark: ``vlmpath run --engine
SPEC`` sets ``VLMPATH_ENGINE`` (``reference`` when unset, else any engine of
``vlmpath.engines.registry`` by name: ``sglang==0.5.23``, ``sglang@src:DIR``) for the benchmarks and files the results under a machine name that
says the engine (``cpu-x86`` for the reference, ``cpu-x86-sglang-0.5.23`` for a release),
so every release keeps its own history and the dashboard draws the engines as lines of the
same benchmark, ``bench_engine.Engine.track_*(preset)``. The engine is deliberately *not*
an asv parameter: asv's dashboard takes a benchmark's parameter values from the latest
discovery, so a value only some runs have would hide the others' results.

Every number of one preset comes from one measured case (memoised in asv's cache
directory, as ``_common.case_summary`` does): tok/s, placement accuracy, syncs outside
and inside the encoder, encoder calls. Under the reference the case *is*
``bench_embed.EmbedRoutine``'s default-pipeline case (same memo, measured once); under
an engine it is measured by ``vlmpath.suite.engine_run.measure_cases`` in the engine's
own interpreter. A case the engine cannot run is a failed benchmark with its message.
"""

from __future__ import annotations

import json
import os
import tempfile

from vlmpath.suite import cases

from . import _common

ENGINE_ENV = "VLMPATH_ENGINE"  # vlmpath.engines.base.ENGINE_ENV (older packages lack it)
SUMMARY_KEYS = ("tok_per_s", "accuracy", "encoder_calls", "syncs", "encoder_syncs", "wall_s", "samples",
                "error", "engine", "engine_version")

_common.preimport_tower()


def engine_label(env=None) -> str:
    """The run's engine spec; unset or empty is the reference."""
    return ((os.environ if env is None else env).get(ENGINE_ENV) or "").strip() or "reference"


def _slug(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)[:120]


def engine_summary(preset: str, cache: dict) -> dict:
    """The measured case of ``preset`` with the run's engine (see the module docstring)."""
    engine = engine_label()
    case = cases.RoutineCase("embed", "default", preset)
    if engine == "reference":
        return _common.case_summary(case, cache)
    scale = cache["scale"]
    device = cases.bench_device(scale)
    path = os.path.join(os.getcwd(), f"vlmpath-engine-{_slug(engine)}-{preset}-{scale}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    from vlmpath.suite.engine_run import measure_cases  # only engine runs need the engine layer

    (record,) = measure_cases([case.measure_case(scale)], engine, repeat=cases.routine_repeat(cache["quick"]),
                              device=device)
    summary = {k: record.get(k) for k in SUMMARY_KEYS}
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    os.replace(tmp, path)
    return summary


@_common.report_failures
class Engine:
    params = (list(cases.ROUTINE_PRESETS),)
    param_names = ("preset",)
    timeout = 900
    setup_cache = staticmethod(_common.routine_cache)

    def setup(self, cache, preset):
        cases.bench_device(cache["scale"])  # full scale on a CPU-only machine: skipped

    def track_tok_per_s(self, cache, preset):
        return cases.require_ok(engine_summary(preset, cache), "tok_per_s")

    track_tok_per_s.unit = "tok/s"

    def track_accuracy(self, cache, preset):
        accuracy = engine_summary(preset, cache).get("accuracy")
        if accuracy is None:  # the case never ran (e.g. the engine could not be driven)
            return cases.require_ok(engine_summary(preset, cache), "accuracy")
        return float(accuracy)

    track_accuracy.unit = "fraction"

    def track_syncs(self, cache, preset):
        return cases.require_ok(engine_summary(preset, cache), "syncs")

    track_syncs.unit = "syncs"

    def track_encoder_syncs(self, cache, preset):
        return cases.require_ok(engine_summary(preset, cache), "encoder_syncs")

    track_encoder_syncs.unit = "syncs"

    def track_encoder_calls(self, cache, preset):
        return cases.require_ok(engine_summary(preset, cache), "encoder_calls")

    track_encoder_calls.unit = "calls"
