"""Issue 39's red-team pass: every entry of tests/redteam39_corpus.py through the real code,
with the count of what held (docs/hostile-input.md)."""

from __future__ import annotations

import pytest
from asv_fixtures import sha
from redteam39_corpus import (ACC, CONTRADICTING, CUTTING_SELECTIONS, P, REFUSED_ENTRIES, UNDER_TEST_PATHS,
                              VANISH, YARDSTICK_PATHS)

from vlmpath.compare import accepted
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_records import run_from_records
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.selection import keep_selected
from vlmpath.compare.verdict import compare
from vlmpath.compare.withheld import selection_withheld, withhold
from vlmpath.core.errors import VlmpathError
from vlmpath.core.yardstick import classify
from vlmpath.suite.record import CaseRecord, dumps_record, loads_record

BASE, HEAD = sha("rt39-base"), sha("rt39-head")
STEADY = [Metric("cpu-a", "bench_embed.EmbedRoutine.track_syncs", (("pipeline", "default"), ("preset", f"p{i}")),
                 "syncs", 0.0) for i in range(9)]


def _run(commit, metrics):
    return RunResults(commit=commit, machines=(MachineRun(machine="cpu-a", commit=commit, metrics=tuple(metrics)),))


def _vanish_holds(name: str) -> bool:
    bench, params, value, extra = VANISH[name]
    base = [Metric("cpu-a", ACC, P, "fraction", 1.0), *STEADY]
    head = list(STEADY) if bench is None else [Metric("cpu-a", bench, params, "fraction", value, **extra), *STEADY]
    rep = compare(_run(BASE, base), _run(HEAD, head))
    return rep.exit_code() == 1 and [c.benchmark for c in rep.regressions] == [ACC]


def _entry_refused(name: str) -> bool:
    try:
        accepted.entries_from({"accepted": [REFUSED_ENTRIES[name]]}, "benchmarks/accepted.yaml")
    except VlmpathError as exc:
        return "\n" not in str(exc)
    return False


_OK = dict(workload="multi_region", accuracy=1.0, items=4, placed=4, steps=3, failed_steps=0, syncs=0,
           prefill_tokens=1000, samples=(0.5,), tok_per_s=2000.0)


def _record_holds(name: str) -> bool:
    rec = loads_record(dumps_record(CaseRecord(**{**_OK, **CONTRADICTING[name]})), "artifact record")
    rep = compare(run_from_records([CaseRecord(**_OK)], machine="cpu-a", commit=BASE),
                  run_from_records([rec], machine="cpu-a", commit=HEAD))
    return rep.exit_code() == 1 and [c.verdict for c in rep.all()] == [Verdict.NEWLY_FAILING]


def _selection_holds(pattern: str) -> bool:
    base = [Metric("cpu-a", ACC, P, "fraction", 1.0), *STEADY]
    head = [Metric("cpu-a", ACC, P, "fraction", 0.5), *STEADY]
    rep = compare(_run(BASE, base), _run(HEAD, head))
    sel = {"cpu-a": pattern}
    cut = keep_selected(withhold(rep, selection_withheld(rep, sel)), sel)
    return cut.exit_code() != 0


CLASSES = {
    "vanish": (VANISH, _vanish_holds),
    "acceptance": (REFUSED_ENTRIES, _entry_refused),
    "records": (CONTRADICTING, _record_holds),
    "yardstick": (YARDSTICK_PATHS, lambda p: classify([(p, None)])[0] == [p]),
    "under-test": (UNDER_TEST_PATHS, lambda p: classify([(p, None)]) == ([], [p])),
    "selection": (CUTTING_SELECTIONS, _selection_holds),
}


@pytest.mark.parametrize("kind", CLASSES)
def test_every_entry_of_the_corpus_holds(kind, capsys):
    entries, holds = CLASSES[kind]
    failed = [e for e in entries if not holds(e)]
    with capsys.disabled():
        print(f"\nredteam39 {kind}: {len(entries) - len(failed)} of {len(entries)} held")
    assert not failed, failed


def test_the_unchanged_pair_stays_green():
    base = [Metric("cpu-a", ACC, P, "fraction", 1.0), *STEADY]
    assert compare(_run(BASE, base), _run(HEAD, base)).exit_code() == 0
