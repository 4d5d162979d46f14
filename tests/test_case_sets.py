"""Do case sets measured by one engine worker start stay apart, and is each one's outcome its own?

``suite.engine_run.measure_case_sets`` hands one worker several case sets (the engine
adapter tests measure all theirs with one start: ``tests/engine_adapter_env.py``). No engine
is needed here:

- the worker's side (``suite.worker.run_job``) runs in this process on the fake sglang tree
  (``tests/fixtures/fake_engine``, through the real sglang adapter): a set's planted faults,
  its ``*:bare`` server state and its engine tower do not reach the next set, a refused set
  does not stop the next one, and every adapter built is closed;
- the parent's side (``_run_worker``) runs a fake engine python (a few lines of Python that
  answer the job as a crashing or refusing worker would): a refusal belongs to the set it
  came in, a crash mid-job fills failed records for the rest of that set and every later
  set, and a refusal without the worker's exit status is a crash;
- the reference (in this process) returns the refusal of a set it cannot measure in that
  set's place, and ``measure_cases`` still raises it.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.engines.adapter_common import FAULT_ENV
from vlmpath.engines.base import EngineSpec
from vlmpath.suite.engine_run import CaseSet, measure_case_sets, measure_cases
from vlmpath.suite.measure import plan_cases
from vlmpath.suite.record import CaseRecord, dumps_record, read_records

FAKE = Path(__file__).parent / "fixtures" / "fake_engine"


@pytest.fixture
def fake_sglang(monkeypatch):
    """The fake sglang tree importable in this process (as ``--engine-src`` puts it first on
    the worker's path); its modules are dropped afterwards."""
    monkeypatch.syspath_prepend(str(FAKE))
    monkeypatch.delenv(FAULT_ENV, raising=False)
    yield EngineSpec.parse(None, src=str(FAKE)).label
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]


def _job_set(cs: CaseSet) -> dict:
    return json.loads(json.dumps(cs.job()))  # as it crosses the pipe


def test_a_sets_faults_server_state_and_tower_stay_in_that_set(fake_sglang, monkeypatch, tmp_path):
    from vlmpath.engines import sglang_tower
    from vlmpath.engines.sglang_adapter import SglangEngine
    from vlmpath.suite import worker

    closed = []
    close = SglangEngine.close
    monkeypatch.setattr(SglangEngine, "close", lambda self: (closed.append(self), close(self)))
    # sglang's own tower needs a real release: this one is ours under the engine's seam.
    monkeypatch.setattr(sglang_tower, "engine_tower", lambda encoder: encoder)
    cases = plan_cases(workloads=["video"], pipelines=["default"])  # the smallest preset
    sets = [CaseSet(cases, repeat=1, count=False, tower="engine"),
            CaseSet(cases, repeat=1, count=False, faults="video:raise:engine says no;*:bare"),
            CaseSet(cases, repeat=1, count=False, engine_options={"runner": "v1"}),  # sglang declares none: refused
            CaseSet(cases, repeat=1, count=False)]
    outs = [[] for _ in sets]
    job = {"engine": fake_sglang, "device": "cpu", "sets": [_job_set(cs) for cs in sets]}
    results = worker.run_job(job, [SimpleNamespace(write=o.append, flush=lambda: None) for o in outs])
    assert results == [0, 1, -1, 0]  # failures per set; -1: refused
    for i, o in enumerate(outs):
        (tmp_path / f"{i}.jsonl").write_text("".join(o))
    tower, planted, refused, plain = (read_records(tmp_path / f"{i}.jsonl") for i in range(len(sets)))
    assert refused == []
    (tower,), (planted,), (plain,) = tower, planted, plain
    assert tower.error is None and tower.engine_seams["tower"] == sglang_tower.TOWER_SEAM
    assert planted.error == "RuntimeError: engine says no" and "tower" not in planted.engine_seams
    assert planted.engine_seams["server_state"] == "none (planted: bare)"
    # The last set: no plant, its own server state, our tower.
    assert plain.error is None and plain.accuracy == 1.0 and "tower" not in plain.engine_seams
    assert plain.engine_seams["server_state"] != "none (planted: bare)"
    assert len(closed) == 3 and len({id(e) for e in closed}) == 3  # an adapter per measured set, each closed
    assert FAULT_ENV not in os.environ


def _fake_python(tmp_path: Path, body: str) -> str:
    """An engine python that answers the job (stdin) with ``body``: ``job``, ``sets``,
    ``write(i, record_line)`` and ``say(line)`` are in scope."""
    py = tmp_path / "python"
    py.write_text(f"#!{sys.executable}\n" + textwrap.dedent('''
        import json, sys
        job = json.load(sys.stdin)
        sets = job["sets"]

        def write(i, line):
            with open(sets[i]["out"], "a") as f:
                f.write(line + "\\n")

        def say(line):
            print(line, file=sys.stderr, flush=True)
    ''') + textwrap.dedent(body), encoding="utf-8")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return str(py)


def _vllm_tree(tmp_path: Path) -> EngineSpec:
    (tmp_path / "tree" / "vllm").mkdir(parents=True)  # a vLLM checkout's layout
    return EngineSpec.parse("vllm", src=str(tmp_path / "tree"))


def _line(workload: str) -> str:
    return dumps_record(CaseRecord(workload=workload, accuracy=1.0, tok_per_s=10.0, engine="vllm"))


CASES = plan_cases(workloads=["few_large_images", "video"], pipelines=["default"])


def test_a_crash_mid_job_fills_failed_records_for_that_set_and_every_later_one(tmp_path):
    py = _fake_python(tmp_path, f'''
        say("worker: set 1 of 3")
        write(0, {_line("few_large_images")!r})
        write(0, {_line("video")!r})
        say("worker: set 2 of 3")
        write(1, {_line("few_large_images")!r})
        say("Segmentation fault in the engine")
        sys.exit(139)
    ''')
    first, second, third = measure_case_sets([CaseSet(CASES, repeat=1)] * 3, _vllm_tree(tmp_path), python=py)
    assert [(r.workload, r.error) for r in first] == [("few_large_images", None), ("video", None)]
    assert second[0].error is None and second[0].accuracy == 1.0
    for r in [second[1], *third]:
        assert r.error == (f"engine worker ({py}) exited with 139 before this case: "
                           "Segmentation fault in the engine")
        assert r.accuracy is None and r.tok_per_s is None
    assert [r.workload for r in second] == [r.workload for r in third] == ["few_large_images", "video"]


REFUSAL = "--vllm-runner v2: vllm 0.11.1 has no v2 model runner (it has v1)"


@pytest.mark.parametrize("rc", [2, 1])
def test_a_refusal_belongs_to_its_set_and_needs_the_workers_exit_status(tmp_path, rc):
    py = _fake_python(tmp_path, f'''
        say("worker: set 1 of 3")
        write(0, {_line("few_large_images")!r})
        write(0, {_line("video")!r})
        say("worker: set 2 of 3")
        say("vlmpath worker refused: {REFUSAL}")
        say("worker: set 3 of 3")
        write(2, {_line("few_large_images")!r})
        write(2, {_line("video")!r})
        sys.exit({rc})
    ''')
    sets = [CaseSet(CASES, repeat=1), CaseSet(CASES, repeat=1, engine_options={"runner": "v2"}),
            CaseSet(CASES, repeat=1)]
    before, refused, after = measure_case_sets(sets, _vllm_tree(tmp_path), python=py)
    for recs in (before, after):
        assert [(r.workload, r.error) for r in recs] == [("few_large_images", None), ("video", None)]
    if rc == 2:
        assert isinstance(refused, VlmpathError) and str(refused) == REFUSAL
    else:  # the line alone could be anyone's: a crash, failed records, as before
        assert [r.workload for r in refused] == ["few_large_images", "video"]
        assert all(r.error and "exited with 1" in r.error for r in refused)


def test_measure_cases_is_the_one_set_case_and_raises_its_refusal(tmp_path):
    py = _fake_python(tmp_path, f'''
        say("vlmpath worker refused: {REFUSAL}")
        sys.exit(2)
    ''')
    with pytest.raises(VlmpathError, match="has no v2 model runner"):
        measure_cases(CASES, _vllm_tree(tmp_path), python=py, engine_options={"runner": "v2"})
    job_py = _fake_python(tmp_path, f'''
        assert len(sets) == 1 and sets[0]["engine_options"] == {{"runner": "v2"}} and sets[0]["faults"] is None, sets
        assert [c["workload"] for c in sets[0]["cases"]] == ["few_large_images", "video"]
        write(0, {_line("few_large_images")!r})
        write(0, {_line("video")!r})
    ''')
    recs = measure_cases(CASES, _vllm_tree(tmp_path / "b"), python=job_py, engine_options={"runner": "v2"},
                         json_path=tmp_path / "r.jsonl")
    assert [r.error for r in recs] == [None, None]
    assert [r.workload for r in read_records(tmp_path / "r.jsonl")] == ["few_large_images", "video"]


def test_the_reference_refuses_in_the_place_of_the_set_it_cannot_measure():
    sets = [CaseSet(CASES, tower="engine"), CaseSet([]), CaseSet(CASES, engine_options={"runner": "v1"}),
            CaseSet(CASES, faults="video:flip")]
    tower, empty, runner, faults = measure_case_sets(sets, "reference")
    assert "--tower engine runs an engine's own vision tower" in str(tower)
    assert empty == []
    assert str(runner).startswith("--engine-option runner=v1: the reference routine takes no engine options")
    assert "planted faults go into an engine's adapter" in str(faults)
    with pytest.raises(VlmpathError, match="repeat must be at least 1"):
        CaseSet(CASES, repeat=0)
