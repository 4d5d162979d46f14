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
and inside the encoder, encoder calls, peak memory: one ``track_`` method per ``engine``
row of the metric table (``vlmpath.core.metrics``). Under the reference the case *is*
``bench_embed.EmbedRoutine``'s default-pipeline case (same memo, measured once); under
an engine it is measured by ``vlmpath.suite.engine_run.measure_cases`` in the engine's
own interpreter. A case the engine cannot run is a failed benchmark with its message.
"""

from __future__ import annotations

import json
import os
import tempfile

from vlmpath.suite import cases

from . import _common, _compat

ENGINE_ENV = "VLMPATH_ENGINE"  # vlmpath.suite.bench_env.ENGINE_ENV (older packages lack it)
#: The memo of an engine case: the table's engine metrics plus what says how it ran.
SUMMARY_KEYS = tuple(m.name for m in _compat.ENGINE_METRICS) + ("wall_s", "samples", "error", "engine",
                                                                 "engine_version")

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
    # compat: packages before suite.record returned record dicts
    fields = record if isinstance(record, dict) else vars(record)
    summary = {k: fields.get(k) for k in SUMMARY_KEYS}
    summary["memory_reason"] = (fields.get("memory") or {}).get("reason")  # as cases.record_summary has it
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    os.replace(tmp, path)
    return summary


# --- the track_ methods, one per engine row of the metric table -------------------------
def _track(spec):
    """``track_<name>`` of one engine metric: the measured case's number. A failed case
    raises unless the table says the number is the finding even then (``report_failed``);
    a number this device does not measure (``may_be_unmeasured``) is NaN, asv's "skipped"."""

    def track(self, cache, preset):
        summary = engine_summary(preset, cache)
        if spec.name == "tok_per_s" and not summary.get("error"):
            # Every timed pass as a sample, as the routine's row has them: a row is judged by
            # its sample counts (1 in a quick run: indicative), never by a flag (issue 39).
            median = cases.require_ok(summary, "tok_per_s")
            seconds = [float(x) for x in summary.get("samples") or () if x and x > 0]
            if seconds and summary.get("wall_s"):
                tokens = median * float(summary["wall_s"])
                return {"samples": [tokens / x for x in seconds], "number": 1}
            return median
        if spec.report_failed and summary.get(spec.name) is not None:
            return float(summary[spec.name])
        if spec.may_be_unmeasured:
            try:
                return cases.require_measured(summary, spec.name)
            except NotImplementedError:
                return float("nan")
        return cases.require_ok(summary, spec.name)

    track.__name__ = spec.track_method
    track.__qualname__ = f"Engine.{spec.track_method}"
    track.unit = spec.unit
    track.pretty_source = _history_source(spec)
    return track


def _history_source(spec) -> str:
    """The source asv hashes into the benchmark's version: the text of the hand-written
    method this one replaced, so stored results keep their version (see ``_common``)."""
    head = f"def {spec.track_method}(self, cache, preset):\n"
    if spec.report_failed:
        return (head + f'    {spec.name} = engine_summary(preset, cache).get("{spec.name}")\n'
                f"    if {spec.name} is None:  # the case never ran (e.g. the engine could not be driven)\n"
                f'        return cases.require_ok(engine_summary(preset, cache), "{spec.name}")\n'
                f"    return float({spec.name})")
    require = "require_measured" if spec.may_be_unmeasured else "require_ok"
    return head + f'    return cases.{require}(engine_summary(preset, cache), "{spec.name}")'


def _engine_tracks(cls: type) -> type:
    for spec in _compat.ENGINE_METRICS:
        setattr(cls, spec.track_method, _track(spec))
    return cls


@_common.report_failures
@_engine_tracks  # track_tok_per_s, _accuracy, _syncs, _encoder_syncs, _encoder_calls, _peak_bytes, ...
class Engine:
    params = (list(cases.ROUTINE_PRESETS),)
    param_names = ("preset",)
    timeout = 900
    setup_cache = staticmethod(_common.routine_cache)

    def setup(self, cache, preset):
        cases.bench_device(cache["scale"])  # full scale on a CPU-only machine: skipped
