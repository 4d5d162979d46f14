"""Does the replayed tower keep the encoder call's contract, so a count holds only the routine's code?

The real routine (``EmbedRoutine``) on a real tiny workload, natively (no valgrind): a pass
through the replay gives the same embeddings as a pass through the real tower, makes the
same calls (no recorded call left over), never runs the tower, and a call the recording did
not make (other items) raises instead of inventing rows. The worker counts each routine case
and one tower case per encoder with a stand-in counter; ``CallCounts`` names an added aten
operator and an added Python helper. The worker test is ``e2e`` (a minute under load).
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch

from vlmpath.measure import tower_replay as ir_replay
from vlmpath.engines.pipelines import DEFAULT_PIPELINE
from vlmpath.engines.reference import EmbedRoutine
from vlmpath.suite.measure import Session, prepare

WORKER = Path(ir_replay.__file__).parents[1] / "selfcheck" / "ir_worker.py"


@pytest.fixture(scope="module")
def prep():
    return prepare("mixed", DEFAULT_PIPELINE.hash, "tiny", Session("cpu"))


class Counting:
    def __init__(self, real):
        self.real, self.calls = real, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def encode(self, items):
        self.calls += 1
        return self.real.encode(items)


def _pass(prep, encoder) -> list[torch.Tensor]:
    r = EmbedRoutine(prep.workload, encoder, DEFAULT_PIPELINE, prep.table)
    return [r.run_step(s) for s in prep.workload.steps]


def test_a_replayed_pass_places_the_towers_rows_without_running_it(prep):
    real = Counting(prep.encoder)
    rec = ir_replay.Recorder(real)
    recorded = _pass(prep, rec)
    made = real.calls
    replay = rec.replay()
    replayed = _pass(prep, replay)
    assert real.calls == made > 0  # the replay never ran the tower
    assert replay.left == 0  # and made every recorded call
    assert all(torch.equal(a, b) for a, b in zip(recorded, replayed))
    with pytest.raises(RuntimeError, match="no recorded tower call"):
        rec.replay().encode(prep.workload.items[:1] + prep.workload.items[:1])


def test_a_shared_memo_runs_each_tower_call_once_across_recordings(prep):
    real, memo = Counting(prep.encoder), {}
    _pass(prep, ir_replay.Recorder(real, memo))
    first = real.calls
    again = ir_replay.Recorder(real, memo)
    _pass(prep, again)
    assert real.calls == first and len(again.calls) == first


def test_call_counts_name_an_added_operator_and_helper(prep):
    def helper(x):
        return x + 1

    with ir_replay.CallCounts() as plain:
        torch.ones(3).clone()
    with ir_replay.CallCounts() as planted:
        torch.sort(torch.ones(3).clone())
        helper(1)
    assert planted.aten["sort"] == 1 and "sort" not in plain.aten
    assert any(k.endswith(":test_call_counts_name_an_added_operator_and_helper.<locals>.helper")
               for k in planted.python), planted.python


@pytest.mark.e2e  # two cases built, recorded and replayed: a minute on a loaded 2-core box
def test_the_worker_counts_every_case_replayed_and_each_tower_once(monkeypatch):
    w = runpy.run_path(str(WORKER), run_name="ir_worker_under_test")

    class StandIn:  # counts calls instead of instructions: the worker's bookkeeping, natively
        last = None
        counted: list = []

        def instrument(self, on):
            pass

        def count(self, fn):
            fn()
            self.counted.append(fn)
            return 1000 + len(self.counted)

    api = w["_imports"]()
    spec = {"scale": "tiny", "bench": r"\('default', '(mixed|evs_video)'\)", "mode": "routine", "profiles": None}
    recs = w["count_all"](api, spec, StandIn(), api["Session"]("cpu"))
    assert [(r["kind"], r.get("preset") or r["encoder"]) for r in recs] == [
        ("routine", "mixed"), ("routine", "evs_video"), ("tower", "qwen2_5_vl"), ("tower", "evs")]
    assert all(r["error"] is None and r["instructions"] > 1000 for r in recs), recs
    assert recs[2]["shapes"] == "1x8x8,1x16x16,4x8x8" and recs[3]["shapes"] == "8x8x8"
