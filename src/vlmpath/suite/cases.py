"""Which named cases does the benchmark suite measure, per path, and how are their inputs built?

The one case registry behind the asv suite (``benchmarks/``), its pytest-benchmark mirror
(``tests/bench/``) and ``vlmpath run``. Every axis is built from the public registries
(``Registry.default_names()``: known-bad replays are left out of the default suite), so a
newly registered strategy is benchmarked without touching the benchmark files.

Names are data, resolved at *call* time: ``pipeline("default")`` reads
``vlmpath.engines.pipelines.DEFAULT_PIPELINE`` when a benchmark runs, not when this module was
imported, so changing the package's default changes what the ``default`` rows measure
(the PR-replay test relies on it).

Scale comes from the environment (``VLMPATH_SCALE``: ``tiny`` or ``full``), because asv
has no way to pass arguments to a benchmark; ``full`` on a CPU-only machine raises
``NotImplementedError``, which asv records as *skipped*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from vlmpath.core.backends import gpu_labels
from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.metrics import record_metrics
from vlmpath.core.scales import DEFAULT_SCALE, SCALES, Scale
from vlmpath.engines.pipelines import NAMED_PIPELINES, Pipeline
from vlmpath.measure.presets import PRESETS
from vlmpath.measure.workload import Workload, preset
from vlmpath.suite.bench_env import BenchEnv
from vlmpath.paths.count import CountQuery
from vlmpath.paths.registry import COUNTERS, ENCODE_STRATEGIES, HASH_PATHS, INJECTORS


# --- axes (asv ``params``) ---------------------------------------------------------------
ENCODE_STRATEGY_NAMES: tuple[str, ...] = tuple(ENCODE_STRATEGIES.default_names())
INJECT_STRATEGY_NAMES: tuple[str, ...] = tuple(INJECTORS.default_names())
COUNT_STRATEGY_NAMES: tuple[str, ...] = tuple(COUNTERS.default_names())
HASH_PATH_NAMES: tuple[str, ...] = tuple(HASH_PATHS.default_names())
PIPELINE_NAMES: tuple[str, ...] = tuple(NAMED_PIPELINES)
#: Every preset: the routine benchmarks (encode, embed) run all of them.
ROUTINE_PRESETS: tuple[str, ...] = tuple(PRESETS)
#: Injection inputs: the largest step of these presets (few large images: one long
#: masked run per image; many small: many short runs; multi-region: runs split by text).
INJECT_PRESETS: tuple[str, ...] = ("few_large_images", "many_small_images", "multi_region")
HASH_SIZES_MIB: tuple[int, ...] = (1, 16, 64)
#: The opt-in serve benchmarks (``bench_serve.Serve``, ``vlmpath run --serve DIR``): the
#: presets sent to a real server as image requests (image sizes, multi-image requests,
#: video frames, multi-region items) and the concurrency levels (requests in flight).
SERVE_PRESETS: tuple[str, ...] = ("many_small_images", "video", "multi_region")
SERVE_CONCURRENCY: tuple[int, ...] = (1, 4)
#: The cases the GPU smoke job measures at full scale.
HEADLINE_PRESETS: tuple[str, ...] = ("many_small_images", "few_large_images", "multi_region")


# The benchmark modules (head's) call these two by name in either side's package: keep them.
def scale_from_env(env: Mapping[str, str] | None = None) -> Scale:
    """The run's scale, as ``vlmpath run`` handed it to this benchmark process (``BenchEnv``)."""
    return BenchEnv.read(env).scale


def quick_from_env(env: Mapping[str, str] | None = None) -> bool:
    return BenchEnv.read(env).quick


#: Timed passes per routine case outside quick mode: asv's Mann-Whitney test needs >= 7
#: samples per side to ever reach p < 0.002 (``thresholds.yaml``'s ``min_samples``).
ROUTINE_SAMPLES = 8


def routine_repeat(quick: bool) -> int:
    """Timed passes per ``measure_case`` inside a track benchmark (1 in quick mode)."""
    return 1 if quick else ROUTINE_SAMPLES


def bench_device(scale: Scale) -> str:
    """The device a benchmark at ``scale`` runs on; ``full`` without a GPU is a skip."""
    from vlmpath.measure.platform import probe

    plat = probe()
    if SCALES[scale].gpu and not plat.is_gpu:
        # asv turns NotImplementedError raised in setup into "skipped" (n/a), not a failure.
        raise NotImplementedError(f"scale {scale!r} needs a {gpu_labels()} device; this machine is CPU-only")
    return plat.device


def pipeline(name: str) -> Pipeline:
    """A named pipeline, read from ``vlmpath.engines.pipelines`` now (see the module docstring)."""
    from vlmpath.engines import pipelines

    named = pipelines.NAMED_PIPELINES  # the registry, read at call time
    if name not in named:
        raise UnknownNameError("pipeline", name, named)
    return named[name]


def encode_pipeline(strategy: str) -> Pipeline:
    """The default pipeline with only the encode stage replaced."""
    ENCODE_STRATEGIES[strategy]  # unknown names fail here, with the choices listed
    return replace(pipeline("default"), encode=strategy)


@dataclass(frozen=True)
class RoutineCase:
    """One embedding-routine case: a workload preset through one pipeline.

    ``path`` is ``encode`` (``variant`` is an encode strategy, other stages default) or
    ``embed`` (``variant`` is a named pipeline).
    """

    path: str
    variant: str
    preset: str

    @property
    def label(self) -> str:
        return f"{self.path}:{self.variant}/{self.preset}"

    def pipeline(self) -> Pipeline:
        if self.path == "encode":
            return encode_pipeline(self.variant)
        if self.path == "embed":
            return pipeline(self.variant)
        raise VlmpathError(f"unknown routine path {self.path!r}: use 'encode' or 'embed'")

    def measure_case(self, scale: Scale, seed: int = 0):
        from vlmpath.suite.measure import Case

        return Case(self.preset, self.pipeline(), scale, seed)


def encode_cases() -> tuple[RoutineCase, ...]:
    return tuple(RoutineCase("encode", s, p) for s in ENCODE_STRATEGY_NAMES for p in ROUTINE_PRESETS)


def embed_cases() -> tuple[RoutineCase, ...]:
    return tuple(RoutineCase("embed", n, p) for n in PIPELINE_NAMES for p in ROUTINE_PRESETS)


def record_summary(record) -> dict:
    """The numbers a routine benchmark reports, as a plain (picklable, torch-free) dict."""
    # Every metric a case reports (``vlmpath.core.metrics``) is a field of the record.
    numbers = {m.name: getattr(record, m.name) for m in record_metrics()}
    return {
        **numbers,
        "wall_s": record.wall_s,
        "samples": list(record.samples),
        "prefill_tokens": record.prefill_tokens,
        # The receiver's hash time (arrival, not part of tok/s): kept so that the CPU PR
        # job, which runs bench_embed only, still gates the hash path.
        "hash_s": record.hash_s,
        "error": record.error,
        # Peak memory (``vlmpath.measure.memory``, table rows peak_bytes / reserved_bytes):
        # None = not measured, the reason beside it.
        "memory_reason": (record.memory or {}).get("reason"),
    }


class CaseFailed(RuntimeError):
    """A measured case recorded an error; ``case_error`` is that error ("Type: message"),
    which the benchmark suite reports as the reason the benchmark failed."""

    def __init__(self, message: str, case_error: str):
        super().__init__(message)
        self.case_error = case_error


def require_ok(summary: Mapping, metric: str) -> float:
    """The metric, or raise: a failing strategy is a failed benchmark, never a number."""
    if summary.get("error"):
        raise CaseFailed(f"case failed, no {metric}: {summary['error']}", str(summary["error"]))
    value = summary.get(metric)
    if value is None:
        raise RuntimeError(f"case recorded no {metric}")
    return float(value)


def require_measured(summary: Mapping, metric: str) -> float:
    """A memory metric (``peak_bytes``/``reserved_bytes``): the number, a failure if the case
    failed, or ``NotImplementedError`` (asv: skipped, never a 0) when it was not measured:
    this device has no counter for it, or the package under test predates the metric."""
    if summary.get("error"):
        require_ok(summary, metric)
    value = summary.get(metric)
    if value is None:
        why = summary.get("memory_reason") if metric in summary else "the package under test does not record it"
        raise NotImplementedError(f"{metric} not measured: {why or 'no reason recorded'}")
    return float(value)


# --- injection inputs ----------------------------------------------------------------------
@dataclass(frozen=True)
class InjectInputs:
    """One forward step's injection: ``dest[N, H]``, ``mask[N, 1]`` and ``rows[K, H]``.

    Built from a preset's step with the most placeholder tokens: the real id layout and
    placeholder runs of the workload, seeded random values (the numbers do not matter,
    the shapes and the mask pattern do). ``query`` is the same step for token counting.
    """

    dest: torch.Tensor
    mask: torch.Tensor
    rows: torch.Tensor
    query: CountQuery

    @property
    def tokens(self) -> int:
        return int(self.dest.shape[0])

    @property
    def count(self) -> int:
        return int(self.rows.shape[0])

    @property
    def moved_bytes(self) -> int:
        """Bytes an ideal injection moves: read every row once, write it once."""
        return 2 * self.rows.numel() * self.rows.element_size()


def _busiest_step(wl: Workload):
    def mm_tokens(step) -> int:
        from vlmpath.paths.count import count_from_offsets

        reqs = [wl.requests[e.rid] for e in step.entries]
        return count_from_offsets([e.prefix for e in step.entries], [e.extend for e in step.entries],
                                  [[o for it in r.items for o in it.offsets] for r in reqs])

    return max(wl.steps, key=mm_tokens)


def inject_inputs(preset_name: str, scale: Scale = DEFAULT_SCALE, device: str | torch.device = "cpu",
                  seed: int = 0) -> InjectInputs:
    """Inputs for the inject and count benchmarks (see ``InjectInputs``)."""
    from vlmpath.measure.encoders import family_of

    wl = preset(preset_name, scale, seed)  # an unknown name: the registry's error, with the choices
    step = _busiest_step(wl)
    reqs = [wl.requests[e.rid] for e in step.entries]
    ids = torch.cat([r.input_ids[e.prefix:e.prefix + e.extend] for r, e in zip(reqs, step.entries)])
    pads = torch.tensor(sorted({it.pad_value for r in reqs for it in r.items}), dtype=torch.int64)
    mask = torch.isin(ids, pads).unsqueeze(-1)
    count = int(mask.sum())
    cfg = family_of(wl.model).tower(scale)
    gen = torch.Generator().manual_seed(seed + 101)
    dest = torch.randn(ids.shape[0], cfg.out_dim, generator=gen).to(device=device, dtype=cfg.dtype)
    rows = torch.randn(count, cfg.out_dim, generator=gen).to(device=device, dtype=cfg.dtype)
    query = CountQuery(
        mask.to(device),
        tuple(e.prefix for e in step.entries),
        tuple(e.extend for e in step.entries),
        tuple(tuple(o for it in r.items for o in it.offsets) for r in reqs),
    )
    return InjectInputs(dest, mask.to(device), rows, query)


# --- hashing inputs ------------------------------------------------------------------------
def hash_feature(size_mib: int, seed: int = 0) -> torch.Tensor:
    """A float32 CPU feature of exactly ``size_mib`` MiB (seeded)."""
    if size_mib <= 0:
        raise VlmpathError(f"hash feature size must be a positive number of MiB, got {size_mib}")
    gen = torch.Generator().manual_seed(seed + size_mib)
    return torch.randn(size_mib * 2**20 // 4, generator=gen)
