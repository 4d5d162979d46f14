"""Can ``vlmpath measure`` run what it was asked, checked before a single case runs?

Everything a measurement could trip over later is refused here, in one line naming the
input and the fix (``vlmpath.core.validate`` holds the primitives and stated limits): the
``--json`` file must be writable (a half-minute measurement used to end in a traceback
there), the device must exist on this torch build, numbers must be in range, and a named
``--pipeline`` cannot be combined with per-stage flags (it sets every stage, so
``--pipeline legacy --encode per_request`` silently ignored the stage flag), and a GPU
scale is refused on a CPU device unless asked for by name (``--scale full`` on a CPU ran for
minutes and took 2.4 GB before anyone learned it was the wrong machine). Strategy and
preset names are checked against their registries (``paths.registry``,
``measure.presets``), which name their implementations lazily: this module and its checks
import no torch, so a misspelt name is refused before torch loads (seconds).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.core.validate import MAX_REPEAT, MAX_SEED, check_device, check_int, check_output_file
from vlmpath.measure.presets import PRESETS, TRACE_PREFIX
from vlmpath.paths.registry import STAGES


def resolve_device(device: str | None) -> str:
    """``device`` checked against this torch build; None: ``cuda:0`` if a GPU is seen, else cpu."""
    import torch

    if device is None:
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return check_device(device, cuda_available=torch.cuda.is_available,
                        device_count=torch.cuda.device_count, build=f"torch {torch.__version__}")


def check_measure_inputs(*, json_path: str | None, repeat: int, seed: int,
                         pipelines: Sequence[str] | None, stages: Mapping[str, Sequence[str] | None],
                         weights: str | None = None) -> None:
    """Refuse bad ``vlmpath measure`` arguments before any case is built (see the docstring)."""
    check_int(repeat, "--repeat", lo=1, hi=MAX_REPEAT)
    check_int(seed, "--seed", lo=0, hi=MAX_SEED)
    chosen = [f"--{k} {v}" for k, vals in stages.items() for v in (vals or ())]
    if pipelines and chosen:
        raise VlmpathError(
            f"--pipeline {pipelines[0]} sets every stage, so {', '.join(chosen)} would be ignored: "
            "drop --pipeline to choose stages one by one, or drop the stage flags")
    if weights is not None:
        from pathlib import Path

        if not Path(weights).is_dir():
            raise VlmpathError(f"--weights {weights!r} is not a directory: pass a local "
                               "Qwen2.5-VL checkpoint directory holding *.safetensors")
    if json_path is not None:
        check_output_file(json_path, "--json")


def check_choices(stages: Mapping[str, Sequence[str] | None], workloads: Sequence[str] | None) -> None:
    """Every stage name (``--encode`` ...: ``paths.registry.STAGES``) and workload
    (``measure.presets.PRESETS`` or ``trace:PATH``) known, with a "did you mean" for a close
    one; a file given as a workload without ``trace:`` says so. No torch import."""
    for flag, names in stages.items():
        registry = STAGES[flag]
        for name in names or ():
            if name not in registry:  # membership only: nothing is imported
                raise UnknownNameError(registry.kind, name, registry)
    for name in workloads or ():
        if name.startswith(TRACE_PREFIX) or name in PRESETS:
            continue
        if os.sep in name or name.endswith((".jsonl", ".json")) or os.path.exists(name):
            raise VlmpathError(f"--workload {name!r} is a path, not a preset: a trace file is named "
                               f"{TRACE_PREFIX}PATH, e.g. --workload {TRACE_PREFIX}{name}")
        raise UnknownNameError(PRESETS.kind, name, [*PRESETS, f"{TRACE_PREFIX}FILE.jsonl"])


def names_for_help() -> str:
    """The names ``vlmpath measure`` accepts, for ``--help`` (read from the registries)."""
    from vlmpath.engines.pipelines import NAMED_PIPELINES

    rows = [("workload presets", [*PRESETS, f"{TRACE_PREFIX}FILE.jsonl"])]
    rows += [(f"--{flag}", sorted(registry)) for flag, registry in STAGES.items()]
    rows += [("--pipeline", sorted(NAMED_PIPELINES))]
    return "names:\n" + "\n".join(f"  {k}: {', '.join(v)}" for k, v in rows)


def check_scale_device(scale: Scale, device: str, *, allow_cpu: bool = False) -> None:
    """Refuse a GPU scale (``core.scales``) on a CPU device, unless ``allow_cpu``."""
    from vlmpath.core.backends import gpu_labels
    from vlmpath.core.scales import DEFAULT_SCALE, SCALES

    if SCALES[scale].gpu and device.split(":")[0] == "cpu" and not allow_cpu:
        raise VlmpathError(f"--scale {scale} needs a {gpu_labels()} device and this run is on {device}: "
                           f"use --scale {DEFAULT_SCALE} on a CPU, or add --allow-cpu to run it here anyway "
                           "(minutes per case and GBs of memory)")
