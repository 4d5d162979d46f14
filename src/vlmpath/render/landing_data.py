"""What did the suite find on this box for one commit, strategy against strategy?

The numbers behind the main job's landing page (``render.landing`` writes the HTML):
per path, the strategies the project exists to tell apart, side by side per workload
(or feature size), read from one commit's asv results (``compare.asv_results``, loaded
by the caller): never measured or judged here.

- encode: batched vs per-request (tok/s, vision-tower calls, accuracy);
- inject: ``masked_scatter`` vs ``where`` (host syncs, bandwidth, time);
- count: offsets vs mask-sum (readbacks, time);
- hash: forwarded vs re-hashed at the receiver (time by feature size);
- embed: the default pipeline vs the legacy one (tok/s, syncs, calls, accuracy).

Each ``Tile`` holds rows of ``Cell``s; a cell without a number says why (failed with the
benchmark's message, skipped, not selected by this run), so a tile is never blank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vlmpath.compare.records import MachineRun, Metric
from vlmpath.core.metrics import Direction, unit_spec
from vlmpath.render.fmt import fmt_with_unit


@dataclass(frozen=True)
class Measure:
    """One benchmark a tile shows, and what its column says."""

    benchmark: str
    label: str


@dataclass(frozen=True)
class TileSpec:
    key: str
    title: str
    question: str
    side_param: str            # the parameter that names the strategy
    sides: tuple[str, ...]     # the strategies to set side by side, the default first
    group_param: str           # workload (preset) or feature size
    group_label: str
    measures: tuple[Measure, ...]


TILES: tuple[TileSpec, ...] = (
    TileSpec("encode", "Encoding: batched vs per-request",
             "Does batching the vision tower across requests pay on this box, and are the rows still right?",
             "strategy", ("batched", "per_request"), "preset", "workload",
             (Measure("bench_encode.EncodeMetrics.track_tok_per_s", "throughput"),
              Measure("bench_encode.EncodeMetrics.track_encoder_calls", "vision-tower calls"),
              Measure("bench_encode.EncodeMetrics.track_accuracy", "accuracy"))),
    TileSpec("inject", "Injection: masked_scatter vs where",
             "How many host syncs does each injection cost per step, and at what bandwidth?",
             "strategy", ("masked_scatter", "where_index", "cumsum_index_copy"), "preset", "workload",
             (Measure("bench_inject.Inject.track_syncs", "host syncs per step"),
              Measure("bench_inject.Inject.track_bandwidth_fraction", "bandwidth (share of a plain copy)"),
              Measure("bench_inject.Inject.time_inject", "time per step"))),
    TileSpec("count", "Token count: offsets vs mask sum",
             "How many device-to-host readbacks does counting the placeholder tokens take?",
             "strategy", ("offsets", "mask_sum"), "preset", "workload",
             (Measure("bench_inject.Count.track_syncs", "readbacks"),
              Measure("bench_inject.Count.time_count", "time"))),
    TileSpec("hash", "Hashing: forwarded vs re-hashed",
             "What does the receiver pay to identify an item, by feature size?",
             "path", ("forwarded", "rehash", "xxh3", "blake3"), "size_mib", "feature size (MiB)",
             (Measure("bench_hash.Receive.time_receive", "receive time"),)),
    TileSpec("embed", "Whole routine: default vs legacy pipeline",
             "What does the whole embedding routine gain from today's stages over the ones before #26082?",
             "pipeline", ("default", "legacy"), "preset", "workload",
             (Measure("bench_embed.EmbedRoutine.track_tok_per_s", "throughput"),
              Measure("bench_embed.EmbedRoutine.track_syncs", "host syncs"),
              Measure("bench_embed.EmbedRoutine.track_encoder_calls", "vision-tower calls"),
              Measure("bench_embed.EmbedRoutine.track_accuracy", "accuracy"))),
)


#: Per tile: what its numbers measure, and what they mean on a CPU and on a GPU (the
#: landing page prints the first and the one for the machine's backend under the title).
READING: dict[str, tuple[str, str, str]] = {
    "encode": ("throughput: multimodal tokens per second over the device-timed encode steps (median of the "
               "timed passes; one in a quick run); vision-tower calls and accuracy (share of items whose rows "
               "landed right) are exact counts. asv's time_routine (its grid) is the wall time of the whole "
               "schedule, host work included, so the two can disagree.",
               "On a CPU one batched call does the same arithmetic as many small ones: the calls and accuracy "
               "are the finding, tok/s moves with the load of the box.",
               "On a GPU fewer, larger tower calls usually pay in tok/s; accuracy below 1.00 means rows landed "
               "on the wrong items (the #25910 failure)."),
    "inject": ("host syncs per step: device-to-host waits one injection step makes (exact); bandwidth: its "
               "speed as a share of a plain copy of the same rows; time per step: asv's timing.",
               "On a CPU a host sync costs next to nothing (there is no device to wait for): judge the sync "
               "count here, not the times.",
               "On a GPU every host sync stalls the stream: fewer syncs is the point of masked_scatter."),
    "count": ("readbacks: device-to-host copies counting the placeholder tokens takes (exact); time: asv's timing.",
              "On a CPU a readback is a memory read: judge the count, not the time.",
              "On a GPU each readback is a sync of the stream."),
    "hash": ("receive time: what the receiving side spends identifying one item of this size (asv's timing): "
             "a forwarded hash is a lookup, a re-hash reads every byte.",
             "On a CPU the re-hash competes with the model for the same cores.",
             "On a GPU box the re-hash runs on the host while the device waits."),
    "embed": ("throughput: multimodal tokens per second of the whole embedding routine; host syncs, "
              "vision-tower calls and accuracy are exact counts of one pass.",
              "On a CPU host syncs cost nothing, so legacy can win on tok/s: judge the sync count here, not tok/s.",
              "On a GPU the syncs #26082 removed are stalls: default should win on tok/s too."),
}


def reading(key: str, backend: str) -> tuple[str, str]:
    """(what the tile's numbers measure, what they mean on this backend); empty when unknown."""
    what, cpu, gpu = READING.get(key, ("", "", ""))
    return what, (cpu if backend == "cpu" else gpu if backend in ("cuda", "rocm") else "")


@dataclass(frozen=True)
class Cell:
    text: str                 # the number with its unit, or why there is none
    state: str                # ok | failed | skipped | not run
    n: int = 0                # values behind the number (samples; a track's one value is 1)
    spread: str = ""          # "range 1.1k-1.3k tok/s" when there are samples
    best: bool = False        # the better side of this row (by the unit's direction)
    title: str = ""           # the full message (a failure), for a tooltip


@dataclass(frozen=True)
class Row:
    group: str
    cells: tuple[Cell, ...]   # measure-major: every side of measure 0, then measure 1 ...


@dataclass(frozen=True)
class Tile:
    spec: TileSpec
    sides: tuple[str, ...]    # the sides that have results here (the spec's order)
    rows: tuple[Row, ...]
    note: str = ""            # why the tile has no rows

    @property
    def numbers(self) -> int:
        return sum(c.state == "ok" for r in self.rows for c in r.cells)


def direction(unit: str) -> Direction | None:
    """The metric table's direction of ``unit``; None for a unit it does not know."""
    spec = unit_spec(unit)
    return spec.direction if spec else None


def better_text(unit: str) -> str:
    d = direction(unit)
    return f"{d} is better" if d else ""


def spread_text(m: Metric) -> str:
    """The samples' range (or asv's 99% interval) in the value's unit; empty for one value."""
    lo_hi = (min(m.samples), max(m.samples)) if len(m.samples) > 1 else m.ci_99
    if lo_hi is None:
        return ""
    lo, hi = lo_hi
    return f"range {fmt_with_unit(lo, m.unit)} to {fmt_with_unit(hi, m.unit)}"


def value_count(m: Metric) -> int:
    """How many values stand behind ``m.value``: its samples, else one (a track's value)."""
    return len(m.samples) or (1 if m.value is not None else 0)


def _cell(m: Metric | None) -> Cell:
    if m is None:
        return Cell("not run", "not run", title="not selected by this run (--bench), or not in this suite")
    if m.skipped:
        return Cell("skipped", "skipped", title="the benchmark skipped it here (asv n/a: not measurable on "
                    "this device, e.g. no allocator counter, or a scale that needs a GPU)")
    if not m.ok:
        why = m.invalid or m.error or "failed"
        return Cell("FAILED", "failed", title=" ".join(str(why).split())[:300])
    return Cell(fmt_with_unit(m.value, m.unit), "ok", value_count(m), spread_text(m))


def _mark_best(cells: list[Cell], metrics: list[Metric | None]) -> list[Cell]:
    ok = [(i, m) for i, m in enumerate(metrics) if m is not None and m.ok]
    if len(ok) < 2:
        return cells
    d = direction(ok[0][1].unit)
    values = {m.value for _, m in ok}
    if not d or len(values) == 1:  # a tie has no better side
        return cells
    pick = max if d == Direction.HIGHER else min
    best = pick(m.value for _, m in ok)
    return [Cell(c.text, c.state, c.n, c.spread, best=(metrics[i] is not None and metrics[i].ok
                                                       and metrics[i].value == best), title=c.title)
            for i, c in enumerate(cells)]


def _sort_key(group: str):
    try:
        return (0, float(group), group)
    except ValueError:
        return (1, 0.0, group)


def tile(machine: MachineRun, spec: TileSpec) -> Tile:
    """One tile of ``spec`` from one machine's results of one commit."""
    wanted = {ms.benchmark for ms in spec.measures}
    metrics = [m for m in machine.metrics if m.benchmark in wanted]
    by_key: dict[tuple[str, str, str], Metric] = {}
    for m in metrics:
        p = dict(m.params)
        by_key[(m.benchmark, p.get(spec.side_param, ""), p.get(spec.group_param, ""))] = m
    present = {side for _, side, _ in by_key}
    sides = tuple(s for s in spec.sides if s in present) + tuple(sorted(present - set(spec.sides)))
    groups = sorted({g for _, _, g in by_key}, key=_sort_key)
    if not metrics:
        return Tile(spec, (), (), note=f"no results of {', '.join(sorted(wanted))} for this commit on "
                    f"{machine.machine}: not selected by this run (--bench), or the run failed before them")
    rows = []
    for g in groups:
        cells: list[Cell] = []
        for ms in spec.measures:
            found = [by_key.get((ms.benchmark, s, g)) for s in sides]
            cells += _mark_best([_cell(m) for m in found], found)
        rows.append(Row(g, tuple(cells)))
    return Tile(spec, sides, tuple(rows))


def tiles(machine: MachineRun, specs: Sequence[TileSpec] = TILES) -> tuple[Tile, ...]:
    return tuple(tile(machine, s) for s in specs)


def measure_unit(machine: MachineRun, benchmark: str) -> str:
    """The unit a benchmark reports on this machine (its first metric's), ``""`` if none."""
    return next((m.unit for m in machine.metrics if m.benchmark == benchmark), "")
