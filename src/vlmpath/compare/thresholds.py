"""How much may a number move before it counts, and which way is better?

``Thresholds`` is read from the packaged ``thresholds.yaml`` (the noise band is
documented there) plus an optional user file (``--config``): per unit a direction and a
comparison method (exact for deterministic counters and accuracy, a factor band for
timings), per benchmark pattern an override. Direction and exactness of every unit a
metric-table row has (``vlmpath.core.metrics``) come from the table, never from a yaml:
the table's rule wins over the packaged yaml, which lists only units no row has (``ms``).

A user ``--config`` may be a file the pull request wrote, so it sets **bands only**
(``factor``, ``rules`` of pattern/factor/unit, ``min_samples``, ``p_threshold``): a key
that would decide a metric's meaning (``units``, or ``direction``/``exact``/
``deterministic`` in a rule) is refused in one line naming the key (``USER_REFUSED``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vlmpath.core import safe_yaml
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import Direction, metric_by_unit


@dataclass(frozen=True)
class UnitRule:
    direction: Direction
    exact: bool = False
    # A deterministic measurement judged by its band alone (instruction counts): one
    # value per side is a full measurement, never "indicative" for lack of samples.
    deterministic: bool = False


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
    cpu_factor: float = 0.20
    min_samples: int = 7
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


def table_disagreements(th: Thresholds) -> list[str]:
    """Where the thresholds' per-unit direction/exactness differ from the metric table
    (``vlmpath.core.metrics``, the source of truth); empty when they agree. The packaged
    yaml must agree (a test); a user ``--config`` cannot set a unit rule at all."""
    out = []
    for unit, spec in metric_by_unit().items():
        rule = th.unit_rule(unit)
        if rule is None:
            out.append(f"unit {unit!r} ({spec.name}) has no rule")
        elif (rule.direction, rule.exact) != (spec.direction, spec.exact):
            out.append(f"unit {unit!r}: thresholds say {rule.direction}/{'exact' if rule.exact else 'banded'}, "
                       f"the metric table says {spec.direction}/{'exact' if spec.exact else 'banded'}")
    return out


def table_unit_rules() -> dict[str, UnitRule]:
    """unit -> rule for every unit of the metric table (its rows and asv's implied units)."""
    return {unit: UnitRule(spec.direction, spec.exact, spec.deterministic) for unit, spec in metric_by_unit().items()}


def _packaged_config(text: str | None = None) -> dict[str, Any]:
    if text is None:
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


#: Keys a user ``--config`` may not set: what a metric means is the metric table's alone.
USER_REFUSED = ("units", "direction", "exact", "deterministic")
RULE_KEYS = {"pattern", "factor", "unit"}


def _refuse_meaning(d: Mapping, where: str) -> None:
    """One line naming the first key of a user file that would set a direction, unit or exactness."""
    if "units" in d:
        units = d["units"]
        first = next(iter(units), None) if isinstance(units, Mapping) else None
        key = "units" if first is None else f"units.{first}"
        raise VlmpathError(f"{where}: key {key!r} would set a metric's direction/exactness; those come only "
                           "from the metric table (src/vlmpath/core/metrics.py); a --config sets bands only "
                           "(factor, rules: pattern/factor/unit, min_samples, p_threshold): remove the key")
    for i, r in enumerate(d.get("rules") or []):
        bad = sorted(set(r) - RULE_KEYS) if isinstance(r, Mapping) else []
        if bad:
            what = ("would set a metric's direction/exactness, which come only from the metric table "
                    "(src/vlmpath/core/metrics.py)" if set(bad) & set(USER_REFUSED) else "is not a rule key")
            raise VlmpathError(f"{where}: key 'rules[{i}].{bad[0]}' {what}; a rule has only "
                               f"{sorted(RULE_KEYS)}: remove the key")


def _parse_config(d: Any, where: str, *, user: bool = False) -> dict[str, Any]:
    if user and isinstance(d, Mapping):
        _refuse_meaning(d, where)
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
        if not isinstance(spec, Mapping) or spec.get("direction") not in tuple(Direction):
            raise VlmpathError(f"{where}: units.{unit} needs direction: {'|'.join(Direction)}, got {spec!r}")
        units[str(unit)] = UnitRule(Direction(spec["direction"]), bool(spec.get("exact", False)),
                                    bool(spec.get("deterministic", False)))
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


def load_thresholds(path: str | Path | None = None, *, packaged: tuple[str, str] | None = None) -> Thresholds:
    """Packaged defaults (the metric table's units plus the yaml), overridden by the YAML
    file at ``path`` when given. ``packaged`` (text, name): another revision's packaged
    yaml in place of this package's (the PR flow judges with the base's, not head's)."""
    text, name = packaged if packaged is not None else (None, "packaged thresholds.yaml")
    try:
        raw = _packaged_config(text)
    except yaml.YAMLError as exc:
        raise VlmpathError(f"{name} is not valid YAML: {exc}") from None
    base = _parse_config(raw, name)
    base["units"] = {**base["units"], **table_unit_rules()}  # the table's rows win
    source = "defaults" if packaged is None else name
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise VlmpathError(f"cannot read thresholds file {p}: it does not exist; pass an existing --config FILE")
        # A --config can be a file a PR wrote: no aliases, tags or merge keys; bounded.
        user_raw = safe_yaml.load_file(p, "thresholds file", "fix the file or pass another --config FILE")
        user = _parse_config(user_raw or {}, str(p), user=True)
        base.update({k: v for k, v in user.items() if k not in ("units", "rules")})
        base["rules"] = user["rules"] + base["rules"]
        source = f"defaults + {p}"
    g, c = base.get("factor", (0.10, 0.25))
    return Thresholds(
        gpu_factor=g, cpu_factor=c,
        min_samples=base.get("min_samples", 6), p_threshold=base.get("p_threshold", 0.002),
        units=tuple(sorted(base["units"].items())), rules=tuple(base["rules"]), source=source,
    )

