"""Can this machine's measurements be trusted: how often do the gates cry wolf, and what do they catch?

``vlmpath trust`` measures the measuring, on the machine it runs on, for one routine case
(a workload preset through the default pipeline, threads pinned as ``vlmpath run`` does):

- every round measures a *base* side and then, interleaved in the same process, an *A/A*
  side (identical code) and one *planted* side per size (5%, 10%, 25% by default), each
  ``samples`` timed passes of the whole schedule with a fresh embedding cache;
- a planted slowdown is extra work *inside* the routine, proportional to the routine's own
  cost: after every step, ``k`` fixed matrix products, with ``k`` calibrated once per run
  from the median pass time so that the extra work is ``size`` x the routine's time
  (``Plant``). Instruction counts get their own calibration (``vlmpath.measure.instructions``);
- each side pair is judged exactly as the PR comparison judges it
  (``vlmpath.compare.verdict.judge``: Mann-Whitney on the samples AND beyond the band), per
  gate: ``time`` (seconds per pass), ``tok/s`` (tokens / seconds per pass), and, when
  ``--instructions`` is given and Valgrind is installed, the PR job's count gates
  (``selfcheck.ir_trust``: the routine with its tower replayed, and the tower on its own; one
  callgrind process counts every side; deterministic, so one count per side, judged at
  their bands in ``thresholds.yaml``).

The timing gates are judged twice: unpaired (``time``, ``tok/s``: the samples of each side
as one pool, as a plain ``vlmpath ci pr`` judges asv's samples) and paired
(``time (paired)``, ``tok/s (paired)``: pass i of a side against pass i of base, measured
next to it, with the signed-rank test and the band, as ``vlmpath ci pr --interleave`` judges its
rounds). The report also says how large each planted slowdown really landed
(``realized``), since a calibration on a noisy machine is itself a measurement.

The result: per gate and band, false regressions of the A/A rounds, detection per planted
size, and the spread (MDE, A/A ratios); printed and written as JSON (``--json``). ``bands``
lets one run evaluate several candidate bands on the same samples, which is how the CPU
band in ``thresholds.yaml`` was chosen.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from vlmpath.selfcheck.plant import UNIT_N, Plant, timed_pass
from vlmpath.compare.comparison import Verdict
from vlmpath.core.metrics import Direction
from vlmpath.compare.records import Metric
from vlmpath.compare.thresholds import Rule, Thresholds
from vlmpath.compare.verdict import judge
from vlmpath.core.scales import DEFAULT_SCALE

SIZES = (0.05, 0.10, 0.25)


def _unit_seconds(a: torch.Tensor, n: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        torch.mm(a, a)
    return (time.perf_counter() - t0) / n


def calibrate(one_pass: Callable[[Plant | None], float], steps: int, sizes: Sequence[float],
              a: torch.Tensor, pairs: int = 12, corrections: int = 3) -> dict[float, Plant]:
    """Plants whose extra time is ``size`` x the pass's: a first guess from one unit's cost,
    then ``corrections`` rounds of interleaved plain/planted pass pairs. Each pair's ratio is
    taken between neighbours in time and the median of those ratios is used, so a machine
    that jumps between a fast and a slow state (this runner does, by 40%) moves both
    passes of a pair alike instead of skewing a ratio of two separate medians. The order
    within a pair alternates, so whatever the pass after another pass pays (caches) falls
    on both sides."""
    plain = statistics.median(one_pass(None) for _ in range(3))
    unit = statistics.median(_unit_seconds(a) for _ in range(3))
    probe = Plant(0.25, max(1, round(0.25 * plain / unit / max(1, steps))))
    for _ in range(corrections):
        ratios = []
        for i in range(pairs):
            if i % 2:
                plain, planted = one_pass(None), one_pass(probe)
            else:
                planted, plain = one_pass(probe), one_pass(None)
            ratios.append(planted / plain)
        got = statistics.median(ratios) - 1  # what probe's units cost, as a share of a pass
        per_unit = max(got, 1e-6) / probe.per_step
        probe = Plant(0.25, max(1, round(0.25 / per_unit)))
    return {s: Plant(s, max(1, round(s / per_unit))) for s in sizes}


@dataclass
class GateTally:
    rounds: int = 0
    false_regressions: int = 0
    detected: dict[str, int] = field(default_factory=dict)
    mde: list[float] = field(default_factory=list)
    aa_ratios: list[float] = field(default_factory=list)

    def to_dict(self, sizes: Sequence[float]) -> dict:
        return {
            "rounds": self.rounds,
            "false_regressions": self.false_regressions,
            "detected": {k: self.detected.get(k, 0) for k in (f"{s:.0%}" for s in sizes)},
            "mde_median": statistics.median(self.mde) if self.mde else None,
            "aa_ratio_min": min(self.aa_ratios) if self.aa_ratios else None,
            "aa_ratio_max": max(self.aa_ratios) if self.aa_ratios else None,
        }


GATE_UNITS = {"time": "seconds", "tok/s": "tok/s", "instructions": "instructions",
              "routine instructions": "instructions", "tower instructions": "instructions",
              "routine aten elements": "elements", "routine bytecodes": "bytecodes", "tower aten elements": "elements"}


def metric(gate: str, values: Sequence[float]) -> Metric:
    return Metric(machine="trust", benchmark=f"trust.Routine.{gate}", params=(), unit=GATE_UNITS[gate],
                  value=statistics.median(values), samples=tuple(values))


def thresholds_with_band(base: Thresholds, band: float, gate: str) -> Thresholds:
    """``base`` with the CPU band set to ``band`` for the gate's benchmark (as a rule)."""
    rule = Rule(pattern=rf"^trust\.Routine\.{gate.replace('/', '.')}$", gpu=band, cpu=band)
    return Thresholds(base.gpu_factor, base.cpu_factor, base.min_samples, base.p_threshold,
                      base.units, (rule,) + base.rules, base.source)


def tally(tallies: dict, gate: str, band: float, cfg: Thresholds, base: Sequence[float],
          aa: Sequence[float], planted: dict[float, Sequence[float]]) -> None:
    t = tallies.setdefault((gate, band), GateTally())
    t.rounds += 1
    c = judge(metric(gate, base), metric(gate, aa), cfg, "cpu")
    # What would fail a PR: a regression that is not merely indicative (too few samples).
    t.false_regressions += c.verdict is Verdict.REGRESSION and not c.indicative
    if c.mde is not None:
        t.mde.append(c.mde)
    if c.ratio is not None:
        t.aa_ratios.append(c.ratio)
    for size, values in planted.items():
        p = judge(metric(gate, base), metric(gate, values), cfg, "cpu")
        key = f"{size:.0%}"
        t.detected[key] = t.detected.get(key, 0) + (p.verdict is Verdict.REGRESSION and not p.indicative)


def tally_paired(tallies: dict, gate: str, band: float, direction: Direction, base: Sequence[float],
                 aa: Sequence[float], planted: dict[float, Sequence[float]]) -> None:
    """The interleaved gate (``vlmpath ci pr --interleave``): sample i of a side is paired
    with sample i of base, measured next to it in time, and judged by the signed-rank test over
    the pairs plus the band (``compare.spread.paired_shift``, as ``compare.paired`` does
    for rounds)."""
    from vlmpath.compare.paired import P_THRESHOLD
    from vlmpath.compare.spread import paired_shift

    def regression(values: Sequence[float]) -> tuple[bool, float]:
        r = paired_shift(base, values, p_threshold=P_THRESHOLD, factor=band)
        worse = r.median_ratio < 1 if direction == Direction.HIGHER else r.median_ratio > 1
        return r.significant and worse, r.median_ratio

    t = tallies.setdefault((f"{gate} (paired)", band), GateTally())
    t.rounds += 1
    false, ratio = regression(aa)
    t.false_regressions += false
    t.aa_ratios.append(ratio)
    for size, values in planted.items():
        key = f"{size:.0%}"
        t.detected[key] = t.detected.get(key, 0) + regression(values)[0]


def run_trust(*, preset: str = "video", rounds: int = 10, samples: int = 16, sizes: Sequence[float] = SIZES,
              bands: Sequence[float] | None = None, threads: int | None = None, scale: str = DEFAULT_SCALE,
              instructions: int = 0, counter: str = "ops", log: Callable[[str], None] = print) -> dict:
    """The whole trust measurement (see the module docstring); returns the JSON report."""
    from vlmpath.core.errors import VlmpathError
    from vlmpath.engines.pipelines import DEFAULT_PIPELINE
    from vlmpath.engines.reference import EmbedRoutine
    from vlmpath.measure.pinning import cpu_threads, load_average, load_warning, pinned
    from vlmpath.suite.measure import Session, prepare

    if rounds < 0 or samples < 2 or instructions < 0 or rounds + instructions < 1:
        raise VlmpathError(f"vlmpath trust: --rounds and --instructions must be >= 0 (one of them >= 1) and "
                           f"--samples >= 2 (got {rounds}, {instructions}, {samples})")
    t_start = time.monotonic()
    session = Session("cpu")
    base_cfg = Thresholds.default()
    bands = tuple(bands) if bands else (base_cfg.cpu_factor,)  # default: the CPU band in use
    threads = cpu_threads(threads, "cpu")
    a = torch.randn(UNIT_N, UNIT_N, generator=torch.Generator().manual_seed(0))
    loads: list[float] = []
    tallies: dict = {}
    realized: dict[str, list[float]] = {f"{s:.0%}": [] for s in sizes}
    with pinned(threads) as in_effect:
        prep = prepare(preset, DEFAULT_PIPELINE.hash, scale, session)
        wl, steps = prep.workload, prep.workload.steps

        def one_pass(plant: Plant | None) -> float:
            routine = EmbedRoutine(wl, prep.encoder, DEFAULT_PIPELINE, prep.table)
            return timed_pass(routine.run_step, steps, plant, a)

        one_pass(None)  # warm-up
        plants = calibrate(one_pass, len(steps), sizes, a) if rounds else {}
        log(f"trust: {preset} ({len(steps)} steps, {wl.prefill_tokens} tokens), "
            f"threads {in_effect}; planted units per step: "
            + ", ".join(f"{s:.0%}: {p.per_step}" for s, p in plants.items()))
        for r in range(rounds):
            load = load_average()
            if load is not None:
                loads.append(load)
                if warning := load_warning(load):
                    log(f"trust: WARNING: {warning}")
            # Interleave the sides pass by pass: drift within the round hits them alike.
            # The order rotates every sample: a side that always ran right after base would
            # inherit a position effect (measured: the pass after base ran 1-4% faster).
            sides: dict[str, list[float]] = {"base": [], "aa": [], **{f"{s}": [] for s in sizes}}
            order = [("base", None), ("aa", None), *((f"{s}", plants[s]) for s in sizes)]
            for i in range(samples):
                for name, plant in order[i % len(order):] + order[:i % len(order)]:
                    sides[name].append(one_pass(plant))
            tok = {k: [wl.prefill_tokens / x for x in v] for k, v in sides.items()}
            for s in sizes:  # the slowdown that really landed: median ratio of neighbouring passes
                realized[f"{s:.0%}"].append(statistics.median(p / b for p, b in zip(sides[f"{s}"], sides["base"])))
            for band in bands:
                for gate, data, direction in (("time", sides, Direction.LOWER), ("tok/s", tok, Direction.HIGHER)):
                    cfg = thresholds_with_band(base_cfg, band, gate)
                    planted = {s: data[f"{s}"] for s in sizes}
                    tally(tallies, gate, band, cfg, data["base"], data["aa"], planted)
                    tally_paired(tallies, gate, band, direction, data["base"], data["aa"], planted)
            log(f"trust: round {r + 1}/{rounds}: base median {statistics.median(sides['base']):.4g} s, "
                f"A/A {statistics.median(sides['aa']) / statistics.median(sides['base']):.3f}x, planted "
                + ", ".join(f"{s:.0%} {statistics.median(sides[f'{s}']) / statistics.median(sides['base']):.3f}x"
                            for s in sizes))
        ir = None
        if instructions:  # the PR job's count gates: the routine (tower replayed) and the tower
            from vlmpath.selfcheck import ir_trust

            ir = ir_trust.count_trust(preset, scale, instructions, ir_trust.SIZES, in_effect, log=log, counter=counter)
            ir_trust.tally_counts(tallies, ir, base_cfg, tally, thresholds_with_band)  # a partial count holds fewer rounds
    return {
        "schema_version": 1, "preset": preset, "scale": scale, "rounds": rounds, "samples": samples,
        "instruction_rounds": len(ir["rounds"]) if ir else 0,
        "partial": bool(ir and ir.get("partial")),
        "sizes": list(sizes), "threads": in_effect, "cores": _cores(),
        "load_avg": {"min": min(loads), "max": max(loads)} if loads else None,
        "seconds": round(time.monotonic() - t_start, 1),
        "planted_units_per_step": {f"{s:.0%}": p.per_step for s, p in plants.items()},
        # per size, each round's median ratio of neighbouring planted/base passes: the
        # slowdown that really landed, so a detection rate can be read against it
        "realized": {k: [round(x, 4) for x in v] for k, v in realized.items()},
        "instructions": ir,
        "instruction_realized": _ir_realized(ir),
        "gates": [{"gate": g, "band": b, **t.to_dict(ir["sizes"] if ir and g in _IR_GATES else sizes)}
                  for (g, b), t in sorted(tallies.items())],
    }


# selfcheck.ir_trust.GATES and OPS_GATES, without importing it
_IR_GATES = ("routine instructions", "tower instructions", "routine aten elements", "routine bytecodes",
             "tower aten elements")


def _ir_realized(ir: dict | None) -> dict | None:
    if not ir:
        return None
    from vlmpath.selfcheck.ir_trust import realized

    return realized(ir)


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def render(report: dict) -> str:
    from vlmpath.render.tables import text_table

    ir_sizes = (report.get("instructions") or {}).get("sizes", [])
    sizes = [f"{s:.0%}" for s in sorted(set(report["sizes"]) | set(ir_sizes))]
    rows = [[g["gate"], f"{g['band']:.0%}", f"{g['false_regressions']}/{g['rounds']}",
             *(f"{g['detected'][s]}/{g['rounds']}" if s in g["detected"] else "-" for s in sizes),
             "-" if g["mde_median"] is None else f"{g['mde_median']:.1%}",
             "-" if g["aa_ratio_min"] is None else f"{g['aa_ratio_min']:.3f}-{g['aa_ratio_max']:.3f}"]
            for g in report["gates"]]
    load = report["load_avg"]
    head = (f"vlmpath trust: {report['preset']} ({report['scale']}), {report['rounds']} rounds x "
            f"{report['samples']} samples per side (instructions: {report['instruction_rounds']} rounds"
            f"{', PARTIAL: ' + report['instructions']['error'] if report.get('partial') else ''}), "
            f"threads {report['threads']} of {report['cores']} cores"
            + (f", load average {load['min']:.1f}-{load['max']:.1f}" if load else "")
            + f", {report['seconds']:.0f} s")
    if report.get("realized") and any(report["realized"].values()):
        head += "\nplanted slowdowns as landed (median over rounds of neighbouring-pass ratios): " + ", ".join(
            f"{k} {statistics.median(v):.3f}x" for k, v in report["realized"].items() if v)
    if report.get("instruction_realized"):
        head += "\nplanted instruction changes as counted (min-max over rounds): " + ", ".join(
            f"{k} {min(v):+.2%}..{max(v):+.2%}" for k, v in report["instruction_realized"].items() if v)
    return head + "\n" + text_table(["gate", "band", "false regressions", *(f"caught {s}" for s in sizes),
                                     "MDE (median)", "A/A ratio range"], rows)


def main_cli(a) -> int:
    """``vlmpath trust``: run, print the table, write the JSON report."""
    import json
    import sys

    from vlmpath.core import atomic

    rep = run_trust(preset=a.preset, rounds=a.rounds, samples=a.samples, bands=a.band,
                    threads=a.threads, instructions=a.instructions, counter=a.counter,
                    log=lambda m: print(m, file=sys.stderr))
    print(render(rep))
    if a.json:
        atomic.write_text(a.json, json.dumps(rep, indent=2, sort_keys=True) + "\n")
    return 0
