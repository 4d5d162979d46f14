"""What is one measured number, and how are a commit's numbers grouped per machine?

The typed records every reader produces and the comparison consumes: ``Metric`` (one
benchmark at one parameter combination on one machine), ``Fingerprint`` (the platform a
run was measured on), ``MachineRun`` and ``RunResults``. Frozen, JSON round-trippable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from vlmpath.core.backends import backend_from_machine
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import extra_info_units
from vlmpath.measure.gpu_state import SETTING_FIELDS

SCHEMA_VERSION = 1

# Fingerprint keys whose change makes timings between two runs incomparable.
TOOLCHAIN_KEYS = ("backend", "device_name", "arch", "torch", "cuda", "hip", "driver")
FINGERPRINT_KEYS = TOOLCHAIN_KEYS + ("transformers", "python", "cpu", "machine", "vlmpath")
#: GPU settings compared between base and head (the fingerprint's ``gpu_state``).
GPU_SETTING_KEYS = SETTING_FIELDS
#: Prefix of a GPU-setting change in ``toolchain_diff`` (renderers tell the two apart).
GPU_KEY_PREFIX = "gpu."
#: ``<machine dir>/vlmpath-fingerprint-<sha8>.json``, written by ``vlmpath run``.
FINGERPRINT_PREFIX = "vlmpath-fingerprint-"
#: ``<machine dir>/vlmpath-run-<sha8>.json``: how the results were measured (``vlmpath.pr.base_reuse``).
RUN_INFO_PREFIX = "vlmpath-run-"
#: ``Metric.error`` of a failed asv case whose own message is unknown.
NO_RESULT_ERROR = "failed (asv recorded no result)"

# pytest-benchmark ``extra_info`` keys that carry a metric, and the unit each has: the
# metric table's routine metrics (``vlmpath.core.metrics``).
EXTRA_INFO_UNITS: Mapping[str, str] = extra_info_units()


@dataclass(frozen=True)
class Metric:
    """One measured number: a benchmark at one parameter combination on one machine.

    ``value`` is None when the benchmark failed (``error`` says so) or was skipped.
    ``samples`` are the raw repeats (empty when the source kept none); ``ci_99`` is
    asv's 99% interval when it is finite.
    """

    machine: str
    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    value: float | None
    samples: tuple[float, ...] = ()
    ci_99: tuple[float, float] | None = None
    error: str | None = None
    skipped: bool = False
    commit: str = ""
    source: str = "asv"
    #: Why the recorded value cannot be judged (a string, a boolean, non-finite, out of the
    #: unit's range: ``vlmpath.compare.values``); the case is "not judged", never a number.
    invalid: str | None = None
    #: asv's benchmark version (a hash of its source) when the reader knows it.
    version: str | None = None
    #: Why the row's meaning cannot be trusted: its method has no row in the metric table,
    #: or the artifact claims a unit the table disagrees with (``compare.definitions``).
    #: Such a row is not judged, and the comparison is never green.
    untrusted: str | None = None

    @property
    def case(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Identity of the measurement across commits and machines."""
        return (self.benchmark, self.params)

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None and not self.skipped and self.invalid is None

    @property
    def message(self) -> str | None:
        """Why the case failed, in the benchmark's own words; None when unknown or not failed."""
        return None if self.error in (None, NO_RESULT_ERROR) else self.error

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metric:
        from vlmpath.compare.values import checked

        ci = d.get("ci_99")
        value, invalid = checked(d.get("value"), str(d["unit"]))
        return cls(
            machine=d["machine"],
            benchmark=d["benchmark"],
            params=tuple((str(k), str(v)) for k, v in d.get("params", ())),
            unit=d["unit"],
            value=value,
            samples=tuple(float(x) for x in d.get("samples", ()) if checked(x, "")[1] is None and x is not None),
            ci_99=(float(ci[0]), float(ci[1])) if ci else None,
            error=d.get("error"),
            skipped=bool(d.get("skipped", False)),
            commit=d.get("commit", ""),
            source=d.get("source", "asv"),
            invalid=invalid or d.get("invalid"),
            version=d.get("version"),
            untrusted=d.get("untrusted"),
        )


@dataclass(frozen=True)
class Fingerprint:
    """The platform a run was measured on (written by ``vlmpath run`` next to results)."""

    backend: str | None = None
    device_name: str | None = None
    arch: str | None = None
    torch: str | None = None
    cuda: str | None = None
    hip: str | None = None
    driver: str | None = None
    transformers: str | None = None
    python: str | None = None
    cpu: str | None = None
    machine: str | None = None
    vlmpath: str | None = None
    #: The GPU's settings (``vlmpath.measure.gpu_state.GpuState.settings``: clocks, power
    #: limit, modes, ECC) as sorted (field, value) pairs; () when no vendor tool answered.
    gpu: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fingerprint:
        # Unknown keys are ignored: newer writers may record more than we compare.
        # ``gpu_state`` as ``vlmpath run`` writes it; ``gpu`` pairs as our own to_dict does.
        state = d.get("gpu_state") if isinstance(d.get("gpu_state"), Mapping) else dict(d.get("gpu") or ())
        gpu = tuple(sorted((str(k), _setting_text(v)) for k, v in state.items()
                           if k in GPU_SETTING_KEYS and v is not None))
        return cls(**{k: (None if d.get(k) is None else str(d[k])) for k in FINGERPRINT_KEYS}, gpu=gpu)

    def toolchain_diff(self, other: Fingerprint) -> tuple[tuple[str, str | None, str | None], ...]:
        """(key, self value, other value) for each toolchain key that differs, then each GPU
        setting that differs (``gpu.<field>``; only when both sides recorded a GPU state)."""
        return tuple(
            (k, getattr(self, k), getattr(other, k))
            for k in TOOLCHAIN_KEYS
            if getattr(self, k) != getattr(other, k)
        ) + self.gpu_diff(other)

    def gpu_diff(self, other: Fingerprint) -> tuple[tuple[str, str | None, str | None], ...]:
        if not self.gpu or not other.gpu:
            return ()
        a, b = dict(self.gpu), dict(other.gpu)
        return tuple((f"{GPU_KEY_PREFIX}{k}", a.get(k), b.get(k))
                     for k in GPU_SETTING_KEYS if a.get(k) != b.get(k))


@dataclass(frozen=True)
class MachineRun:
    """All metrics of one commit on one machine, with what was missing from the run."""

    machine: str
    commit: str
    metrics: tuple[Metric, ...]
    fingerprint: Fingerprint | None = None
    missing: tuple[str, ...] = ()  # benchmarks asv knows about but this run lacks
    notes: tuple[str, ...] = ()
    #: Whether the run was quick (one sample per timing), as its run-info file records it
    #: (``vlmpath run`` / ``ci pr``); None when no run-info file says.
    quick: bool | None = None

    @property
    def partial(self) -> bool:
        return bool(self.missing) or any(not m.ok for m in self.metrics)

    @property
    def backend(self) -> str:
        """cuda | rocm | cpu: from the fingerprint, else from the machine-name prefix."""
        if self.fingerprint is not None and self.fingerprint.backend:
            return self.fingerprint.backend
        return backend_from_name(self.machine)


@dataclass(frozen=True)
class RunResults:
    """One commit's results over every machine that has them."""

    commit: str
    machines: tuple[MachineRun, ...]
    source: str = "asv"
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION

    def machine(self, name: str) -> MachineRun | None:
        return next((m for m in self.machines if m.machine == name), None)

    @property
    def machine_names(self) -> tuple[str, ...]:
        return tuple(m.machine for m in self.machines)

    def metrics(self) -> Iterator[Metric]:
        for m in self.machines:
            yield from m.metrics

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunResults:
        if d.get("schema_version") != SCHEMA_VERSION:
            raise VlmpathError(
                f"run results schema_version {d.get('schema_version')!r} is not "
                f"{SCHEMA_VERSION}: regenerate the file with this vlmpath version"
            )
        machines = tuple(
            MachineRun(
                machine=m["machine"],
                commit=m["commit"],
                metrics=tuple(Metric.from_dict(x) for x in m["metrics"]),
                fingerprint=Fingerprint.from_dict(m["fingerprint"]) if m.get("fingerprint") else None,
                missing=tuple(m.get("missing", ())),
                notes=tuple(m.get("notes", ())),
                quick=m.get("quick"),
            )
            for m in d["machines"]
        )
        return cls(
            commit=d["commit"], machines=machines, source=d.get("source", "asv"),
            notes=tuple(d.get("notes", ())),
        )


def _setting_text(v: Any) -> str:
    return f"{float(v):g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def backend_from_name(machine: str) -> str:
    """The machine-name prefix's backend (the backend table, ``vlmpath.core.backends``)."""
    return backend_from_machine(machine)


def _either_quick(a: bool | None, b: bool | None) -> bool | None:
    return None if a is None and b is None else bool(a) or bool(b)


def merge_runs(a: RunResults, b: RunResults) -> RunResults:
    """One RunResults from two sources (asv + pytest-benchmark) of the same commit."""
    by_name: dict[str, MachineRun] = {m.machine: m for m in a.machines}
    for m in b.machines:
        old = by_name.get(m.machine)
        if old is None:
            by_name[m.machine] = m
        else:
            by_name[m.machine] = replace(
                old,
                metrics=old.metrics + m.metrics,
                fingerprint=old.fingerprint or m.fingerprint,
                missing=old.missing + m.missing,
                notes=old.notes + m.notes,
                quick=_either_quick(old.quick, m.quick),
            )
    return RunResults(
        commit=a.commit or b.commit,
        machines=tuple(by_name[k] for k in sorted(by_name)),
        source=f"{a.source}+{b.source}",
        notes=a.notes + b.notes,
    )

