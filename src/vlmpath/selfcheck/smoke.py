"""Do our sync counts and device timings agree with the driver's on this machine?

The Python half of ``ci/gpu-smoke.sh`` (one prepared check for a box of any GPU backend
of ``core.backends``; runs on CPU too at ``--scale tiny``). It writes JSON into an output directory:

- ``syncs.json``: ``count_syncs`` over a whole schedule of the ``default`` and ``legacy``
  pipelines, and over one ``masked_scatter_`` / ``where_index`` injection, each with
  ``driver_count`` (warnings of ``torch.cuda.set_sync_debug_mode("warn")``, armed by
  ``count_syncs`` on a GPU; None on CPU). Does ``masked_scatter_`` sync on this torch?
  ``masked_scatter.driver_count`` says.
- ``timing.json``: one schedule timed with device events (``DeviceTimer``, per step) and
  with the host clock around the same steps plus a final sync; events should not exceed
  wall time, and on a busy GPU they should be close to it.

The headline ``vlmpath measure`` runs are the shell script's job (they are CLI calls).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from vlmpath.core.backends import gpu_labels
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE, SCALES, Scale
from vlmpath.render.summary import write_atomic as write_text_atomic
from vlmpath.suite import cases


def _prepared(preset_name: str, pipe, scale: str, session):
    from vlmpath.suite.measure import prepare

    p = prepare(preset_name, pipe.hash, scale, session)
    return p.workload, p.encoder, p.table


def _schedule(wl, enc, pipe, table, encoder_region=None):
    from contextlib import nullcontext

    from vlmpath.engines.reference import EmbedRoutine

    routine = EmbedRoutine(wl, enc, pipe, table, encoder_region=encoder_region or nullcontext)
    return [routine.run_step(step) for step in wl.steps]


def sync_checks(presets: Sequence[str], scale: str, session) -> dict:
    from contextlib import contextmanager

    from vlmpath.measure.platform import sync
    from vlmpath.measure.syncs import count_syncs
    from vlmpath.paths.registry import INJECTORS

    out: dict = {"pipelines": [], "inject": {}}
    for preset_name in presets:
        for name in cases.PIPELINE_NAMES:
            pipe = cases.pipeline(name)
            wl, enc, table = _prepared(preset_name, pipe, scale, session)
            _schedule(wl, enc, pipe, table)  # warm-up: first-call allocations are not the path's
            sync(session.device)
            tower: list = []

            @contextmanager
            def encoder_region(tower=tower):
                # A nested count pauses the outer one: tower syncs are reported apart, as
                # ``measure`` does (the routine's own syncs are what the paths change).
                with count_syncs() as inner:
                    tower.append(inner)
                    yield inner

            with count_syncs() as sc:
                _schedule(wl, enc, pipe, table, encoder_region)
                sync(session.device)
            out["pipelines"].append({
                "preset": preset_name, "pipeline": name, "stages": pipe.to_dict(),
                "count": sc.count, "driver_count": sc.driver_count, "events": dict(sc.events),
                "encoder_count": sum(t.count for t in tower),
                "encoder_driver_count": None if sc.driver_count is None else sum(t.driver_count or 0 for t in tower),
            })
    inp = cases.inject_inputs(presets[0], scale, session.device)
    for name in cases.INJECT_STRATEGY_NAMES:
        INJECTORS[name](inp.dest, inp.mask, inp.rows)
        sync(session.device)
        with count_syncs() as sc:
            INJECTORS[name](inp.dest, inp.mask, inp.rows)
        out["inject"][name] = {"count": sc.count, "driver_count": sc.driver_count}
    return out


def timing_check(preset_name: str, scale: str, session) -> dict:
    """Per-step device-event time vs host wall time of the same schedule."""
    from vlmpath.engines.reference import EmbedRoutine
    from vlmpath.measure.platform import sync
    from vlmpath.measure.timing import DeviceTimer

    pipe = cases.pipeline("default")
    wl, enc, table = _prepared(preset_name, pipe, scale, session)
    _schedule(wl, enc, pipe, table)
    sync(session.device)
    routine = EmbedRoutine(wl, enc, pipe, table)
    timers = []
    t0 = time.perf_counter()
    for step in wl.steps:
        with DeviceTimer(session.device) as t:
            routine.run_step(step)
        timers.append(t)
    sync(session.device)
    wall = time.perf_counter() - t0
    events = sum(t.seconds for t in timers)
    return {"preset": preset_name, "method": timers[0].method if timers else None, "steps": len(timers),
            "event_s": events, "wall_s": wall, "event_over_wall": events / wall if wall > 0 else None,
            "events_within_wall": events <= wall * 1.05}


def run_smoke(out_dir: str | Path, scale: Scale = DEFAULT_SCALE, presets: Sequence[str] | None = None,
              device: str | None = None) -> dict:
    """Write ``syncs.json``, ``timing.json`` and ``smoke.json`` (both, plus the fingerprint)."""
    from vlmpath.measure.platform import probe
    from vlmpath.measure.presets import PRESETS
    from vlmpath.suite.measure import Session

    presets = tuple(presets or cases.HEADLINE_PRESETS)
    for p in presets:
        if p not in PRESETS:
            raise VlmpathError(f"unknown preset {p!r} for the smoke run: choose from {', '.join(PRESETS)}")
    plat = probe()
    if SCALES[scale].gpu and not plat.is_gpu:
        raise VlmpathError(f"--scale {scale} needs a {gpu_labels()} device; use --scale {DEFAULT_SCALE} on a CPU")
    session = Session(device or plat.device)
    out = Path(out_dir)
    syncs = sync_checks(presets, scale, session)
    timing = timing_check(presets[0], scale, session)
    result = {"fingerprint": plat.to_dict(), "scale": scale, "presets": list(presets),
              "syncs": syncs, "timing": timing}
    for name, data in (("syncs.json", syncs), ("timing.json", timing), ("smoke.json", result)):
        write_text_atomic(out / name, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return result
