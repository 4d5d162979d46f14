"""How fast and how correct is one case (workload x pipeline) of the embedding routine?

``measure_case`` runs a workload's whole chunked-prefill schedule through an
``EmbedRoutine`` and returns one ``CaseRecord`` (``vlmpath.suite.record``):

1. *arrival*: every item's feature crosses a real shared-memory segment (pickled
   ``ShmPointer``) and the receiver learns its hash through the ``hash`` stage; the
   receiver's time is ``hash_s`` (not part of the routine's tok/s);
2. a *counted pass* over the schedule counts host-device syncs outside the vision tower
   (``syncs``) and inside it (``encoder_syncs``); then one plain untimed warm-up pass;
   peak memory (``peak_bytes``, ``reserved_bytes``: ``vlmpath.measure.memory``) is read
   over the warm-up pass on a GPU (allocator counters, free) and, on CPU, over one more
   untimed pass after the counted one (a dispatch mode: it must sit on neither a timed nor
   the warm-up pass, and stacked on the counted pass it disturbed the sync marks);
3. ``repeat`` *timed passes* (fresh embedding cache each) time every step on the device;
   ``tok_per_s`` is the schedule's prefill tokens over the median pass time;
4. *fidelity*: the last pass's final embeddings are checked against each item's golden
   rows (``vlmpath.measure.fidelity``), within the dtype's tolerance; golden rows that
   cannot tell items apart raise ``DegenerateGoldenError`` instead of an accuracy.

A step that raises aborts its requests, as the engine would fail them: their items count
as misplaced, the first error message is recorded, and ``tok_per_s`` is None so that a
failing strategy is never reported as fast.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace

import torch

from vlmpath.core.errors import EngineError
from vlmpath.core.scales import DEFAULT_SCALE, Scale
from vlmpath.engines.base import EngineAdapter, Routine
from vlmpath.engines.pipelines import Pipeline
from vlmpath.engines.reference import DEFAULT_CACHE_BYTES, EmbedRoutine, cache_budget_bytes, text_table
from vlmpath.measure.catalog import workload_by_name
from vlmpath.measure.content_hash import HashStats
from vlmpath.measure.encoders import family_of
from vlmpath.measure.fidelity import Assembler, GoldenRows, golden_rows, score
from vlmpath.measure.items import Step
from vlmpath.measure.memory import NOT_MEASURED_NO_COUNT, PeakMemory, peak_memory
from vlmpath.measure.pinning import load_average, pinned
from vlmpath.measure.shm import ShmLedger
from vlmpath.measure.timing import DeviceTimer
from vlmpath.measure.workload import Workload, with_item_hashes
from vlmpath.paths.hashing import pickle_round_trip
from vlmpath.paths.registry import HASH_PATHS
from vlmpath.suite.record import CaseRecord
from vlmpath.suite.record_check import instruments_held


@dataclass(frozen=True)
class Case:
    workload: str
    pipeline: Pipeline
    scale: Scale = DEFAULT_SCALE
    seed: int = 0

    @property
    def label(self) -> str:
        return f"{self.workload}/{self.pipeline.label}"


class Session:
    """Built encoders and tables for a run, so that cases share them (no global state)."""

    def __init__(self, device: torch.device | str = "cpu", weights_dir: str | None = None):
        self.device = torch.device(device)
        self.weights_dir = weights_dir
        self._towers: dict[tuple[str, str], torch.nn.Module] = {}  # (family, scale)
        self._encoders: dict[tuple[str, str], object] = {}
        # Golden rows per encoder, keyed by content hash: shared by every case that sees
        # the same item (any preset, any pipeline).
        self._golden: dict[tuple[str, str], GoldenRows] = {}

    def encoder(self, model: str, scale: str):
        key = (model, scale)
        if key not in self._encoders:
            fam = family_of(model)  # its encoders share one tower per scale
            if (fam.name, scale) not in self._towers:
                self._towers[fam.name, scale] = fam.build_tower(scale, self.device, weights_dir=self.weights_dir)
            self._encoders[key] = fam.encoders[model](self._towers[fam.name, scale], self.device, 0)
        return self._encoders[key]

    def golden(self, wl: Workload, encoder) -> dict[int, torch.Tensor]:
        # Per tower too: with ``--tower engine`` the golden rows come from the engine's tower.
        tower = type(getattr(encoder, "tower", None)).__name__
        known = self._golden.setdefault((wl.model, wl.scale, tower), GoldenRows())
        return golden_rows(wl, encoder, known)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]


def arrive(wl: Workload, hash_name: str) -> tuple[Workload, float, HashStats]:
    """Send every distinct feature through shared memory and hash it on the receiving side
    with the named hash path; returns the workload as the scheduler sees it."""
    path = HASH_PATHS[hash_name]
    features, seen = [], {}
    for it in wl.items:
        if it.hash not in seen:
            seen[it.hash] = len(features)
            features.append(it.feature)
    stats = HashStats()
    with ShmLedger() as ledger:
        pointers = path.send(features, ledger)  # the tokenizer process's work: not timed
        received = pickle_round_trip(pointers)
        t0 = time.perf_counter()
        hashes = path.receive(received, stats)
        hash_s = time.perf_counter() - t0
        for p in received:
            p.materialize()
    mapping = {old: hashes[i] for old, i in seen.items()}
    return with_item_hashes(wl, mapping), hash_s, stats


def _run_schedule(routine: Routine, wl: Workload, device, timed: bool):
    """Run every step; returns (assembler, seconds, failed rids, first error, failed steps)."""
    asm = Assembler(wl)
    failed: set[int] = set()
    first_error, failed_steps, seconds = None, 0, 0.0
    for step in wl.steps:
        step = Step(tuple(e for e in step.entries if e.rid not in failed))
        if not step.entries:
            continue
        try:
            if timed:
                with DeviceTimer(device) as t:
                    embeds = routine.run_step(step)
                seconds += t.seconds
            else:
                embeds = routine.run_step(step)
        except Exception as exc:  # a strategy's failure is a result, not a crash
            failed.update(e.rid for e in step.entries)
            failed_steps += 1
            first_error = first_error or _error_text(exc)
            continue
        asm.add(step, embeds)
    return asm, seconds, failed, first_error, failed_steps


@dataclass(frozen=True, eq=False)
class Prepared:
    """A workload as the scheduler sees it after arrival, with its encoder and text table."""

    workload: Workload
    encoder: object
    table: torch.Tensor
    hash_s: float
    hash_stats: HashStats


def prepare(workload: str, hash_name: str, scale: str, session: Session, seed: int = 0,
            engine: EngineAdapter | None = None) -> Prepared:
    """Build the workload, let it arrive through the named hash path (or the engine's own
    arrival, when an engine adapter is given), and build the table."""
    wl = workload_by_name(workload, scale, seed)
    encoder = session.encoder(wl.model, scale)
    wl, hash_s, hstats = (engine.arrive if engine is not None else arrive)(wl, hash_name)
    table = text_table(wl.vocab_size, encoder.out_dim, encoder.dtype, session.device, wl.seed)
    return Prepared(wl, encoder, table, hash_s, hstats)


def measure_case(case: Case, session: Session, *, repeat: int = 3, count: bool = True,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, engine: EngineAdapter | None = None,
                 threads: int | None = None, tower: str = "ours") -> CaseRecord:
    """``engine``: an engine adapter (``vlmpath.engines.base.EngineAdapter``, built from
    its registry entry); None runs the reference routine.
    ``threads``: torch's intra-op threads for this case (None: as set); recorded.
    ``tower``: ``ours`` (the seeded transformers tower) or ``engine`` (the engine's own, where
    its adapter offers ``engine_tower``)."""
    with pinned(threads) as in_effect:
        load0 = load_average()
        rec = _measure(case, session, repeat, count, cache_bytes, engine, tower)
        loads = [x for x in (load0, load_average()) if x is not None]
    rec = replace(rec, threads=in_effect, load_avg=max(loads) if loads else None)
    return instruments_held(rec)  # the code under test shares our process: did it touch an instrument?


def _measure(case: Case, session: Session, repeat: int, count: bool, cache_bytes: int,
             engine: EngineAdapter | None = None, tower: str = "ours") -> CaseRecord:
    case.pipeline.validate()
    prep = prepare(case.workload, case.pipeline.hash, case.scale, session, case.seed, engine)
    wl, encoder, table, hash_s, hstats = prep.workload, prep.encoder, prep.table, prep.hash_s, prep.hash_stats
    if tower == "engine":  # the engine's own tower; the golden rows come through it too
        swap = getattr(engine, "engine_tower", None)
        if swap is None:
            raise EngineError(f"--tower engine: {engine.label if engine else 'the reference'} has no tower of "
                              "its own that vlmpath drives (its adapter has no engine_tower); use --tower ours")
        encoder = swap(encoder)
    golden = session.golden(wl, encoder)
    cache_bytes = cache_budget_bytes(wl, table, cache_bytes)  # the preset's own budget where it has one
    make: Callable[..., Routine] = EmbedRoutine if engine is None else engine.routine

    syncs = encoder_syncs = None
    events: dict = {}
    on_cpu = session.device.type == "cpu"
    memory = PeakMemory.not_measured(NOT_MEASURED_NO_COUNT)
    if count:
        from vlmpath.measure.syncs import count_syncs

        inner_counts = []

        @contextmanager
        def encoder_region():
            with count_syncs() as sc:  # pauses the outer count: tower syncs go here
                inner_counts.append(sc)
                yield sc

        routine = make(wl, encoder, case.pipeline, table, cache_bytes=cache_bytes,
                       encoder_region=encoder_region)
        with count_syncs() as outer:
            _run_schedule(routine, wl, session.device, timed=False)
        syncs, events = outer.count, dict(outer.events)
        encoder_syncs = sum(sc.count for sc in inner_counts)
        if on_cpu:  # its own pass: stacked on the counted one it changed the sync marks
            with peak_memory(session.device) as mem:
                _run_schedule(make(wl, encoder, case.pipeline, table, cache_bytes=cache_bytes),
                              wl, session.device, timed=False)
            memory = mem.result

    counts = None
    if count and engine is not None:  # the engine's own work, exactly (suite.routine_counts)
        from vlmpath.suite.routine_counts import count_routine

        counts = count_routine(make, wl, encoder, case.pipeline, table, cache_bytes)

    # One plain pass: the counted pass runs under Python dispatch modes, which do not warm
    # up the same kernels and allocator paths as a normal call.
    with (nullcontext() if on_cpu else peak_memory(session.device)) as mem:
        _run_schedule(make(wl, encoder, case.pipeline, table, cache_bytes=cache_bytes),
                      wl, session.device, timed=False)
    memory = memory if on_cpu else mem.result
    samples = []
    result = None
    for _ in range(max(1, repeat)):
        routine = make(wl, encoder, case.pipeline, table, cache_bytes=cache_bytes,
                       encoder_region=nullcontext)
        result = _run_schedule(routine, wl, session.device, timed=True)
        samples.append(result[1])
    asm, _, failed, error, failed_steps = result
    # Within the dtype's tolerance on every device: a batched call and an item alone differ
    # in the last bits even in fp32 on a CPU. Degenerate golden rows raise (no accuracy).
    fid = score(wl, asm.rows, golden, failed=failed, encoder=encoder.name)
    wall = statistics.median(samples)
    return CaseRecord(
        workload=case.workload, scale=case.scale, pipeline=case.pipeline.to_dict(),
        tok_per_s=None if error or wall <= 0 else wl.prefill_tokens / wall,
        accuracy=fid.accuracy, max_abs_err=fid.max_abs_err,
        encoder_calls=routine.stats.encoder_calls, cache_hits=routine.stats.cache_hits,
        wall_s=wall, samples=tuple(samples), error=error,
        prefill_tokens=wl.prefill_tokens, steps=len(wl.steps), failed_steps=failed_steps,
        items=fid.total, placed=fid.placed, foreign_rows=fid.foreign, hash_s=hash_s, sha256_digests=hstats.sha256_digests,
        syncs=syncs, encoder_syncs=encoder_syncs, sync_events=events, device=str(session.device),
        peak_bytes=memory.allocated, reserved_bytes=memory.reserved, memory=memory.to_dict(),
        **({} if engine is None else {"engine": engine.label, "engine_version": engine.version,
                                      "engine_seams": _labelled_seams(engine, routine, syncs, events, hstats, counts)}),
        **_ledger_fields(routine),
        **({} if counts is None else {"routine_bytecodes": counts.bytecodes,
                                      "routine_aten_elements": counts.elements, "counts_error": counts.error,
                                      "counts_top": counts.top}),
    )


def _ledger_fields(routine) -> dict:
    """The last pass's path counts (``measure.path_ledger``), when the routine keeps a ledger."""
    ledger = getattr(routine, "ledger", None)
    return {} if ledger is None else dict(ledger.summary())


def _labelled_seams(engine, routine, syncs, events, hstats, counts) -> dict:
    """The engine's seams with the labels its measured behaviour gives (``engines.behaviour``)."""
    from vlmpath.engines.behaviour import labelled, observed

    name = engine.label.split("==")[0].split("@")[0]
    aten = (counts.top or {}).get("aten") if counts is not None and isinstance(counts.top, dict) else None
    seen = observed(getattr(routine, "calls", None), syncs, events, hstats.sha256_digests, name, aten=aten)
    return labelled(dict(engine.seams), seen)


def plan_cases(*, workloads=None, encode=None, inject=None, count=None, hash=None,
               pipelines=None, scale: Scale = DEFAULT_SCALE, seed: int = 0) -> list[Case]:
    """The cartesian product of the chosen names; unchosen stages keep the default (and
    ``encode`` defaults to every non-known-bad strategy). Unknown names fail up front."""
    from itertools import product

    from vlmpath.engines.pipelines import DEFAULT_PIPELINE, NAMED_PIPELINES
    from vlmpath.measure.presets import PRESETS, TRACE_PREFIX
    from vlmpath.measure.traces import read_trace
    from vlmpath.paths.registry import ENCODE_STRATEGIES

    wls = workloads or list(PRESETS)
    for w in wls:
        if w.startswith(TRACE_PREFIX):
            read_trace(w[len(TRACE_PREFIX):], scale)  # missing, malformed or too big: fails up front
        elif w not in PRESETS:
            workload_by_name(w, scale, seed)  # raises UnknownNameError naming the presets
        else:
            PRESETS[w].builders()  # an entry naming no builder: refused before any case
    if pipelines:
        pipes = [NAMED_PIPELINES[p] for p in pipelines]
    else:
        d = DEFAULT_PIPELINE
        pipes = [Pipeline(e, i, c, h) for e, i, c, h in product(
            encode or ENCODE_STRATEGIES.default_names(), inject or [d.inject],
            count or [d.count], hash or [d.hash])]
    for p in pipes:
        p.validate()
    return [Case(w, p, scale, seed) for w in wls for p in pipes]

