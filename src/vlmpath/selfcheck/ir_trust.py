"""Can the routine-only and the tower instruction counts be trusted: A/A, and plants of known size?

``vlmpath trust --instructions ROUNDS`` (``selfcheck.trust``) counts, in ONE callgrind process
(``selfcheck.callgrind``), the gates the PR job uses by default (``selfcheck/ir_worker.py``, mode
``routine``):

- the *routine* count: one pass of the case with its tower replayed (``measure/tower_replay.py``),
  so a plant is a change of the routine's own work: after every step, ``copies`` extra
  copies of the step's embeddings (an extra copy, as a careless ``.clone()`` or
  ``.contiguous()`` would add), calibrated in instructions so that the extra work is
  ``size`` x the pass's count;
- the *tower* count: one call per distinct item shape, as the PR job's tower case; a plant
  is extra arithmetic inside each tower call (``selfcheck.plant.Plant``'s matrix products, as a
  heavier block would add), calibrated the same way.

Per round: base, A/A and one planted pass per size, for each gate. Instruction counts are
exact, so the size that landed is known per round (``realized``). Everything before the
counted passes (set-up, the recording, warm-ups) runs uninstrumented (see ``selfcheck.instructions``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

#: Planted sizes of the instruction trust rounds (the routine band is 1%, the tower's 2%).
SIZES = (0.02, 0.05)
GATES = ("routine instructions", "tower instructions")
#: The native counter's gates (``--counter ops``, the PR job's default): each tally of the
#: routine with its own plant (an extra copy of the step's rows: elements; an extra Python
#: pass over the step's entries: bytecodes), and the tower's elements (extra matmuls).
OPS_GATES = ("routine aten elements", "routine bytecodes", "tower aten elements")
_PREFIX = {"routine instructions": "", "tower instructions": "tower_",
           "routine aten elements": "", "routine bytecodes": "bc_", "tower aten elements": "tower_"}


def count_trust(preset: str, scale: str, rounds: int, sizes: Sequence[float], threads: int,
                log: Callable[[str], None] = print, counter: str = "callgrind") -> dict:
    """Run the worker below under callgrind (or natively, ``counter`` ops); its JSON (partial
    with the reason if it broke)."""
    import tempfile

    from vlmpath.selfcheck import callgrind

    with tempfile.TemporaryDirectory(prefix="vlmpath-irt-") as tmp:
        spec = {"preset": preset, "scale": scale, "rounds": rounds, "sizes": list(sizes), "threads": threads,
                "dumps": str(Path(tmp) / "cg"), "out": str(Path(tmp) / "ir.json"), "counter": counter}
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        how = "natively (ops)" if counter == "ops" else "under callgrind"
        log(f"trust: counting the routine (tower replayed) and the tower {how}, {rounds} rounds")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONHASHSEED="0")
        proc = callgrind.start([sys.executable, "-m", "vlmpath.selfcheck.ir_trust", str(Path(tmp) / "spec.json")],
                               Path(tmp), env, instrument=False, native=counter == "ops")
        # A tower count is ~250M instructions: minutes each on a loaded box (6 rounds took 40 min).
        return callgrind.finish_rounds(proc, Path(tmp), Path(spec["out"]), timeout=3600 + 600 * rounds,
                                       rounds=rounds, log=log)


def tally_counts(tallies: dict, ir: dict, cfg, tally: Callable, thresholds_with_band: Callable) -> None:
    """Judge every counted round of both gates at the band ``cfg`` gives their PR benchmarks
    (``tally`` and ``thresholds_with_band``: ``selfcheck.trust``'s, passed in: it imports this module)."""
    from vlmpath.selfcheck.ir_cases import OPS_BENCHES, ROUTINE_BENCH, TOWER_BENCH, UNITS

    benches = {GATES[0]: ROUTINE_BENCH, GATES[1]: TOWER_BENCH, OPS_GATES[0]: OPS_BENCHES[("routine", "elements")],
               OPS_GATES[1]: OPS_BENCHES[("routine", "bytecodes")], OPS_GATES[2]: OPS_BENCHES[("tower", "elements")]}
    for gate in (OPS_GATES if ir.get("counter") == "ops" else GATES):
        bench, prefix = benches[gate], _PREFIX[gate]
        band = cfg.factor_for(bench, UNITS[bench], "cpu")
        judged_with = thresholds_with_band(cfg, band, gate)
        for row in ir["rounds"]:
            tally(tallies, gate, band, judged_with, [row[f"{prefix}base"]], [row[f"{prefix}aa"]],
                  {s: [row[f"{prefix}{s}"]] for s in ir["sizes"]})


def realized(ir: dict) -> dict[str, list[float]]:
    """Per gate and size, the planted change as counted in each round (planted / base - 1)."""
    out: dict[str, list[float]] = {}
    for gate in (OPS_GATES if ir.get("counter") == "ops" else GATES):
        prefix = _PREFIX[gate]
        for s in ir["sizes"]:
            out[f"{gate} {s:.0%}"] = [round(r[f"{prefix}{s}"] / r[f"{prefix}base"] - 1, 5) for r in ir["rounds"]]
    return out


# --- the workers (under callgrind, or native) --------------------------------------------------


class _Bench:
    """What both workers count: the case's routine with its tower replayed (and the plants:
    ``copies`` whole extra copies or ``rows`` rows copied of each step's output, ``passes``
    extra Python passes over its entries) and the tower over the recording's distinct item
    shapes (``per_call`` extra matrix products per call). Everything here is built, recorded
    and warmed up outside any count."""

    def __init__(self, spec: dict):
        import torch

        from vlmpath.engines.pipelines import DEFAULT_PIPELINE
        from vlmpath.measure.tower_replay import Recorder
        from vlmpath.selfcheck.plant import UNIT_N
        from vlmpath.suite.measure import Session, prepare

        torch.set_num_threads(int(spec["threads"]))
        self.pipeline = DEFAULT_PIPELINE
        self.prep = prepare(spec["preset"], DEFAULT_PIPELINE.hash, spec["scale"], Session("cpu"))
        self.wl, self.enc = self.prep.workload, self.prep.encoder
        self.a = torch.randn(UNIT_N, UNIT_N, generator=torch.Generator().manual_seed(0))
        self.steps = max(1, len(self.wl.steps))
        self.rec = Recorder(self.enc)
        self.routine(self.rec)()  # the real tower, recorded (and the warm-up)
        self.items = list({(it.grid_thw, it.span): it for call in self.rec.items for it in call}.values())

    def routine(self, encoder, copies: int = 0, rows: int = 0, passes: int = 0):
        from vlmpath.engines.reference import EmbedRoutine
        from vlmpath.selfcheck.plant import python_pass

        r = EmbedRoutine(self.wl, encoder, self.pipeline, self.prep.table)  # built outside the count
        steps = self.wl.steps

        def run():
            for step in steps:
                out = r.run_step(step)
                for _ in range(copies):  # an extra copy of the step's rows
                    out.clone()
                if rows:  # an extra copy of some of them
                    out[:rows].clone()
                python_pass(step, passes)  # extra Python passes (in plant.py: counted, not harness)
        return run

    def replayed(self, **plants):
        return self.routine(self.rec.replay(), **plants)  # fresh replayed rows, made outside the count

    def tower(self, per_call: int = 0):
        from vlmpath.selfcheck.plant import Plant

        items, enc, a = self.items, self.enc, self.a

        def run():
            for it in items:
                enc.encode([it])
                Plant(0, per_call).work(a)  # the plant: extra arithmetic in the tower call
        return run


def _write(out: Path, data: dict) -> None:
    tmp = out.with_suffix(".tmp")  # atomic: a reader never sees half a file
    tmp.write_text(json.dumps(data))
    os.replace(tmp, out)


def _worker(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("counter") == "ops":
        _worker_ops(spec)
        return
    from vlmpath.selfcheck.callgrind import Counter

    b = _Bench(spec)
    b.replayed(copies=1)()  # the replayed path, and the planted copy, warmed up
    b.tower(1)()  # warm-up
    counter = Counter(spec["dumps"])
    counter.instrument(True)  # once, for every counted pass (selfcheck.instructions says why)
    steps, n_items = b.steps, len(b.items)
    plain, tower_plain = counter.count(b.replayed()), counter.count(b.tower(0))
    copy_ir = max(1.0, (counter.count(b.replayed(copies=10)) - plain) / (10 * steps))
    unit_ir = max(1.0, (counter.count(b.tower(10)) - tower_plain) / (10 * n_items))
    copies = {s: max(1, round(s * plain / copy_ir / steps)) for s in spec["sizes"]}
    units = {s: max(1, round(s * tower_plain / unit_ir / n_items)) for s in spec["sizes"]}
    rounds: list = []

    def write() -> None:
        _write(Path(spec["out"]), {"plain": plain, "tower_plain": tower_plain, "sizes": spec["sizes"],
                                   "copy_instructions": copy_ir, "tower_unit_instructions": unit_ir,
                                   "copies_per_step": {f"{s}": c for s, c in copies.items()},
                                   "tower_units_per_call": {f"{s}": u for s, u in units.items()},
                                   "tower_shapes": n_items, "rounds": rounds,
                                   "complete": len(rounds) == spec["rounds"]})

    write()
    for _ in range(spec["rounds"]):
        row = {"base": counter.count(b.replayed()), "aa": counter.count(b.replayed())}
        row.update({f"{s}": counter.count(b.replayed(copies=copies[s])) for s in spec["sizes"]})
        row.update({"tower_base": counter.count(b.tower(0)), "tower_aa": counter.count(b.tower(0))})
        row.update({f"tower_{s}": counter.count(b.tower(units[s])) for s in spec["sizes"]})
        rounds.append(row)
        write()


def _worker_ops(spec: dict) -> None:
    """The native counter's rounds (``measure/op_count.py``): the routine's elements and
    bytecodes, each with its own plant, and the tower's elements, each calibrated in its unit."""
    from vlmpath.measure.op_count import OpCounter

    b = _Bench(spec)
    counter = OpCounter(harness=(__file__,))
    steps, n_items = b.steps, len(b.items)

    def tally(fn) -> dict[str, int]:
        counter.count(fn)
        return dict(counter.parts)

    plain, tower_plain = tally(b.replayed()), tally(b.tower(0))["elements"]
    # One row per step copied: a row's elements (and the slice's view, 1); the plant copies
    # as many rows per step as make ``size`` of the pass's elements (a 1-step case too).
    copy_el = max(1.0, (tally(b.replayed(rows=1))["elements"] - plain["elements"]) / steps)
    pass_bc = max(1.0, (tally(b.replayed(passes=10))["bytecodes"] - plain["bytecodes"]) / (10 * steps))
    unit_el = max(1.0, (tally(b.tower(10))["elements"] - tower_plain) / (10 * n_items))
    rows = {s: max(1, round(s * plain["elements"] / copy_el / steps)) for s in spec["sizes"]}
    passes = {s: max(1, round(s * plain["bytecodes"] / pass_bc / steps)) for s in spec["sizes"]}
    units = {s: max(1, round(s * tower_plain / unit_el / n_items)) for s in spec["sizes"]}
    rounds: list = []

    def write() -> None:
        _write(Path(spec["out"]), {"counter": "ops", "plain": plain, "tower_plain": tower_plain,
                                   "sizes": spec["sizes"], "row_copy_elements": copy_el,
                                   "pass_bytecodes": pass_bc, "tower_unit_elements": unit_el,
                                   "rows_copied_per_step": {f"{s}": c for s, c in rows.items()},
                                   "passes_per_step": {f"{s}": c for s, c in passes.items()},
                                   "tower_units_per_call": {f"{s}": u for s, u in units.items()},
                                   "tower_shapes": n_items, "rounds": rounds,
                                   "complete": len(rounds) == spec["rounds"]})

    write()
    for _ in range(spec["rounds"]):
        base, aa = tally(b.replayed()), tally(b.replayed())
        row = {"base": base["elements"], "aa": aa["elements"], "bc_base": base["bytecodes"], "bc_aa": aa["bytecodes"]}
        row.update({f"{s}": tally(b.replayed(rows=rows[s]))["elements"] for s in spec["sizes"]})
        row.update({f"bc_{s}": tally(b.replayed(passes=passes[s]))["bytecodes"] for s in spec["sizes"]})
        row.update({"tower_base": tally(b.tower(0))["elements"], "tower_aa": tally(b.tower(0))["elements"]})
        row.update({f"tower_{s}": tally(b.tower(units[s]))["elements"] for s in spec["sizes"]})
        rounds.append(row)
        write()


if __name__ == "__main__":  # pragma: no cover - runs under valgrind
    _worker(sys.argv[1])
