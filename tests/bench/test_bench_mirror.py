"""The asv suite's cases as pytest-benchmark tests (same ``vlmpath.suite.cases``, same timed regions).

Timed: the routine's whole schedule (encode, embed), one injection or count call, one
receiver-side hash. Extra metrics go into ``benchmark.extra_info`` under the keys
``vlmpath.compare.pytest_results`` reads: the metric table's routine metrics. A case whose
strategy failed fails the test (and records no tok/s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.core.metrics import METRICS
from vlmpath.measure.platform import sync
from vlmpath.measure.shm import ShmLedger
from vlmpath.measure.syncs import syncs_of
from vlmpath.paths.hashing import pickle_round_trip
from vlmpath.paths.registry import COUNTERS, HASH_PATHS, INJECTORS
from vlmpath.suite import cases

ROUTINE = cases.encode_cases() + cases.embed_cases()


def _prepared(case: cases.RoutineCase, scale: str, session):
    from vlmpath.engines.reference import text_table
    from vlmpath.measure.catalog import workload_by_name
    from vlmpath.suite.measure import arrive

    pipe = case.pipeline()
    wl = workload_by_name(case.preset, scale, 0)
    enc = session.encoder(wl.model, scale)
    wl, _, _ = arrive(wl, pipe.hash)
    dtype = enc.dtype if hasattr(enc, "dtype") else enc.qwen.dtype
    return pipe, wl, enc, text_table(wl.vocab_size, enc.out_dim, dtype, session.device, wl.seed)


@pytest.mark.parametrize("case", ROUTINE, ids=[c.label for c in ROUTINE])
def test_routine(benchmark, case, bench_scale, bench_session, routine_records):
    from vlmpath.engines.reference import EmbedRoutine

    record = routine_records(case)
    benchmark.group = f"{case.path}:{case.preset}"
    # The metric table's routine metrics (the keys the reader takes); a missing number (a
    # failed case's tok/s) is left out rather than written as null.
    numbers = {m.name: getattr(record, m.name) for m in METRICS if m.routine}
    benchmark.extra_info.update({k: v for k, v in numbers.items() if v is not None})
    benchmark.extra_info.update({"case": case.label, "error": record.error})
    assert record.error is None, f"{case.label} failed: {record.error}"
    pipe, wl, enc, table = _prepared(case, bench_scale, bench_session)

    def schedule():
        routine = EmbedRoutine(wl, enc, pipe, table)
        for step in wl.steps:
            routine.run_step(step)
        sync(bench_session.device)
        return routine

    # Disabled (the normal test run): pytest-benchmark calls it once, untimed.
    routine = benchmark.pedantic(schedule, rounds=3, warmup_rounds=1)
    assert routine.stats.encoder_calls == record.encoder_calls  # same work as the measured case


@pytest.mark.parametrize("preset", cases.INJECT_PRESETS)
@pytest.mark.parametrize("strategy", cases.INJECT_STRATEGY_NAMES)
def test_inject(benchmark, strategy, preset, bench_scale, bench_device):
    inp = cases.inject_inputs(preset, bench_scale, bench_device)
    inject = INJECTORS[strategy]
    expected = inp.dest.clone()
    expected[inp.mask.squeeze(-1)] = inp.rows  # the reference placement
    benchmark.extra_info["syncs"] = syncs_of(inject, inp.dest, inp.mask, inp.rows).count

    def call():
        inject(inp.dest, inp.mask, inp.rows)
        sync(bench_device)

    benchmark(call)
    assert inp.dest.equal(expected)


@pytest.mark.parametrize("preset", cases.INJECT_PRESETS)
@pytest.mark.parametrize("strategy", cases.COUNT_STRATEGY_NAMES)
def test_count(benchmark, strategy, preset, bench_scale, bench_device):
    inp = cases.inject_inputs(preset, bench_scale, bench_device)
    count = COUNTERS[strategy]
    benchmark.extra_info["syncs"] = syncs_of(count, inp.query).count
    assert benchmark(count, inp.query) == inp.count


@pytest.mark.parametrize("size_mib", cases.HASH_SIZES_MIB)
@pytest.mark.parametrize("path", cases.HASH_PATH_NAMES)
def test_hash_receive(benchmark, path, size_mib):
    hp = HASH_PATHS[path]
    with ShmLedger() as ledger:
        feature = cases.hash_feature(size_mib)
        received = pickle_round_trip(hp.send([feature], ledger))
        hashes = benchmark(hp.receive, received)
        expected = hp.receive(pickle_round_trip(hp.send([feature], ledger)))
        for p in received:
            p.close()
    assert hashes == expected and isinstance(hashes[0], int)


@pytest.mark.e2e
def test_benchmark_json_is_readable_by_results(tmp_path):
    """A real ``--benchmark-only --benchmark-json`` run of two cheap cases, read back."""
    from vlmpath.compare.pytest_results import load_pytest_benchmark

    out = tmp_path / "bench.json"
    root = Path(__file__).resolve().parents[2]
    # Not the PYTEST_XDIST_* of the worker running this test: pytest-benchmark would take the
    # inner run for an xdist worker and switch itself off.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(Path(__file__)), "-q", "-p", "no:cacheprovider",
         "--benchmark-only", "--benchmark-enable", f"--benchmark-json={out}", "--benchmark-max-time=0.05",
         "-k", "test_count and many_small_images"],
        cwd=root, env=env, check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    raw = json.loads(out.read_text())
    assert raw["machine_info"]["vlmpath_machine"]
    run = load_pytest_benchmark(out)
    (mrun,) = run.machines
    assert mrun.machine == raw["machine_info"]["vlmpath_machine"]
    assert mrun.fingerprint is not None and mrun.fingerprint.backend in ("cpu", "cuda", "rocm")
    syncs = {dict(m.params)["strategy"]: m.value for m in mrun.metrics if m.benchmark.endswith(".syncs")}
    assert syncs == {"mask_sum": 1.0, "offsets": 0.0}
    timings = [m for m in mrun.metrics if m.unit == "seconds"]
    assert len(timings) == 2 and all(m.value > 0 and len(m.samples) >= 1 for m in timings)
