"""Does the engine layer parse specs, find environments and fail cases the way it says?

Fast tests (no engine needed): engine specs and their errors, machine names per engine,
the import-chain data file, environment lookup in a planted home. End-to-end tests drive
the real worker subprocess on a *fake* sglang source tree (``tests/fixtures/fake_engine``,
our own code) through ``--engine-src``: an engine function that raises gives a failed case
carrying the engine's message while the other case measures at accuracy 1.0, and a tree
that lacks what the adapter drives gives one clear error naming the missing pieces.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.core.errors import EngineError, VlmpathError
from vlmpath.engines.base import EngineSpec

FAKE = Path(__file__).parent / "fixtures" / "fake_engine"
ROOT = Path(__file__).resolve().parents[1]


# --- the planted faults of the adapter tests -----------------------------------------------------
def test_several_planted_faults_each_reach_only_their_workload(monkeypatch):
    from vlmpath.engines.adapter_common import FAULT_ENV, Fault

    monkeypatch.setenv(FAULT_ENV, "few_large_images:raise:engine says no;many_small_images:flip")
    assert Fault.for_workload("few_large_images").raises == "engine says no"
    assert Fault.for_workload("many_small_images").flip and not Fault.for_workload("many_small_images").raises
    assert Fault.for_workload("video") == Fault() and Fault.server_state_wanted()
    monkeypatch.setenv(FAULT_ENV, "video:device_mask;*:bare")
    assert Fault.for_workload("video").kind == "device_mask" and not Fault.server_state_wanted()
    monkeypatch.setenv(FAULT_ENV, "few_large_images:raise")  # one plant, as before; the default message
    assert Fault.for_workload("few_large_images").raises == Fault.message and Fault.server_state_wanted()


# --- specs ---------------------------------------------------------------------------------
def test_reference_is_the_default():
    for text in (None, "", "reference"):
        spec = EngineSpec.parse(text)
        assert (spec.kind, spec.label, spec.in_process) == ("reference", "reference", True)


def test_release_and_src_labels(tmp_path):
    spec = EngineSpec.parse("sglang==0.5.23")
    assert (spec.kind, spec.label, spec.slug, spec.in_process) == ("release", "sglang==0.5.23", "sglang-0.5.23", False)
    (tmp_path / "sglang").mkdir()
    src = EngineSpec.parse(None, src=str(tmp_path))
    assert src.label == f"sglang@src:{tmp_path.resolve()}" and src.slug == "sglang-src"
    assert EngineSpec.parse(src.label) == src  # the label round-trips (VLMPATH_ENGINE carries it)


@pytest.mark.parametrize("text, words", [
    ("tgi==0.9", "unknown engine 'tgi'"),
    ("sglang", "is not an engine"),
    ("sglang=0.5.23", "is not an engine"),
    ("sglang==", "is not an engine"),
])
def test_unknown_engine_spec_is_one_clear_error(text, words):
    with pytest.raises(EngineError, match=words) as info:
        EngineSpec.parse(text)
    assert "sglang==X.Y.Z" in str(info.value)  # says what to write instead
    assert isinstance(info.value, VlmpathError)


def test_engine_src_must_hold_an_sglang_package(tmp_path):
    with pytest.raises(EngineError, match="is not a directory"):
        EngineSpec.parse(None, src=str(tmp_path / "missing"))
    with pytest.raises(EngineError, match=r"no engine package inside \(sglang/"):
        EngineSpec.parse(None, src=str(tmp_path))
    with pytest.raises(EngineError, match="no sglang/ package inside"):
        EngineSpec.parse("sglang", src=str(tmp_path))
    (tmp_path / "python" / "sglang").mkdir(parents=True)  # a checkout's root: its python/ is named
    with pytest.raises(EngineError, match=f"give --engine-src {tmp_path / 'python'}"):
        EngineSpec.parse(None, src=str(tmp_path))
    assert EngineSpec.parse(None, src=str(tmp_path / "python")).name == "sglang"
    (tmp_path / "sglang").mkdir()
    with pytest.raises(EngineError, match="exclude each other"):
        EngineSpec.parse("reference", src=str(tmp_path))


def test_cli_unknown_engine_exits_2_naming_it(capsys):
    from vlmpath.cli import main

    assert main(["measure", "--engine", "tgi==1.0", "--workload", "multi_region"]) == 2
    err = capsys.readouterr().err
    assert "unknown engine 'tgi'" in err and "vlmpath engine install" in err


def test_missing_release_env_names_the_install_command(tmp_path):
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.measure import plan_cases

    cases = plan_cases(workloads=["multi_region"], encode=["batched"])
    with pytest.raises(EngineError, match=r"vlmpath engine install sglang==9\.9\.9"):
        measure_cases(cases, "sglang==9.9.9", repeat=1, home=str(tmp_path))


# --- machine names and the run's environment -----------------------------------------------
def test_engine_goes_into_the_machine_name_and_the_benchmark_env(tmp_path):
    from vlmpath.runner.launch import benchmark_env, engine_machine
    from vlmpath.runner.options import RunOptions

    assert engine_machine("cpu-x86", None) == "cpu-x86"
    assert engine_machine("cpu-x86", EngineSpec.parse("reference")) == "cpu-x86"
    assert engine_machine("cpu-x86", EngineSpec.parse("sglang==0.5.23")) == "cpu-x86-sglang-0.5.23"
    env = benchmark_env(RunOptions(engine=EngineSpec.parse("sglang==0.5.23")), tmp_path, "m", "cpu", base={})
    assert env["VLMPATH_ENGINE"] == "sglang==0.5.23"
    assert "VLMPATH_ENGINE" not in benchmark_env(RunOptions(), tmp_path, "m", "cpu", base={})


# --- environments --------------------------------------------------------------------------
def test_env_lookup_orders_releases_by_version(tmp_path):
    from vlmpath.engines import envs

    for v in ("0.5.9", "0.5.23", "0.5.14"):
        py = tmp_path / f"sglang-{v}" / "bin" / "python"
        py.parent.mkdir(parents=True)
        py.write_text("")
        (py.parents[1] / envs.MANIFEST).write_text(json.dumps({"engine": f"sglang=={v}", "complete": True}))
    (tmp_path / "sglang-0.6.0").mkdir()  # no interpreter, no manifest: listed incomplete, never used
    assert [e.spec.version for e in envs.list_envs(tmp_path, complete_only=True)] == ["0.5.9", "0.5.14", "0.5.23"]
    assert [e.state for e in envs.list_envs(tmp_path)] == ["complete"] * 3 + ["incomplete"]
    assert envs.newest_env(tmp_path).spec.label == "sglang==0.5.23"
    assert envs.require_env(EngineSpec.parse("sglang==0.5.14"), tmp_path).path.name == "sglang-0.5.14"
    assert envs.newest_env(tmp_path / "none") is None


def test_import_chain_lists_each_package_with_why():
    from importlib import resources

    from vlmpath.engines.envs import import_chain

    names = import_chain()
    assert {"triton", "msgspec", "transformers", "blake3", "xxhash"} <= set(names)
    assert "sglang" not in names and "torch" not in names  # those are installed on their own terms
    text = resources.files("vlmpath.engines").joinpath("data/sglang_import_chain.txt").read_text()
    undocumented = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#") and "#" not in ln]
    assert not undocumented, f"packages without a reason: {undocumented}"


def test_install_refuses_anything_but_a_release(tmp_path):
    from vlmpath.engines.envs import install

    with pytest.raises(EngineError, match="give a release"):
        install(EngineSpec.parse("reference"), tmp_path)


# --- the worker on a fake engine tree (subprocess) -----------------------------------------
@pytest.mark.e2e
def test_engine_function_that_raises_fails_its_case_and_the_run_goes_on(tmp_path):
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.measure import plan_cases

    cases = plan_cases(workloads=["multi_region", "many_small_images"], encode=["batched"])
    out = tmp_path / "r.jsonl"
    spec = EngineSpec.parse(None, src=str(FAKE))
    recs = measure_cases(cases, spec, repeat=1, python=sys.executable, json_path=out)
    assert [json.loads(x)["workload"] for x in out.read_text().splitlines()] == ["multi_region", "many_small_images"]
    bad, good = recs
    assert bad.error == "RuntimeError: fake engine: items with several offsets are not supported"
    assert bad.tok_per_s is None and bad.accuracy < 1.0  # its multi-offset requests failed
    assert good.error is None and good.accuracy == 1.0 and good.tok_per_s > 0
    assert good.engine == spec.label and good.engine_version == "0.0.0+fake"
    # Its names give no scatter guess ("unknown"); what it did gives one: a mask assignment.
    assert good.engine_seams["scatter"] == "index_put" and good.engine_seams["shm"] == "none"
    assert "scatter_by_name" not in good.engine_seams and "disagreements" not in good.engine_seams
    assert good.encoder_calls > 0 and good.syncs is not None


@pytest.mark.e2e
def test_tree_without_the_embedding_path_names_what_is_missing(tmp_path):
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.measure import plan_cases

    tree = tmp_path / "src"
    shutil.copytree(FAKE, tree)
    mm = tree / "sglang" / "srt" / "managers" / "mm_utils.py"
    mm.write_text(mm.read_text().replace("def embed_mm_inputs(", "def renamed_embed_mm_inputs("))
    cases = plan_cases(workloads=["many_small_images", "mixed"], encode=["batched"])
    recs = measure_cases(cases, EngineSpec.parse(None, src=str(tree)), repeat=1, python=sys.executable)
    assert len(recs) == 2
    for r in recs:
        assert "lacks mm_utils.embed_mm_inputs" in r.error and "cannot be measured" in r.error
        assert r.accuracy is None and r.tok_per_s is None


@pytest.mark.e2e
def test_cli_measure_engine_src_writes_engine_fields(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = subprocess.run([sys.executable, "-m", "vlmpath.cli", "measure", "--engine-src", str(FAKE),
                           "--engine-python", sys.executable, "--workload", "few_large_images",
                           "--repeat", "1", "--no-syncs", "--json", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert rec["engine"].startswith("sglang@src:") and rec["accuracy"] == 1.0 and rec["syncs"] is None
    assert "sglang@src:" in proc.stdout


@pytest.mark.e2e
def test_planted_misplacement_through_the_adapter_lowers_accuracy(monkeypatch):
    """The accuracy the adapter reports is not blind: rows handed to the engine reversed
    (``VLMPATH_ENGINE_FAULT=WORKLOAD:flip``) are misplaced; the unplanted case stays 1.0."""
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.measure import plan_cases

    monkeypatch.setenv("VLMPATH_ENGINE_FAULT", "many_small_images:flip")
    cases = plan_cases(workloads=["many_small_images", "few_large_images"], pipelines=["default"])
    flipped, plain = measure_cases(cases, EngineSpec.parse(None, src=str(FAKE)), repeat=1, count=False,
                                   python=sys.executable)
    assert flipped.error is None and flipped.accuracy < 1.0
    assert plain.error is None and plain.accuracy == 1.0
