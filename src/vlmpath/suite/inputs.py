"""Can ``vlmpath measure`` run what it was asked, checked before a single case runs?

Everything a measurement could trip over later is refused here, in one line naming the
input and the fix (``vlmpath.core.validate`` holds the primitives and stated limits): the
``--json`` file must be writable (a half-minute measurement used to end in a traceback
there), the device must exist on this torch build, numbers must be in range, and a named
``--pipeline`` cannot be combined with per-stage flags (it sets every stage, so
``--pipeline legacy --encode per_request`` silently ignored the stage flag), and a GPU
scale is refused on a CPU device unless asked for by name (``--scale full`` on a CPU ran for
minutes and took 2.4 GB before anyone learned it was the wrong machine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.core.validate import MAX_REPEAT, MAX_SEED, check_device, check_int, check_output_file


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


def names_for_help() -> str:
    """The names ``vlmpath measure`` accepts, for ``--help`` (read from the registries)."""
    from vlmpath.engines.pipelines import NAMED_PIPELINES
    from vlmpath.measure.workload import PRESETS
    from vlmpath.paths.count import COUNTERS
    from vlmpath.paths.encode import ENCODE_STRATEGIES
    from vlmpath.paths.hashing import HASH_PATHS
    from vlmpath.paths.inject import INJECTORS

    rows = [("workload presets", list(PRESETS) + ["trace:FILE.jsonl"]),
            ("--encode", sorted(ENCODE_STRATEGIES)), ("--inject", sorted(INJECTORS)),
            ("--count", sorted(COUNTERS)), ("--hash", sorted(HASH_PATHS)),
            ("--pipeline", sorted(NAMED_PIPELINES))]
    return "names:\n" + "\n".join(f"  {k}: {', '.join(v)}" for k, v in rows)


def check_scale_device(scale: Scale, device: str, *, allow_cpu: bool = False) -> None:
    """Refuse a GPU scale (``core.scales``) on a CPU device, unless ``allow_cpu``."""
    from vlmpath.core.backends import gpu_labels
    from vlmpath.core.scales import DEFAULT_SCALE, SCALES

    if SCALES[scale].gpu and device.split(":")[0] == "cpu" and not allow_cpu:
        raise VlmpathError(f"--scale {scale} needs a {gpu_labels()} device and this run is on {device}: "
                           f"use --scale {DEFAULT_SCALE} on a CPU, or add --allow-cpu to run it here anyway "
                           "(minutes per case and GBs of memory)")
