"""Did head get worse than base, per machine, benchmark and parameter set?

``compare(base, head, thresholds)`` is a pure function over ``results.RunResults``:
no files, no printing. Direction comes from the unit (tok/s up is good, seconds up is
bad); deterministic counters and accuracy are exact (any worsening counts); timings
must be both significant by asv's own Mann-Whitney test (when both sides have enough
samples) and beyond the configured factor. ``Thresholds`` is read from the packaged
``thresholds.yaml`` (the noise band is documented there) plus an optional user file.

A failing case carries why it failed (``Comparison.error``: the head's message, the
base's for ``FIXED``), when the run filed one (``results.Metric.message``).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vlmpath.compare.results import SCHEMA_VERSION, MachineRun, Metric, RunResults
from vlmpath.core.errors import VlmpathError

GPU_BACKENDS = frozenset({"cuda", "rocm"})


class Verdict(enum.Enum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    NEW = "new"
    REMOVED = "removed"
    NEWLY_FAILING = "newly failing"
    FIXED = "fixed"
    NOT_COMPARABLE = "not comparable"  # unit changed, skipped, failing on both, machine missing


# Verdicts that fail CI: a benchmark that stops running is as bad as one that slows down.
FAILING_VERDICTS = frozenset({Verdict.REGRESSION, Verdict.NEWLY_FAILING})


# --- thresholds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitRule:
    direction: str  # "lower" | "higher"
    exact: bool = False


@dataclass(frozen=True)
class Rule:
    pattern: str
    gpu: float
    cpu: float
    unit: str | None = None

    def matches(self, benchmark: str, unit: str) -> bool:
        return re.search(self.pattern, benchmark) is not None and self.unit in (None, unit)


@dataclass(frozen=True)
class Thresholds:
    gpu_factor: float = 0.10
    cpu_factor: float = 0.50
    min_samples: int = 6
    p_threshold: float = 0.002
    units: tuple[tuple[str, UnitRule], ...] = ()
    rules: tuple[Rule, ...] = ()
    source: str = "defaults"

    def unit_rule(self, unit: str) -> UnitRule | None:
        return dict(self.units).get(unit)

    def factor_for(self, benchmark: str, unit: str, kind: str) -> float:
        """Relative noise band for one benchmark; ``kind`` is "gpu" or "cpu"."""
        for rule in self.rules:
            if rule.matches(benchmark, unit):
                return rule.gpu if kind == "gpu" else rule.cpu
        return self.gpu_factor if kind == "gpu" else self.cpu_factor

    @classmethod
    def default(cls) -> Thresholds:
        return load_thresholds(None)


def _packaged_config() -> dict[str, Any]:
    text = resources.files("vlmpath.compare").joinpath("thresholds.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _factor_pair(value: Any, where: str) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), float(value)
    if isinstance(value, Mapping) and set(value) <= {"gpu", "cpu"} and value:
        g, c = value.get("gpu", value.get("cpu")), value.get("cpu", value.get("gpu"))
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in (g, c)):
            return float(g), float(c)
    raise VlmpathError(f"{where}: factor must be a number >= 0 or {{gpu: N, cpu: N}}, got {value!r}")


def _parse_config(d: Any, where: str) -> dict[str, Any]:
    if not isinstance(d, Mapping):
        raise VlmpathError(f"{where}: expected a YAML mapping with keys factor/units/rules, got {type(d).__name__}")
    allowed = {"schema_version", "min_samples", "p_threshold", "factor", "units", "rules"}
    extra = set(d) - allowed
    if extra:
        raise VlmpathError(f"{where}: unknown keys {sorted(extra)}; allowed: {sorted(allowed)}")
    out: dict[str, Any] = {}
    if "min_samples" in d:
        if not isinstance(d["min_samples"], int) or d["min_samples"] < 2:
            raise VlmpathError(f"{where}: min_samples must be an integer >= 2, got {d['min_samples']!r}")
        out["min_samples"] = d["min_samples"]
    if "p_threshold" in d:
        p = d["p_threshold"]
        if not isinstance(p, (int, float)) or not 0 < p < 1:
            raise VlmpathError(f"{where}: p_threshold must be in (0, 1), got {p!r}")
        out["p_threshold"] = float(p)
    if "factor" in d:
        out["factor"] = _factor_pair(d["factor"], f"{where}: factor")
    units: dict[str, UnitRule] = {}
    for unit, spec in (d.get("units") or {}).items():
        if not isinstance(spec, Mapping) or spec.get("direction") not in ("lower", "higher"):
            raise VlmpathError(f"{where}: units.{unit} needs direction: lower|higher, got {spec!r}")
        units[str(unit)] = UnitRule(spec["direction"], bool(spec.get("exact", False)))
    out["units"] = units
    rules: list[Rule] = []
    for i, r in enumerate(d.get("rules") or []):
        if not isinstance(r, Mapping) or "pattern" not in r or "factor" not in r:
            raise VlmpathError(f"{where}: rules[{i}] needs pattern and factor, got {r!r}")
        try:
            re.compile(str(r["pattern"]))
        except re.error as exc:
            raise VlmpathError(f"{where}: rules[{i}].pattern {r['pattern']!r} is not a regex: {exc}") from None
        g, c = _factor_pair(r["factor"], f"{where}: rules[{i}]")
        rules.append(Rule(str(r["pattern"]), g, c, None if r.get("unit") is None else str(r["unit"])))
    out["rules"] = rules
    return out


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """Packaged defaults, overridden by the YAML file at ``path`` when given."""
    base = _parse_config(_packaged_config(), "packaged thresholds.yaml")
    source = "defaults"
    if path is not None:
        p = Path(path)
        try:
            user_raw = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise VlmpathError(f"cannot read thresholds file {p}: {exc.strerror}; pass an existing --config FILE") from None
        except yaml.YAMLError as exc:
            raise VlmpathError(f"thresholds file {p} is not valid YAML: {exc}") from None
        user = _parse_config(user_raw or {}, str(p))
        units = {**base["units"], **user["units"]}
        base.update({k: v for k, v in user.items() if k not in ("units", "rules")})
        base["units"] = units
        base["rules"] = user["rules"] + base["rules"]
        source = f"defaults + {p}"
    g, c = base.get("factor", (0.10, 0.25))
    return Thresholds(
        gpu_factor=g, cpu_factor=c,
        min_samples=base.get("min_samples", 6), p_threshold=base.get("p_threshold", 0.002),
        units=tuple(sorted(base["units"].items())), rules=tuple(base["rules"]), source=source,
    )


# --- records ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    machine: str
    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    base: float | None
    head: float | None
    verdict: Verdict
    direction: str = "lower"  # "lower" | "higher" | "unknown" (compared as lower)
    method: str = ""  # "exact" | "mann-whitney" | "threshold" | ""
    factor: float | None = None
    significant: bool | None = None
    reason: str = ""
    error: str | None = None  # the failing side's own message (head; base for FIXED)

    @property
    def ratio(self) -> float | None:
        """head / base (raw, not direction-adjusted); None if either is missing or base is 0."""
        if self.base is None or self.head is None or self.base == 0:
            return None
        return self.head / self.base

    @property
    def change(self) -> float | None:
        r = self.ratio
        return None if r is None else r - 1.0


@dataclass(frozen=True)
class CrossVendorRow:
    """ROCm/CUDA value ratio of one case at base and head, on one machine pair."""

    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    cuda_machine: str
    rocm_machine: str
    base_ratio: float | None
    head_ratio: float | None
    cuda_change: float | None  # head/base - 1 on the CUDA machine
    rocm_change: float | None
    flagged: bool  # the ratio moved beyond the GPU factor (or at all, for exact units)


@dataclass(frozen=True)
class MachineComparison:
    machine: str
    status: str  # "both" | "base-only" | "head-only"
    comparisons: tuple[Comparison, ...]
    toolchain_changes: tuple[tuple[str, str | None, str | None], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return self.status != "both" or bool(self.notes)


@dataclass(frozen=True)
class ComparisonReport:
    base_commit: str
    head_commit: str
    machines: tuple[MachineComparison, ...]
    cross_vendor: tuple[CrossVendorRow, ...] = ()
    notes: tuple[str, ...] = ()
    thresholds_source: str = "defaults"
    schema_version: int = SCHEMA_VERSION

    def all(self) -> list[Comparison]:
        return [c for m in self.machines for c in m.comparisons]

    def by_verdict(self, *verdicts: Verdict) -> list[Comparison]:
        return [c for c in self.all() if c.verdict in verdicts]

    @property
    def regressions(self) -> list[Comparison]:
        """Comparisons that fail CI: slower/worse beyond noise, or newly failing."""
        return self.by_verdict(*FAILING_VERDICTS)

    @property
    def improvements(self) -> list[Comparison]:
        return self.by_verdict(Verdict.IMPROVEMENT)

    @property
    def partial(self) -> bool:
        return any(m.partial for m in self.machines)

    def exit_code(self, fail_on_regression: bool = True) -> int:
        return 1 if fail_on_regression and self.regressions else 0

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ComparisonReport:
        if d.get("schema_version") != SCHEMA_VERSION:
            raise VlmpathError(
                f"comparison schema_version {d.get('schema_version')!r} is not {SCHEMA_VERSION}: "
                "re-run `vlmpath compare` with this version"
            )

        def params(p: Iterable) -> tuple[tuple[str, str], ...]:
            return tuple((str(k), str(v)) for k, v in p)

        machines = tuple(
            MachineComparison(
                machine=m["machine"], status=m["status"],
                comparisons=tuple(
                    Comparison(**{**c, "params": params(c["params"]), "verdict": Verdict(c["verdict"])})
                    for c in m["comparisons"]
                ),
                toolchain_changes=tuple(tuple(t) for t in m.get("toolchain_changes", ())),
                notes=tuple(m.get("notes", ())),
            )
            for m in d["machines"]
        )
        cross = tuple(CrossVendorRow(**{**r, "params": params(r["params"])}) for r in d.get("cross_vendor", ()))
        return cls(
            base_commit=d["base_commit"], head_commit=d["head_commit"], machines=machines,
            cross_vendor=cross, notes=tuple(d.get("notes", ())),
            thresholds_source=d.get("thresholds_source", "defaults"),
        )


def _jsonable(x: Any) -> Any:
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


# --- comparing ----------------------------------------------------------------------------


def _kind(*runs: MachineRun | None) -> str:
    return "gpu" if any(r is not None and r.backend in GPU_BACKENDS for r in runs) else "cpu"


def _is_different(b: Metric, h: Metric, p: float) -> bool:
    # asv's own test (private module, but it is the rule asv's compare applies):
    # Mann-Whitney U on raw samples, CI-overlap fallback when the samples are too few.
    from asv._stats import is_different

    inf = float("inf")
    stats_b = {"ci_99_a": b.ci_99[0], "ci_99_b": b.ci_99[1]} if b.ci_99 else {"ci_99_a": -inf, "ci_99_b": inf}
    stats_h = {"ci_99_a": h.ci_99[0], "ci_99_b": h.ci_99[1]} if h.ci_99 else {"ci_99_a": -inf, "ci_99_b": inf}
    return bool(is_different(list(b.samples), list(h.samples), stats_b, stats_h, p))


def judge(b: Metric, h: Metric, cfg: Thresholds, kind: str) -> Comparison:
    """Verdict for one case present on both sides (any state: ok, failed, skipped)."""
    common = dict(machine=h.machine, benchmark=h.benchmark, params=h.params, unit=h.unit,
                  base=b.value, head=h.value)
    if b.unit != h.unit:
        return Comparison(**common, verdict=Verdict.NOT_COMPARABLE, reason=f"unit changed: {b.unit} -> {h.unit}")
    if b.skipped or h.skipped:
        side = "base and head" if b.skipped and h.skipped else ("base" if b.skipped else "head")
        return Comparison(**common, verdict=Verdict.NOT_COMPARABLE, reason=f"skipped on {side}")
    if not b.ok and not h.ok:
        return Comparison(**common, verdict=Verdict.NOT_COMPARABLE, reason="failing on base and head",
                          error=h.message)
    if not h.ok:
        return Comparison(**common, verdict=Verdict.NEWLY_FAILING, reason=h.error or "failed", error=h.message)
    if not b.ok:
        return Comparison(**common, verdict=Verdict.FIXED, reason=f"base: {b.error or 'failed'}", error=b.message)

    rule = cfg.unit_rule(h.unit)
    direction = rule.direction if rule else "unknown"
    lower_better = direction != "higher"
    bv, hv = float(b.value), float(h.value)  # type: ignore[arg-type]
    worse = hv > bv if lower_better else hv < bv
    if rule is not None and rule.exact:
        same = math.isclose(bv, hv, rel_tol=1e-12, abs_tol=0.0)
        verdict = Verdict.UNCHANGED if same else (Verdict.REGRESSION if worse else Verdict.IMPROVEMENT)
        return Comparison(**common, verdict=verdict, direction=direction, method="exact", factor=0.0)

    factor = cfg.factor_for(h.benchmark, h.unit, kind)
    num, den = (hv, bv) if lower_better else (bv, hv)  # >1 means head is worse
    if num == den:
        worse_ratio = 1.0
    elif den <= 0:
        worse_ratio = math.inf if num > 0 else 0.0
    else:
        worse_ratio = num / den
    beyond = worse_ratio > 1 + factor or worse_ratio < 1 / (1 + factor)
    significant: bool | None = None
    if len(b.samples) >= cfg.min_samples and len(h.samples) >= cfg.min_samples:
        method = "mann-whitney"
        significant = _is_different(b, h, cfg.p_threshold)
        counts = beyond and significant
    else:
        method = "threshold"
        counts = beyond
    verdict = (Verdict.REGRESSION if worse else Verdict.IMPROVEMENT) if counts else Verdict.UNCHANGED
    return Comparison(**common, verdict=verdict, direction=direction, method=method,
                      factor=factor, significant=significant)


def _one_side(m: Metric, verdict: Verdict, reason: str) -> Comparison:
    return Comparison(machine=m.machine, benchmark=m.benchmark, params=m.params, unit=m.unit,
                      base=m.value if verdict is Verdict.REMOVED else None,
                      head=None if verdict is Verdict.REMOVED else m.value,
                      verdict=verdict, reason=reason,
                      error=m.message if verdict is Verdict.NEWLY_FAILING else None)


def _compare_machine(b: MachineRun | None, h: MachineRun | None, cfg: Thresholds,
                     base_commit: str, head_commit: str) -> MachineComparison:
    if b is None or h is None:
        present = h if b is None else b
        assert present is not None
        missing_side, commit = ("base", base_commit) if b is None else ("head", head_commit)
        reason = f"no {missing_side} results for this machine"
        rows = tuple(
            Comparison(machine=m.machine, benchmark=m.benchmark, params=m.params, unit=m.unit,
                       base=m.value if h is None else None, head=m.value if b is None else None,
                       verdict=Verdict.NOT_COMPARABLE, reason=reason)
            for m in present.metrics
        )
        note = f"{present.machine}: no {missing_side} results (commit {commit[:8]}); nothing compared on this machine"
        return MachineComparison(present.machine, "head-only" if b is None else "base-only", rows, notes=(note,))

    kind = _kind(b, h)
    base_by = {m.case: m for m in b.metrics}
    head_by = {m.case: m for m in h.metrics}
    rows: list[Comparison] = []
    for case in sorted(set(base_by) | set(head_by)):
        bm, hm = base_by.get(case), head_by.get(case)
        if bm is None:
            assert hm is not None
            if hm.ok:
                rows.append(_one_side(hm, Verdict.NEW, "not in base"))
            else:
                rows.append(_one_side(hm, Verdict.NEWLY_FAILING, f"new benchmark: {hm.error or 'skipped'}"))
        elif hm is None:
            why = "missing from head run" if bm.benchmark in h.missing else "not in head"
            rows.append(_one_side(bm, Verdict.REMOVED, why))
        else:
            rows.append(judge(bm, hm, cfg, kind))

    notes: list[str] = []
    for side, run in (("base", b), ("head", h)):
        failed = sum(1 for m in run.metrics if m.error is not None)
        if run.missing:
            shown = ", ".join(run.missing[:5]) + (" ..." if len(run.missing) > 5 else "")
            notes.append(f"{run.machine}: partial {side} run, {len(run.missing)} benchmark(s) missing: {shown}")
        if failed:
            notes.append(f"{run.machine}: {failed} case(s) failed in the {side} run")
        notes.extend(f"{run.machine} ({side}): {n}" for n in run.notes)
    changes: tuple[tuple[str, str | None, str | None], ...] = ()
    if b.fingerprint is not None and h.fingerprint is not None:
        changes = b.fingerprint.toolchain_diff(h.fingerprint)
    elif (b.fingerprint is None) != (h.fingerprint is None):
        side = "base" if b.fingerprint is None else "head"
        notes.append(f"{h.machine}: no platform fingerprint for {side}; cannot confirm base and head used the same toolchain")
    return MachineComparison(h.machine, "both", tuple(rows), changes, tuple(notes))


def _cross_vendor(base: RunResults, head: RunResults, cfg: Thresholds) -> tuple[CrossVendorRow, ...]:
    def by_backend(run: RunResults, backend: str) -> list[MachineRun]:
        return [m for m in run.machines if m.backend == backend]

    def value(run: MachineRun | None, case) -> float | None:
        if run is None:
            return None
        m = next((x for x in run.metrics if x.case == case), None)
        return m.value if m is not None and m.ok else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else a / b

    rows: list[CrossVendorRow] = []
    for cuda_h in by_backend(head, "cuda"):
        for rocm_h in by_backend(head, "rocm"):
            cuda_b, rocm_b = base.machine(cuda_h.machine), base.machine(rocm_h.machine)
            rocm_cases = {m.case: m for m in rocm_h.metrics}
            for cm in cuda_h.metrics:
                rm = rocm_cases.get(cm.case)
                if rm is None or rm.unit != cm.unit:
                    continue
                hr = ratio(value(rocm_h, cm.case), value(cuda_h, cm.case))
                br = ratio(value(rocm_b, cm.case), value(cuda_b, cm.case))
                if hr is None and br is None:
                    continue
                rule = cfg.unit_rule(cm.unit)
                if hr is None or br is None:
                    flagged = False
                elif rule is not None and rule.exact:
                    flagged = not math.isclose(hr, br, rel_tol=1e-12)
                else:
                    f = cfg.factor_for(cm.benchmark, cm.unit, "gpu")
                    moved = hr / br if br else math.inf
                    flagged = moved > 1 + f or moved < 1 / (1 + f)
                rows.append(CrossVendorRow(
                    benchmark=cm.benchmark, params=cm.params, unit=cm.unit,
                    cuda_machine=cuda_h.machine, rocm_machine=rocm_h.machine,
                    base_ratio=br, head_ratio=hr,
                    cuda_change=_change(value(cuda_b, cm.case), value(cuda_h, cm.case)),
                    rocm_change=_change(value(rocm_b, cm.case), value(rocm_h, cm.case)),
                    flagged=flagged,
                ))
    return tuple(rows)


def _change(b: float | None, h: float | None) -> float | None:
    return None if b is None or h is None or b == 0 else h / b - 1.0


def compare(base: RunResults, head: RunResults, config: Thresholds | None = None) -> ComparisonReport:
    """Compare every case of every machine in ``head`` with ``base`` (pure)."""
    cfg = config if config is not None else Thresholds.default()
    names = sorted(set(base.machine_names) | set(head.machine_names))
    machines = tuple(
        _compare_machine(base.machine(n), head.machine(n), cfg, base.commit, head.commit) for n in names
    )
    notes = list(dict.fromkeys(base.notes + head.notes))
    if not names:
        notes.append("no machines with results on either side")
    return ComparisonReport(
        base_commit=base.commit, head_commit=head.commit, machines=machines,
        cross_vendor=_cross_vendor(base, head, cfg), notes=tuple(notes),
        thresholds_source=cfg.source,
    )
