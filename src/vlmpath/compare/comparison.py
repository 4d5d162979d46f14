"""What did the comparison decide, as records: verdicts, rows, per-machine and whole reports?

``Verdict`` names what happened to one case; ``Comparison`` is one case's row,
``CrossVendorRow`` one other-backend / reference-backend ratio, ``MachineComparison`` and
``ComparisonReport`` the groups, with the JSON round trip the PR flow and the comment
workflow share: ``dumps_report`` / ``loads_report``, the one pair that writes and reads a
comparison (``vlmpath compare --json``, ``comparison.json``; older two-vendor rows are
still read: ``CrossVendorRow.from_dict``).
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from vlmpath.compare.records import SCHEMA_VERSION
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import Direction, Method


class Verdict(enum.Enum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    NEW = "new"
    REMOVED = "removed"
    NEWLY_FAILING = "newly failing"
    FIXED = "fixed"
    NOT_COMPARABLE = "not comparable"  # untrusted definition, unit changed, skipped, failing on both, machine missing


# Verdicts that fail CI: a benchmark that stops running is as bad as one that slows down.
FAILING_VERDICTS = frozenset({Verdict.REGRESSION, Verdict.NEWLY_FAILING})
# Verdicts where nothing was judged: a case on one side only (a rename is one removed and
# one new case), or one that could not be compared. Counted and named; never "unchanged".
NOT_JUDGED_VERDICTS = frozenset({Verdict.NOT_COMPARABLE, Verdict.NEW, Verdict.REMOVED})

# Exit statuses of a gating comparison (``vlmpath compare``, ``vlmpath ci pr``); 2 is bad input.
EXIT_OK, EXIT_REGRESSION, EXIT_INCOMPLETE = 0, 1, 3


@dataclass(frozen=True)
class Comparison:
    machine: str
    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    base: float | None
    head: float | None
    verdict: Verdict
    direction: Direction = Direction.LOWER  # a row with no known direction is not judged
    method: Method = Method.NONE
    factor: float | None = None
    significant: bool | None = None
    reason: str = ""
    error: str | None = None  # the failing side's own message (head; base for FIXED)
    # The run's spread (``vlmpath.compare.spread``): asv's 99% intervals, the minimum
    # detectable relative effect, a verdict from too few samples (never fails alone) and
    # "unchanged" that the run could not have seen (MDE beyond the band).
    base_ci: tuple[float, float] | None = None
    head_ci: tuple[float, float] | None = None
    mde: float | None = None
    indicative: bool = False
    too_noisy: bool = False
    #: The reason from ``benchmarks/accepted.yaml`` when a maintainer accepted this
    #: regression (``vlmpath.compare.accepted``): shown, never failing the check.
    accepted: str | None = None
    #: The reason of an entry only the pull request's own accepted.yaml holds (absent from
    #: the base branch, no maintainer's label): shown as awaiting review, still failing.
    awaiting_review: str | None = None
    #: Its meaning is not the metric table's (a method with no row, a unit the results
    #: claim against the table: ``compare.definitions``): not judged, and never green.
    untrusted: bool = False
    #: When this row stands for a whole failed case (``core.metrics.case_of``: the class
    #: and its parameters), the case's name, and how many of its other rows were left out
    #: (a failed case is one failure: its leftover counters are never compared).
    case: str = ""
    left_out: int = 0
    #: What a failed case measured that is the finding even then (``report_failed``, e.g.
    #: "accuracy 1.00 -> 0.60"): said in its one row, never judged as a row of its own.
    finding: str | None = None

    @property
    def case_key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return (self.benchmark, self.params)

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
    """One case's value on another backend's machine divided by its value on the reference
    backend's machine (``core.backends.VENDOR_REFERENCE``), at base and head. One row per
    (reference machine, other machine) pair: N GPU backends give N - 1 rows per case."""

    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    reference: str  # the reference backend ("cuda")
    reference_machine: str
    other: str  # the backend set beside it ("rocm", ...)
    other_machine: str
    base_ratio: float | None  # other / reference
    head_ratio: float | None
    reference_change: float | None  # head/base - 1 on the reference machine
    other_change: float | None
    flagged: bool  # the ratio moved beyond the GPU factor (or at all, for exact units)

    @classmethod
    def from_dict(cls, r: Mapping[str, Any]) -> CrossVendorRow:
        """A row as ``to_dict`` wrote it, or in the two-vendor shape of older artifacts
        (``cuda_machine``/``rocm_machine``, ``cuda_change``/``rocm_change``: reference CUDA,
        other ROCm)."""
        r = dict(r)
        if "reference" not in r and "cuda_machine" in r:
            r = {**{k: v for k, v in r.items() if not k.startswith(("cuda_", "rocm_"))},
                 "reference": "cuda", "reference_machine": r["cuda_machine"], "other": "rocm",
                 "other_machine": r["rocm_machine"], "reference_change": r.get("cuda_change"),
                 "other_change": r.get("rocm_change")}
        return cls(**{**r, "params": tuple((str(k), str(v)) for k, v in r["params"])})


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
    #: Why the trusted side withholds a green verdict whatever the rows say (a selection
    #: that cut cases base judged: ``compare.withheld``; the yardstick moved:
    #: ``core.yardstick.classify``). Non-empty makes the report incomplete (exit 3 unless
    #: a regression makes it 1).
    withheld: tuple[str, ...] = ()

    def all(self) -> list[Comparison]:
        return [c for m in self.machines for c in m.comparisons]

    def by_verdict(self, *verdicts: Verdict) -> list[Comparison]:
        return [c for c in self.all() if c.verdict in verdicts]

    @property
    def regressions(self) -> list[Comparison]:
        """Comparisons that fail CI: slower/worse beyond noise, or newly failing. An
        indicative verdict (fewer samples than the test needs) never fails CI by itself."""
        return [c for c in self.by_verdict(*FAILING_VERDICTS) if not c.indicative and c.accepted is None]

    @property
    def accepted(self) -> list[Comparison]:
        """Regressions listed in the accepted-regressions file: shown with the reason, not gating."""
        return [c for c in self.by_verdict(*FAILING_VERDICTS) if c.accepted is not None]

    @property
    def awaiting_review(self) -> list[Comparison]:
        """Failing rows only the PR's own accepted.yaml lists: still failing, said so."""
        return [c for c in self.regressions if c.awaiting_review is not None]

    @property
    def indicative(self) -> list[Comparison]:
        """Regressions from too few samples (e.g. quick mode): shown, not gating."""
        return [c for c in self.by_verdict(Verdict.REGRESSION) if c.indicative]

    @property
    def indicative_moves(self) -> list[Comparison]:
        """Every move (worse or better) from too few samples: shown and counted apart from
        the gating ones, never failing the check (one rule for every row of the same kind)."""
        return [c for c in self.by_verdict(Verdict.REGRESSION, Verdict.IMPROVEMENT) if c.indicative]

    @property
    def improvements(self) -> list[Comparison]:
        """Improvements that were judged with the samples the test needs (not indicative)."""
        return [c for c in self.by_verdict(Verdict.IMPROVEMENT) if not c.indicative]

    @property
    def untrusted(self) -> list[Comparison]:
        """Rows whose definition is not the metric table's: not judged, and never green."""
        return [c for c in self.all() if c.untrusted]

    @property
    def partial(self) -> bool:
        return any(m.partial for m in self.machines)

    @property
    def not_judged(self) -> list[Comparison]:
        """Cases that were not judged: on one side only (new, removed), or not comparable
        (skipped, failing on both, unit changed, machine missing, a value that is not a
        finite number in its unit's range): neither good nor bad, never "no regressions"."""
        return self.by_verdict(*NOT_JUDGED_VERDICTS)

    @property
    def judged(self) -> int:
        return len(self.all()) - len(self.not_judged)

    @property
    def incomplete(self) -> bool:
        """Nothing was judged, most cases were not, or a row's definition is untrusted: the
        verdict says little (or what it says was defined by the results themselves), and the
        exit status says so (zero judged is never green, whatever the reason)."""
        # Head's new cases are shown and never decide: they count neither way here.
        pool = [c for c in self.all() if c.verdict is not Verdict.NEW]
        unjudged = [c for c in pool if c.verdict in NOT_JUDGED_VERDICTS]
        return (self.judged == 0 or 2 * len(unjudged) > len(pool) or bool(self.untrusted)
                or bool(self.withheld))

    def exit_code(self, fail_on_regression: bool = True) -> int:
        """1 on a regression, else 3 when nothing or most cases were not judged or a row's
        definition is untrusted, else 0 (0 without gating)."""
        if not fail_on_regression:
            return EXIT_OK
        if self.regressions:
            return EXIT_REGRESSION
        return EXIT_INCOMPLETE if self.incomplete else EXIT_OK

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
                    Comparison(**{**c, "params": params(c["params"]), "verdict": Verdict(c["verdict"]),
                                  # parsed here, once: a value outside the set is one line naming the file
                                  "direction": Direction(c.get("direction", Direction.LOWER)),
                                  "method": Method(c.get("method", Method.NONE)), **_cis(c)})
                    for c in m["comparisons"]
                ),
                toolchain_changes=tuple(tuple(t) for t in m.get("toolchain_changes", ())),
                notes=tuple(m.get("notes", ())),
            )
            for m in d["machines"]
        )
        cross = tuple(CrossVendorRow.from_dict(r) for r in d.get("cross_vendor", ()))
        return cls(
            base_commit=d["base_commit"], head_commit=d["head_commit"], machines=machines,
            cross_vendor=cross, notes=tuple(d.get("notes", ())),
            thresholds_source=d.get("thresholds_source", "defaults"),
            withheld=tuple(str(w) for w in d.get("withheld", ()) or ()),
        )


def _cis(c: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (float(c[k][0]), float(c[k][1])) if c.get(k) else None for k in ("base_ci", "head_ci")}


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


def dumps_report(report: ComparisonReport) -> str:
    """The comparison as the JSON text ``vlmpath compare --json`` writes."""
    return json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n"


def loads_report(text: str, where: str) -> ComparisonReport:
    """The comparison in ``text`` (what ``dumps_report`` wrote); ``where`` names it in the
    one-line error anything else raises."""
    try:
        return ComparisonReport.from_dict(json.loads(text))
    except VlmpathError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise VlmpathError(f"{where} is not a vlmpath comparison JSON ({type(exc).__name__}: {exc}); "
                           "pass the file `vlmpath compare --json` wrote") from None
