"""Did head change a case when base and head were measured in alternating rounds?

``vlmpath ci pr --interleave N`` runs base, head, base, head, ... (each round a fresh
process) in one time window, so a neighbour's load that comes and goes hits both sides of
a round alike. ``paired_report`` starts from the ordinary comparison of the last round
(exact gates, failures, new/removed stay as they are) and re-judges every timing-like
case (not exact, ok on both sides in every round) by pairing the rounds: each round's
head/base ratio of the case's value (its median), then ``spread.paired_shift`` (a
signed-rank test over the rounds, and the band). Fewer than ``MIN_ROUNDS`` rounds cannot reach
p < ``P_THRESHOLD`` (the smallest two-sided p of n rounds is 2/2^n): such verdicts are
indicative, like quick mode's, and a row they leave unchanged reads "too noisy to judge".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vlmpath.compare import spread
from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.records import RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.metrics import Direction, Method

#: The signed-rank test's level for paired rounds (its smallest p at n rounds is 2/2^n).
P_THRESHOLD = 0.05
MIN_ROUNDS = 6


def _values(runs: Sequence[RunResults], machine: str) -> list[dict]:
    out = []
    for run in runs:
        m = run.machine(machine)
        out.append({} if m is None else {x.case: x for x in m.metrics if x.ok and x.value is not None})
    return out


def pairable(c) -> bool:
    """A row the paired rounds re-judge: timing-like (banded), with a band."""
    return c.method in (Method.MANN_WHITNEY, Method.THRESHOLD) and c.factor is not None


def paired_report(base_rounds: Sequence[RunResults], head_rounds: Sequence[RunResults],
                  report: ComparisonReport, cfg: Thresholds) -> ComparisonReport:
    """``report`` (the last round's comparison) with timing-like verdicts re-judged by pairs."""
    if len(base_rounds) != len(head_rounds) or not base_rounds:
        raise ValueError("paired_report needs the same, non-zero number of base and head rounds")
    n = len(base_rounds)
    machines = []
    for mc in report.machines:
        bvals, hvals = _values(base_rounds, mc.machine), _values(head_rounds, mc.machine)
        rows = []
        for c in mc.comparisons:
            if not pairable(c):
                rows.append(c)
                continue
            key = (c.benchmark, c.params)
            if any(key not in b or key not in h for b, h in zip(bvals, hvals)):
                rows.append(c)
                continue
            base = [float(b[key].value) for b in bvals]
            head = [float(h[key].value) for h in hvals]
            r = spread.paired_shift(base, head, p_threshold=P_THRESHOLD, factor=c.factor)
            worse = r.median_ratio < 1 if c.direction == Direction.HIGHER else r.median_ratio > 1
            verdict = (Verdict.REGRESSION if worse else Verdict.IMPROVEMENT) if r.significant else Verdict.UNCHANGED
            rows.append(replace(c, verdict=verdict, method=Method.PAIRED, significant=r.p_value < P_THRESHOLD,
                                # The rounds are the samples: a quick round (one pass) is one
                                # sample, so MIN_ROUNDS of them are a full verdict (the CPU PR job).
                                indicative=n < MIN_ROUNDS,
                                # Fewer rounds can never reach the test's level: "unchanged" would
                                # claim what the run could not see (a -40%/+160% pair read as
                                # unchanged): too noisy to judge.
                                too_noisy=verdict is Verdict.UNCHANGED and n < MIN_ROUNDS,
                                reason=f"{n} interleaved rounds: median head/base {r.median_ratio:.3f}, "
                                       f"signed-rank p={r.p_value:.3g}"))
        machines.append(replace(mc, comparisons=tuple(rows)))
    note = f"base and head measured in {n} interleaved rounds (ABAB); timings judged on paired rounds"
    return replace(report, machines=tuple(machines), notes=report.notes + (note,))
