"""Did head get worse than base, per machine, benchmark and parameter set?

``compare(base, head, thresholds)`` is a pure function over ``results.RunResults``:
no files, no printing. Direction comes from the unit (tok/s up is good, seconds up is
bad); deterministic counters and accuracy are exact (any worsening counts); timings
must be both significant by asv's own Mann-Whitney test (when both sides have enough
samples) and beyond the configured factor. ``Thresholds`` is read from the packaged
``thresholds.yaml`` (the noise band is documented there) plus an optional user file.

A failing case carries why it failed (``Comparison.error``: the head's message, the
base's for ``FIXED``), when the run filed one (``results.Metric.message``). A case
(``core.metrics.case_of``: a benchmark class and its parameters) that failed on a side is
one row: none of its other rows are compared (a crashed case's leftover counters are no
improvement), and the row names the case and its error once.

A row's direction comes only from a trusted definition (the metric table by method name,
``compare.definitions``); a row without one is not judged and marked ``untrusted``, never
compared as lower-is-better. A band verdict is indicative by its sample counts
(``spread.indicative``); ``quick`` is the caller's own word and speaks only for plain tracks
that keep no samples, never a side's run-info (the artifact's).

Base's cases decide what must be judged: a case base judged with no usable value on head
is a failure, "vanished on head" (``compare.vanished``); head's new cases, failing or not,
are shown as ``NEW`` and never fail the check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vlmpath.compare.comparison import (
    Comparison,
    ComparisonReport,
    CrossVendorRow,
    MachineComparison,
    Verdict,
)
from vlmpath.compare import dedupe, spread
from vlmpath.compare.definitions import UNTRUSTED
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.values import value_problem
from vlmpath.compare.vanished import VANISHED, vanished_row
from vlmpath.core.backends import BACKENDS, Backend, vendor_backends
from vlmpath.core.metrics import Direction, Method, case_of, metric_for_method

# --- comparing ----------------------------------------------------------------------------


def _kind(rows: Sequence[Backend], *runs: MachineRun | None) -> str:
    gpus = {b.name for b in rows if b.is_gpu}
    return "gpu" if any(r is not None and r.backend in gpus for r in runs) else "cpu"


def _is_different(b: Metric, h: Metric, p: float) -> bool:
    # asv's own test (private module, but it is the rule asv's compare applies):
    # Mann-Whitney U on raw samples, CI-overlap fallback when the samples are too few.
    from asv._stats import is_different

    inf = float("inf")
    stats_b = {"ci_99_a": b.ci_99[0], "ci_99_b": b.ci_99[1]} if b.ci_99 else {"ci_99_a": -inf, "ci_99_b": inf}
    stats_h = {"ci_99_a": h.ci_99[0], "ci_99_b": h.ci_99[1]} if h.ci_99 else {"ci_99_a": -inf, "ci_99_b": inf}
    return bool(is_different(list(b.samples), list(h.samples), stats_b, stats_h, p))


def _samples_differ(p: float):
    """asv's test on two sample lists alone (no stored intervals): what the MDE bisects."""
    from asv._stats import is_different

    wide = {"ci_99_a": -float("inf"), "ci_99_b": float("inf")}
    return lambda xs, ys: bool(is_different(list(xs), list(ys), wide, wide, p))


def judge(b: Metric, h: Metric, cfg: Thresholds, kind: str, quick: bool = False) -> Comparison:
    """Verdict for one case present on both sides (any state: ok, failed, skipped).
    ``quick``: the runs were quick (one sample): band verdicts are indicative only."""
    common = dict(machine=h.machine, benchmark=h.benchmark, params=h.params, unit=h.unit,
                  base=b.value, head=h.value)
    why = h.untrusted or b.untrusted  # the artifact's claim, or a method the table lacks
    if why:
        side = "" if h.untrusted == b.untrusted else (" (head)" if h.untrusted else " (base)")
        return Comparison(**{**common, "base": b.value if b.ok else None, "head": h.value if h.ok else None},
                          verdict=Verdict.NOT_COMPARABLE, reason=why + side, untrusted=True)
    if b.unit != h.unit:
        return Comparison(**common, verdict=Verdict.NOT_COMPARABLE, reason=f"unit changed: {b.unit} -> {h.unit}")
    bad = _unjudgeable(b, h)
    if bad:  # a string, a boolean, NaN, Infinity or out of range: never a number (compare.values)
        return Comparison(**{**common, "base": b.value if b.ok else None, "head": h.value if h.ok else None},
                          verdict=Verdict.NOT_COMPARABLE, reason=bad)
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
    if rule is None:  # no trusted direction: never "lower by default"
        return Comparison(**common, verdict=Verdict.NOT_COMPARABLE, untrusted=True,
                          reason=f"{UNTRUSTED}: unit {h.unit[:40]!r} has no rule in the metric table or thresholds")
    direction = rule.direction
    lower_better = direction == Direction.LOWER
    bv, hv = float(b.value), float(h.value)  # type: ignore[arg-type]
    worse = hv > bv if lower_better else hv < bv
    if rule.exact:
        same = math.isclose(bv, hv, rel_tol=1e-12, abs_tol=0.0)
        verdict = Verdict.UNCHANGED if same else (Verdict.REGRESSION if worse else Verdict.IMPROVEMENT)
        return Comparison(**common, verdict=verdict, direction=direction, method=Method.EXACT, factor=0.0)

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
        method = Method.MANN_WHITNEY
        significant = _is_different(b, h, cfg.p_threshold)
        counts = beyond and significant
    else:
        method = Method.THRESHOLD
        counts = beyond
    verdict = (Verdict.REGRESSION if worse else Verdict.IMPROVEMENT) if counts else Verdict.UNCHANGED
    mde = spread.mde(b.samples, h.samples, _samples_differ(cfg.p_threshold) if method == Method.MANN_WHITNEY else None)
    too_noisy = verdict is Verdict.UNCHANGED and mde is not None and mde > factor
    if mde is not None and math.isinf(mde):  # the test cannot fire at this sample count
        mde = None  # (kept out of the JSON: no finite shift would be seen)
    return Comparison(**common, verdict=verdict, direction=direction, method=method,
                      factor=factor, significant=significant,
                      base_ci=spread.interval(b.ci_99), head_ci=spread.interval(h.ci_99), mde=mde,
                      indicative=not rule.deterministic
                      and spread.indicative(len(b.samples), len(h.samples), cfg.min_samples, quick),
                      too_noisy=too_noisy)


def _unjudgeable(b: Metric, h: Metric) -> str | None:
    """Why a side's value cannot be judged ("head value 'nan' is not a number ..."), or None."""
    for side, m in (("base", b), ("head", h)):
        why = m.invalid or (value_problem(m.value, m.unit) if m.ok else None)
        if why:
            return f"not judged: {side} {why}"
    return None


def _one_side(m: Metric, verdict: Verdict, reason: str) -> Comparison:
    return Comparison(machine=m.machine, benchmark=m.benchmark, params=m.params, unit=m.unit,
                      base=m.value if verdict is Verdict.REMOVED else None,
                      head=None if verdict is Verdict.REMOVED else m.value,
                      verdict=verdict, reason=reason,
                      error=m.message if verdict in (Verdict.NEWLY_FAILING, Verdict.NEW) else None)


def _compare_machine(b: MachineRun | None, h: MachineRun | None, cfg: Thresholds,
                     base_commit: str, head_commit: str, quick: bool = False,
                     rows: Sequence[Backend] = BACKENDS, promised: bool = False) -> MachineComparison:
    if b is None or h is None:
        present = h if b is None else b
        assert present is not None
        missing_side, commit = ("base", base_commit) if b is None else ("head", head_commit)
        reason = f"no {missing_side} results for this machine"
        # A machine whose head results were promised (``promised``: an artifact of the PR check
        # measures both sides) and are gone takes base's judged cases with it: each one vanished
        # on head (a failure, issue 39), never "not judged" (dropping one machine's head results
        # from an artifact would otherwise leave the rest green). Elsewhere (a local compare of
        # whatever a results folder holds) a machine with one side is only not judged.
        rows = tuple(
            (vanished_row(m, None, reason, {}) if h is None and promised else None)
            or Comparison(machine=m.machine, benchmark=m.benchmark, params=m.params, unit=m.unit,
                          base=m.value if h is None else None, head=m.value if b is None else None,
                          verdict=Verdict.NOT_COMPARABLE, reason=reason)
            for m in present.metrics
        )
        note = f"{present.machine}: no {missing_side} results (commit {commit[:8]}); nothing compared on this machine"
        return MachineComparison(present.machine, "head-only" if b is None else "base-only", rows, notes=(note,))

    kind = _kind(rows, b, h)
    # Never ``b.quick``/``h.quick``: the run-info file is the artifact's word (the PR writes
    # it); sample counts decide, and ``quick`` is the caller's own option (spread.indicative).
    base_by = {m.case: m for m in b.metrics}
    head_by = {m.case: m for m in h.metrics}
    failed = {case_key(m) for run in (b, h) for m in run.metrics if _failed(m)}
    rows: list[Comparison] = [_failed_case(key, b, h) for key in sorted(failed)]
    for case in sorted(set(base_by) | set(head_by)):
        bm, hm = base_by.get(case), head_by.get(case)
        if any(m is not None and case_key(m) in failed for m in (bm, hm)):
            continue  # the case's one row stands for it (above)
        if bm is None:
            assert hm is not None
            # Head's new cases are shown and never fail the check (base's cases judge).
            rows.append(_one_side(hm, Verdict.NEW, "not in base" if hm.ok else f"new benchmark: {hm.error or 'skipped'}"))
        elif hm is None:
            why = "missing from head run" if bm.benchmark in h.missing else "not in head"
            rows.append(vanished_row(bm, None, why, head_by) or _one_side(bm, Verdict.REMOVED, why))
        else:
            gone = None if hm.ok or hm.untrusted else vanished_row(
                bm, hm, "skipped" if hm.skipped else (hm.invalid or "no value"), head_by)
            rows.append(gone or judge(bm, hm, cfg, kind, quick))

    notes: list[str] = []
    for side, run in (("base", b), ("head", h)):
        n_failed = len({case_key(m) for m in run.metrics if _failed(m)})
        if run.missing:
            shown = ", ".join(run.missing[:5]) + (" ..." if len(run.missing) > 5 else "")
            notes.append(f"{run.machine}: partial {side} run, {len(run.missing)} benchmark(s) missing: {shown}")
        if n_failed:
            notes.append(f"{run.machine}: {n_failed} case(s) failed in the {side} run")
        notes.extend(f"{run.machine} ({side}): {n}" for n in run.notes)
    rows.sort(key=lambda c: (c.benchmark, c.params))
    notes.extend(_one_sided_notes(h.machine, rows, base_by, head_by))
    changes: tuple[tuple[str, str | None, str | None], ...] = ()
    if b.fingerprint is not None and h.fingerprint is not None:
        changes = b.fingerprint.toolchain_diff(h.fingerprint)
    elif (b.fingerprint is None) != (h.fingerprint is None):
        side = "base" if b.fingerprint is None else "head"
        notes.append(f"{h.machine}: no platform fingerprint for {side}; cannot confirm base and head used the same toolchain")
    return MachineComparison(h.machine, "both", tuple(rows), changes, tuple(notes))


def _failed(m: Metric) -> bool:
    """The benchmark failed (an error, or no value that is neither skipped nor invalid)."""
    return m.error is not None or (m.value is None and not m.skipped and m.invalid is None)


def case_key(m: Metric) -> tuple[str, tuple[tuple[str, str], ...], str]:
    """The case a row belongs to: its benchmark class (``core.metrics.case_of``) and
    parameters, as one instrument measured it (``source``: the instruction counts of a case
    are their own process, not leftovers of its asv run)."""
    return (case_of(m.benchmark), m.params, m.source)


def _representative(rows: Sequence[Metric]) -> Metric:
    """The failed row that names a failed case: one with the benchmark's own message first,
    then a timing or headline metric (what the case is about), then by name."""
    def rank(m: Metric):
        spec = metric_for_method(m.benchmark)
        main = spec is not None and (spec.headline or spec.name == "time")
        return (m.message is None, not main, m.benchmark)

    return min(rows, key=rank)


def _failed_case(key, b: MachineRun, h: MachineRun) -> Comparison:
    """One row for a case that failed on a side: the failing side's error, said once; the
    case's other rows on that side are not compared (their count is ``left_out``)."""
    b_rows = [m for m in b.metrics if case_key(m) == key]
    h_rows = [m for m in h.metrics if case_key(m) == key]
    b_fail, h_fail = [m for m in b_rows if _failed(m)], [m for m in h_rows if _failed(m)]
    rep = _representative(h_fail or b_fail)
    twin = next((m for m in (b_rows if h_fail else h_rows) if m.benchmark == rep.benchmark), None)
    n_rows = len({m.benchmark for m in b_rows} | {m.benchmark for m in h_rows})
    if h_fail and b_fail:
        verdict, reason, error = Verdict.NOT_COMPARABLE, "failing on base and head", rep.message
    elif h_fail and not b_rows:  # a case base never had: shown, never failing the check
        verdict, reason, error = Verdict.NEW, f"new benchmark: {rep.error or 'failed'}", rep.message
    elif h_fail:
        verdict, reason, error = Verdict.NEWLY_FAILING, rep.error or "failed", rep.message
    elif h_rows:
        verdict, reason, error = Verdict.FIXED, f"base: {rep.error or 'failed'}", rep.message
    else:  # base failed and head has no row: base judged nothing, so nothing vanished
        verdict, reason, error = Verdict.REMOVED, "not in head", None
    finding = _finding(b_rows, h_rows)
    if finding:
        reason += f"; {finding}"
    if n_rows > 1:
        reason += f"; the case's {n_rows - 1} other row(s) not compared"
    ok_value = lambda m: m.value if m is not None and m.ok else None  # noqa: E731
    base, head = (ok_value(twin), None) if h_fail else (None, ok_value(twin))
    return Comparison(machine=rep.machine, benchmark=rep.benchmark, params=rep.params, unit=rep.unit,
                      base=base, head=head, verdict=verdict, reason=reason, error=error,
                      case=key[0], left_out=n_rows - 1, finding=finding)


def _finding(b_rows: Sequence[Metric], h_rows: Sequence[Metric]) -> str | None:
    """What a failed case measured that the table says is the finding even then
    (``report_failed``: the accuracy of a step that raised), said in the one row; never
    compared or judged as a row of its own."""
    heads = {m.benchmark: m for m in h_rows}
    said = []
    for bm in b_rows:
        spec, hm = metric_for_method(bm.benchmark), heads.get(bm.benchmark)
        if spec is None or not spec.report_failed or hm is None or bm.value is None or hm.value is None:
            continue
        if bm.value != hm.value:
            said.append(f"{spec.name} {bm.value:.2f} -> {hm.value:.2f}")
    return ", ".join(said) or None


def _one_sided_notes(machine: str, rows: Sequence[Comparison], base_by, head_by) -> list[str]:
    """A hint when cases are only in base and others only in head (a rename looks like that:
    the old name "removed", the new one "new", neither judged), and a note when a benchmark's
    code changed between the sides (asv's version hash): base measured the older code."""
    out = []
    gone = [c for c in rows if c.verdict is Verdict.REMOVED or c.reason.startswith(VANISHED)]
    new = [c for c in rows if c.case_key not in base_by]
    if gone and new:
        out.append(f"{machine}: {len(gone)} case(s) only in base (vanished on head: failing when base judged "
                   f"them) and {len(new)} only in head (new: shown, not judged); if benchmarks were renamed "
                   f"(e.g. {gone[0].benchmark} -> {new[0].benchmark}), base's names still judge")
    changed = sorted({k[0] for k in set(base_by) & set(head_by)
                      if base_by[k].version and head_by[k].version and base_by[k].version != head_by[k].version})
    if changed:
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        out.append(f"{machine}: {len(changed)} benchmark(s) changed between base and head (asv version differs: "
                   f"{shown}); base was measured with the older benchmark code")
    return out


def _cross_vendor(base: RunResults, head: RunResults, cfg: Thresholds,
                  rows: Sequence[Backend] = BACKENDS) -> tuple[CrossVendorRow, ...]:
    """Every other GPU backend's machines set beside each reference machine (``rows``'
    ``vendor_backends``: the reference first); one row per case and machine pair."""
    def by_backend(run: RunResults, backend: str) -> list[MachineRun]:
        return [m for m in run.machines if m.backend == backend]

    def value(run: MachineRun | None, case) -> float | None:
        if run is None:
            return None
        m = next((x for x in run.metrics if x.case == case), None)
        return m.value if m is not None and m.ok else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else a / b

    sides = vendor_backends(rows)
    if not sides:
        return ()
    reference, others = sides[0].name, [b.name for b in sides[1:]]
    out: list[CrossVendorRow] = []
    for other in others:
        for ref_h in by_backend(head, reference):
            for oth_h in by_backend(head, other):
                ref_b, oth_b = base.machine(ref_h.machine), base.machine(oth_h.machine)
                oth_cases = {m.case: m for m in oth_h.metrics}
                for cm in ref_h.metrics:
                    om = oth_cases.get(cm.case)
                    if om is None or om.unit != cm.unit:
                        continue
                    hr = ratio(value(oth_h, cm.case), value(ref_h, cm.case))
                    br = ratio(value(oth_b, cm.case), value(ref_b, cm.case))
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
                    out.append(CrossVendorRow(
                        benchmark=cm.benchmark, params=cm.params, unit=cm.unit,
                        reference=reference, reference_machine=ref_h.machine,
                        other=other, other_machine=oth_h.machine, base_ratio=br, head_ratio=hr,
                        reference_change=_change(value(ref_b, cm.case), value(ref_h, cm.case)),
                        other_change=_change(value(oth_b, cm.case), value(oth_h, cm.case)),
                        flagged=flagged,
                    ))
    return tuple(out)


def _change(b: float | None, h: float | None) -> float | None:
    return None if b is None or h is None or b == 0 else h / b - 1.0


def compare(base: RunResults, head: RunResults, config: Thresholds | None = None, *,
            quick: bool = False, backends: Sequence[Backend] = BACKENDS,
            head_promised: frozenset[str] = frozenset()) -> ComparisonReport:
    """Compare every case of every machine in ``head`` with ``base`` (pure). ``quick``: the
    runs were quick mode (one sample each): their band verdicts are indicative only.
    ``backends``: the backend rows (GPU noise band, the vendor comparison's sides).
    ``head_promised``: machines that measured head (the PR check's artifacts): base's judged
    cases there with no head results at all vanished on head."""
    cfg = config if config is not None else Thresholds.default()
    names = sorted(set(base.machine_names) | set(head.machine_names))
    folded = [dedupe.once(_compare_machine(base.machine(n), head.machine(n), cfg, base.commit, head.commit,
                                           quick, backends, n in head_promised)) for n in names]
    machines = tuple(m for m, _ in folded)
    notes = list(dict.fromkeys(base.notes + head.notes))
    notes += [n for _, n in folded if n]
    if quick or any(m.quick for run in (base, head) for m in run.machines):
        notes.append("quick run: every timing is one sample; its verdicts are indicative and never fail the check")
    if not names:
        notes.append("no machines with results on either side")
    if base.commit and base.commit.lower() == head.commit.lower():
        notes.append(f"base and head are the same commit ({head.commit[:12]}): any difference is noise")
    return ComparisonReport(
        base_commit=base.commit, head_commit=head.commit, machines=machines,
        cross_vendor=_cross_vendor(base, head, cfg, backends), notes=tuple(notes),
        thresholds_source=cfg.source,
    )
