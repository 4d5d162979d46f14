"""Do `vlmpath run`'s options reach asv's benchmark processes as one record, and back unchanged?"""

from __future__ import annotations

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.runner.launch import benchmark_env
from vlmpath.runner.options import RunOptions
from vlmpath.suite import cases
from vlmpath.suite.bench_env import BenchEnv


def test_the_record_round_trips_through_the_environment():
    rec = BenchEnv(scale="full", quick=True, machine="m1", engine="sglang==0.5.23", engine_python="/x/python")
    assert BenchEnv.read(rec.apply({})) == rec


def test_a_later_record_clears_what_an_earlier_one_set():
    env = BenchEnv(quick=True, engine="sglang==0.5.23", engine_python="/x/python").apply({})
    BenchEnv().apply(env)
    assert BenchEnv.read(env) == BenchEnv()


def test_the_run_hands_its_options_to_the_benchmarks(tmp_path):
    # A stale engine in the caller's environment must not leak into a reference run.
    env = benchmark_env(RunOptions(scale=Scale.TINY, quick=True), tmp_path, "m1", "cpu",
                        base={"VLMPATH_ENGINE": "sglang==0.5.12"})
    got = BenchEnv.read(env)
    assert (got.scale, got.quick, got.machine, got.engine) == ("tiny", True, "m1", None)
    assert cases.scale_from_env(env) == "tiny" and cases.quick_from_env(env) is True


def test_an_unknown_scale_is_named_with_the_choices():
    with pytest.raises(VlmpathError, match="VLMPATH_SCALE='huge'.*tiny"):
        BenchEnv.read({"VLMPATH_SCALE": "huge"})
