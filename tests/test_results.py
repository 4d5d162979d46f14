"""Reading asv results dirs and pytest-benchmark JSON into Metric records."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from asv.results import Results
from asv_fixtures import fingerprint, sha, write_asv_run

from vlmpath.compare.asv_results import existing_commits, load_asv
from vlmpath.compare.pytest_results import load_pytest_benchmark
from vlmpath.compare.records import NO_RESULT_ERROR, Fingerprint, RunResults, merge_runs
from vlmpath.core.atomic import write_text as write_text_atomic
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import failures_path, read_failures

BASE, HEAD = sha("base"), sha("head")
EMBED = "bench_embed.Embed.track_tok_per_s"
ENCODE = "bench_encode.Encode.time_encode"
ACC = "bench_encode.Encode.track_accuracy"


def _suite(tok=(100.0, 200.0, None, float("nan")), acc=1.0, enc_samples=(0.010, 0.011, 0.009, 0.0105, 0.0102, 0.0099)):
    return {
        EMBED: ("tok/s", ["pipeline", "workload"], [["fused", "naive"], ["single", "multi_region"]], list(tok), None),
        ENCODE: ("seconds", [], [], [0.0], [list(enc_samples)]),
        ACC: ("fraction", [], [], [acc], None),
    }


def test_fixture_output_loads_with_asvs_own_loader(tmp_path):
    path = write_asv_run(tmp_path, "cpu-test", BASE, _suite())
    res = Results.load(str(path), machine_name="cpu-test")
    assert res.commit_hash == BASE
    params = res.get_result_params(EMBED)
    assert params == [["'fused'", "'naive'"], ["'single'", "'multi_region'"]]
    vals = res.get_result_value(EMBED, params)
    assert vals[:3] == [100.0, 200.0, None] and math.isnan(vals[3])
    samples = res.get_result_samples(ENCODE, [])
    assert samples == [[0.010, 0.011, 0.009, 0.0105, 0.0102, 0.0099]]
    stats = res.get_result_stats(ENCODE, [])[0]
    assert stats["repeat"] == 6 and stats["ci_99_a"] < stats["ci_99_b"]
    # asv stores the median of the samples as the result.
    assert res.get_result_value(ENCODE, [])[0] == pytest.approx(0.01010)


def test_load_asv_reads_values_params_units_failures_and_skips(tmp_path):
    write_asv_run(tmp_path, "cpu-test", BASE, _suite(), fingerprint("cpu"))
    run = load_asv(tmp_path, BASE)
    assert run.commit == BASE and run.machine_names == ("cpu-test",)
    by = {(m.benchmark, m.params): m for m in run.metrics()}
    ok = by[(EMBED, (("pipeline", "fused"), ("workload", "multi_region")))]
    assert ok.value == 200.0 and ok.unit == "tok/s" and ok.ok
    failed = by[(EMBED, (("pipeline", "naive"), ("workload", "single")))]
    assert failed.value is None and failed.error and not failed.skipped
    skipped = by[(EMBED, (("pipeline", "naive"), ("workload", "multi_region")))]
    assert skipped.skipped and skipped.value is None and skipped.error is None
    enc = by[(ENCODE, ())]
    assert enc.unit == "seconds" and len(enc.samples) == 6 and enc.ci_99 is not None
    assert enc.ci_99[0] < enc.value < enc.ci_99[1]
    assert by[(ACC, ())].unit == "fraction"
    mrun = run.machine("cpu-test")
    assert mrun.partial  # one failed case
    assert mrun.fingerprint == Fingerprint.from_dict(fingerprint("cpu"))
    assert mrun.backend == "cpu"


def test_unit_inferred_from_name_when_benchmarks_json_lacks_it(tmp_path):
    write_asv_run(tmp_path, "cpu-test", BASE, {"b.Hash.peakmem_receive": ("bytes", [], [], [1e6], None),
                                               "b.Hash.track_other": ("ratio", [], [], [1.0], None)},
                  update_benchmarks_json=False)
    units = {m.benchmark: m.unit for m in load_asv(tmp_path, BASE).metrics()}
    assert units == {"b.Hash.peakmem_receive": "bytes", "b.Hash.track_other": "unknown"}


def test_commit_prefix_unknown_commit_and_bad_sha(tmp_path):
    write_asv_run(tmp_path, "cpu-test", BASE, _suite())
    write_asv_run(tmp_path, "cpu-test", HEAD, _suite())
    assert load_asv(tmp_path, BASE[:7]).commit == BASE
    assert load_asv(tmp_path, HEAD[:12].upper()).commit == HEAD
    with pytest.raises(VlmpathError) as e:
        load_asv(tmp_path, "deadbeef")
    msg = str(e.value)
    assert "deadbeef" in msg and BASE[:8] in msg and HEAD[:8] in msg
    with pytest.raises(VlmpathError, match="7 digits"):
        load_asv(tmp_path, "abc")
    with pytest.raises(VlmpathError, match="does not exist"):
        load_asv(tmp_path / "nope", BASE)


def test_ambiguous_prefix_is_an_error(tmp_path):
    a, b = "abcdef1" + "0" * 33, "abcdef1" + "1" * 33
    write_asv_run(tmp_path, "m1", a, _suite())
    write_asv_run(tmp_path, "m2", b, _suite())
    with pytest.raises(VlmpathError, match="ambiguous"):
        load_asv(tmp_path, "abcdef1")
    assert load_asv(tmp_path, a).machine_names == ("m1",)


@pytest.mark.parametrize("content", ['{"commit_hash": "abc', '{"version": 2, "results": {}}', "[1, 2]"])
def test_corrupted_results_file_names_the_file(tmp_path, content):
    path = write_asv_run(tmp_path, "cpu-test", BASE, _suite())
    path.write_text(content)
    with pytest.raises(VlmpathError) as e:
        load_asv(tmp_path, BASE)
    assert str(path) in str(e.value) and "delete it or re-run" in str(e.value)


def test_corrupted_benchmarks_json_and_fingerprint(tmp_path):
    write_asv_run(tmp_path, "cpu-test", BASE, _suite(), fingerprint("cpu"))
    fp = tmp_path / "cpu-test" / f"vlmpath-fingerprint-{BASE[:8]}.json"
    fp.write_text("{nope")
    # A corrupt fingerprint costs only the toolchain check: a warning names the file.
    run = load_asv(tmp_path, BASE).machine("cpu-test")
    assert run.fingerprint is None and run.metrics
    assert any(n.startswith("fingerprint not shown: corrupted") and str(fp) in n for n in run.notes)
    fp.unlink()
    (tmp_path / "benchmarks.json").write_text("")
    with pytest.raises(VlmpathError, match="benchmarks.json"):
        load_asv(tmp_path, BASE)


def test_partial_run_keeps_what_it_has_and_names_what_is_missing(tmp_path):
    write_asv_run(tmp_path, "cpu-test", BASE, _suite())
    # The head run only got through one benchmark; benchmarks.json still lists all three.
    write_asv_run(tmp_path, "cpu-test", HEAD, {ACC: _suite()[ACC]}, update_benchmarks_json=False)
    run = load_asv(tmp_path, HEAD).machine("cpu-test")
    assert [m.benchmark for m in run.metrics] == [ACC]
    assert run.missing == (EMBED, ENCODE) and run.partial


def test_machine_without_the_commit_is_noted(tmp_path):
    write_asv_run(tmp_path, "cpu-a", BASE, _suite())
    write_asv_run(tmp_path, "cuda-h200", BASE, _suite())
    write_asv_run(tmp_path, "cpu-a", HEAD, _suite())
    head = load_asv(tmp_path, HEAD)
    assert head.machine_names == ("cpu-a",)
    assert any("cuda-h200" in n for n in head.notes)
    assert existing_commits(tmp_path) == {BASE[:8]: ("cpu-a", "cuda-h200"), HEAD[:8]: ("cpu-a",)}


def test_two_env_files_for_one_commit_are_merged(tmp_path):
    write_asv_run(tmp_path, "cpu-test", BASE, {ACC: _suite()[ACC]}, env_name="existing-py_a")
    write_asv_run(tmp_path, "cpu-test", BASE, {ENCODE: _suite()[ENCODE]}, env_name="existing-py_b")
    run = load_asv(tmp_path, BASE).machine("cpu-test")
    assert {m.benchmark for m in run.metrics} == {ACC, ENCODE}
    assert any("2 environment files" in n for n in run.notes)


SPLIT = "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 256"
NAIVE_SINGLE = (("pipeline", "naive"), ("workload", "single"))


def _failed(tmp_path, failures: str | None):
    """The failed EMBED case of ``_suite()`` (and its metrics), with a failures file."""
    write_asv_run(tmp_path, "cpu-test", BASE, {**_suite(), "b.Hash.time_x": ("seconds", ["size"], [[1, 64]],
                                                                            [None, None], None)})
    if failures is not None:
        failures_path(tmp_path / "cpu-test", BASE).write_text(failures)
    mrun = load_asv(tmp_path, BASE).machine("cpu-test")
    return {(m.benchmark, m.params): m for m in mrun.metrics}, mrun


def test_failure_messages_are_attached_to_the_matching_failed_cases(tmp_path):
    entries = [{"benchmark": EMBED, "params": {"pipeline": "naive", "workload": "single"}, "error": SPLIT},
               {"benchmark": EMBED, "params": {"pipeline": "fused", "workload": "single"}, "error": "not failed"},
               {"benchmark": "b.Hash.time_x", "params": {"size": 64}, "error": "MemoryError: 64 MiB"}]
    by, mrun = _failed(tmp_path, json.dumps(entries))
    assert by[(EMBED, NAIVE_SINGLE)].error == SPLIT and by[(EMBED, NAIVE_SINGLE)].message == SPLIT
    assert by[("b.Hash.time_x", (("size", "64"),))].error == "MemoryError: 64 MiB"  # int param as asv shows it
    unexplained = by[("b.Hash.time_x", (("size", "1"),))]
    assert unexplained.error == NO_RESULT_ERROR and unexplained.message is None
    ok = by[(EMBED, (("pipeline", "fused"), ("workload", "single")))]
    assert ok.ok and ok.error is None  # a message never turns a value into a failure
    assert by[(EMBED, (("pipeline", "naive"), ("workload", "multi_region")))].error is None  # skipped
    assert mrun.notes == ()
    assert existing_commits(tmp_path) == {BASE[:8]: ("cpu-test",)}  # not mistaken for a run file


def test_missing_failures_file_keeps_the_generic_marker(tmp_path):
    by, mrun = _failed(tmp_path, None)
    assert by[(EMBED, NAIVE_SINGLE)].error == NO_RESULT_ERROR and mrun.notes == ()


@pytest.mark.parametrize("content,why", [("[{\"benchmark\": ", "Expecting"), ('{"a": 1}', "not a JSON list"),
                                         ('[{"benchmark": 1, "error": "x"}]', "expected {benchmark")])
def test_corrupt_failures_file_is_a_note_not_a_crash(tmp_path, content, why):
    by, mrun = _failed(tmp_path, content)
    assert by[(EMBED, NAIVE_SINGLE)].error == NO_RESULT_ERROR
    (note,) = mrun.notes
    path = failures_path(tmp_path / "cpu-test", BASE)
    assert note.startswith("failure messages not shown: corrupted failures file") and str(path) in note
    assert why in note
    with pytest.raises(VlmpathError, match="delete it or re-run"):
        read_failures(path)


def test_run_results_json_round_trip(tmp_path):
    write_asv_run(tmp_path, "rocm-mi300x", BASE, _suite(), fingerprint("rocm"))
    run = load_asv(tmp_path, BASE)
    again = RunResults.from_dict(json.loads(run.to_json()))
    assert again == run
    with pytest.raises(VlmpathError, match="schema_version"):
        RunResults.from_dict({**run.to_dict(), "schema_version": 99})


def test_write_text_atomic_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "out" / "report.md"
    write_text_atomic(target, "one")
    write_text_atomic(target, "two")
    assert target.read_text() == "two"
    assert sorted(os.listdir(target.parent)) == ["report.md"]


# --- pytest-benchmark ----------------------------------------------------------------------

_BENCH_FILE = textwrap.dedent("""
    import pytest

    @pytest.mark.parametrize("pipeline", ["fused", "naive"])
    def test_embed(benchmark, pipeline):
        benchmark.extra_info["tok_per_s"] = 1000.0 if pipeline == "fused" else 500.0
        benchmark.extra_info["accuracy"] = 1.0
        benchmark.extra_info["syncs"] = 0
        benchmark.extra_info["note"] = "not a metric"
        benchmark.extra_info["flag"] = True
        benchmark.pedantic(sum, args=(range(100),), rounds=7, iterations=1)
""")
_CONFTEST = textwrap.dedent("""
    def pytest_benchmark_update_machine_info(config, machine_info):
        machine_info["vlmpath_machine"] = "cpu-pbtest"
        machine_info["vlmpath_fingerprint"] = {"backend": "cpu", "torch": "2.7.1"}
""")


@pytest.fixture(scope="module")
def pytest_benchmark_json(tmp_path_factory) -> Path:
    """One real pytest-benchmark run (subprocess) writing --benchmark-json."""
    d = tmp_path_factory.mktemp("pb")
    (d / "test_tiny_bench.py").write_text(_BENCH_FILE)
    (d / "conftest.py").write_text(_CONFTEST)
    (d / "pytest.ini").write_text("[pytest]\n")
    out = d / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(d / "pytest.ini"),
         "--rootdir", str(d), f"--benchmark-json={out}", str(d / "test_tiny_bench.py")],
        cwd=d, capture_output=True, text=True, timeout=120,
        # Under pytest-xdist the worker's variables would make the inner pytest-benchmark
        # think it is an xdist worker too, and it turns itself off (no JSON).
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_load_pytest_benchmark_reads_time_and_extra_info(pytest_benchmark_json):
    run = load_pytest_benchmark(pytest_benchmark_json)
    assert run.source == "pytest-benchmark" and run.machine_names == ("cpu-pbtest",)
    mrun = run.machine("cpu-pbtest")
    assert mrun.fingerprint is not None and mrun.fingerprint.torch == "2.7.1"
    by = {(m.benchmark.rsplit("::", 1)[-1], m.params): m for m in mrun.metrics}
    fused = (("pipeline", "fused"),)
    t = by[("test_embed", fused)]
    assert t.unit == "seconds" and len(t.samples) == 7 and t.value == sorted(t.samples)[3]
    assert by[("test_embed.tok_per_s", fused)].value == 1000.0
    assert by[("test_embed.tok_per_s", fused)].unit == "tok/s"
    assert by[("test_embed.accuracy", fused)].unit == "fraction"
    assert by[("test_embed.syncs", fused)].unit == "syncs"
    assert by[("test_embed.tok_per_s", (("pipeline", "naive"),))].value == 500.0
    # Non-numeric and bool extra_info entries are not metrics.
    assert not any(k[0].endswith((".note", ".flag")) for k in by)
    assert len(mrun.metrics) == 2 * 4


def test_pytest_benchmark_machine_falls_back_to_node(pytest_benchmark_json, tmp_path):
    data = json.loads(pytest_benchmark_json.read_text())
    del data["machine_info"]["vlmpath_machine"]
    data["commit_info"] = {"id": HEAD}
    p = tmp_path / "b.json"
    p.write_text(json.dumps(data))
    run = load_pytest_benchmark(p)
    assert run.machine_names == (data["machine_info"]["node"],) and run.commit == HEAD


def test_pytest_benchmark_bad_input(tmp_path):
    with pytest.raises(VlmpathError, match="does not exist"):
        load_pytest_benchmark(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(VlmpathError, match="delete it or re-run"):
        load_pytest_benchmark(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"machine_info": {}}')
    with pytest.raises(VlmpathError, match="not pytest-benchmark JSON"):
        load_pytest_benchmark(tmp_path / "y.json")


def test_merge_runs_combines_sources_per_machine(tmp_path, pytest_benchmark_json):
    write_asv_run(tmp_path, "cpu-pbtest", BASE, _suite())
    merged = merge_runs(load_asv(tmp_path, BASE), load_pytest_benchmark(pytest_benchmark_json))
    m = merged.machine("cpu-pbtest")
    assert {x.source for x in m.metrics} == {"asv", "pytest-benchmark"}
    assert merged.commit == BASE


# --- against a real asv run ------------------------------------------------------------------

_ASV_BENCH = textwrap.dedent("""
    class Embed:
        params = (["fused", "naive"], [1, 2])
        param_names = ["pipeline", "workload"]
        unit = "tok/s"

        def track_tok_per_s(self, pipeline, workload):
            return 100.0 * workload

        def track_broken(self, pipeline, workload):
            if pipeline == "naive":
                raise RuntimeError("boom")
            return 1.0
        track_broken.unit = "syncs"

        def time_noop(self, pipeline, workload):
            pass
""")


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("git") is None, reason="asv needs git")
def test_real_asv_run_loads_like_the_fixture(tmp_path):
    """Run asv itself on a tiny suite, then check our reader and our fixture agree with it."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_embed.py").write_text(_ASV_BENCH)
    (tmp_path / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "t", "repo": ".", "environment_type": "existing",
        "benchmark_dir": "benchmarks", "results_dir": "results", "env_dir": "env", "html_dir": "html"}))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path)}
    for cmd in (["git", "init", "-q", "."], ["git", "add", "-A"], ["git", "commit", "-qm", "x"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, env=env)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, check=True, env=env,
                            capture_output=True, text=True).stdout.strip()
    asv = [sys.executable, "-m", "asv"]
    subprocess.run(asv + ["machine", "--yes", "--machine", "cpu-real"], cwd=tmp_path, check=True,
                   env=env, capture_output=True)
    proc = subprocess.run(asv + ["run", "-E", f"existing:{sys.executable}", "--set-commit-hash", commit,
                                 "--machine", "cpu-real", "--record-samples", "--quick"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    run = load_asv(tmp_path / "results", commit[:7])
    by = {(m.benchmark, m.params): m for m in run.metrics()}
    assert len(by) == 12, proc.stdout + proc.stderr
    tok = by[("bench_embed.Embed.track_tok_per_s", (("pipeline", "naive"), ("workload", "2")))]
    assert tok.value == 200.0 and tok.unit == "tok/s"
    broken = by[("bench_embed.Embed.track_broken", (("pipeline", "naive"), ("workload", "1")))]
    assert broken.error and broken.unit == "syncs"
    noop = by[("bench_embed.Embed.time_noop", (("pipeline", "fused"), ("workload", "1")))]
    assert noop.unit == "seconds" and noop.value > 0 and len(noop.samples) >= 1

    # The fixture writes the same layout: same columns, same parameter encoding.
    real_file = next((tmp_path / "results" / "cpu-real").glob(f"{commit[:8]}-*.json"))
    real = json.loads(real_file.read_text())
    fake_file = write_asv_run(tmp_path / "fake", "cpu-real", commit, {
        "bench_embed.Embed.track_tok_per_s": ("tok/s", ["pipeline", "workload"], [["fused", "naive"], [1, 2]],
                                             [100.0, 200.0, 100.0, 200.0], None)})
    fake = json.loads(fake_file.read_text())
    assert fake["result_columns"] == real["result_columns"]
    assert set(fake) == set(real)
    name = "bench_embed.Embed.track_tok_per_s"
    assert fake["results"][name][:2] == real["results"][name][:2]
    real_meta = json.loads((tmp_path / "results" / "benchmarks.json").read_text())[name]
    fake_meta = json.loads((tmp_path / "fake" / "benchmarks.json").read_text())[name]
    for key in ("param_names", "params", "type", "unit", "name"):
        assert fake_meta[key] == real_meta[key], key


# --- a row's meaning is the metric table's (issue 27) -------------------------------------------
def test_the_reader_takes_units_from_the_table_and_marks_a_claim_that_disagrees(tmp_path):
    acc, hashed, odd = ("bench_embed.EmbedRoutine.track_accuracy", "bench_embed.EmbedRoutine.track_hash_s",
                        "bench_x.X.track_mystery")
    write_asv_run(tmp_path, "cpu-a", BASE, {acc: ("seconds", [], [], [1.0], None),
                                            hashed: ("seconds", [], [], [1e-5], None),
                                            odd: ("tok/s", [], [], [3.0], None),
                                            "bench_hash.Receive.time_receive": ("seconds", [], [], [0.1], None)})
    by = {m.benchmark: m for m in load_asv(tmp_path, BASE).metrics()}
    assert (by[acc].unit, "'seconds'" in by[acc].untrusted) == ("fraction", True)  # the table's unit, the lie named
    assert by[hashed].untrusted is None and by["bench_hash.Receive.time_receive"].untrusted is None
    assert by[odd].unit == "tok/s" and "'track_mystery'" in by[odd].untrusted
    long_lie = "x" * 5000 + "\n::error::"
    write_asv_run(tmp_path, "cpu-a", BASE, {acc: (long_lie, [], [], [1.0], None)})
    why = next(m for m in load_asv(tmp_path, BASE).metrics() if m.benchmark == acc).untrusted
    assert len(why) < 200 and "\n" not in why  # the claim is quoted, clipped


def test_every_hand_written_track_in_benchmarks_has_a_trusted_meaning():
    import re

    from vlmpath.core.metrics import metric_for_method
    from vlmpath.selfcheck.ir_cases import UNITS

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    methods = {m for p in root.glob("*.py") for m in re.findall(r"def ((?:track|time|peakmem|mem)_\w+)", p.read_text())}
    assert methods and all(metric_for_method(f"x.Y.{m}") is not None for m in methods), methods
    assert all(metric_for_method(b).unit == u for b, u in UNITS.items())  # the counted rows, too


def test_the_run_info_file_says_whether_a_run_was_quick(tmp_path):
    from vlmpath.compare.results_store import run_info_path
    from vlmpath.runner.run_files import RunInfo, write_run_info

    write_asv_run(tmp_path, "cpu-a", BASE, {"bench_embed.Embed.time_x": ("seconds", [], [], [1.0], None)})
    assert load_asv(tmp_path, BASE).machines[0].quick is None  # no file: unknown
    write_run_info(tmp_path, "cpu-a", BASE, RunInfo(quick=True, scale="tiny", bench=None, trusted=False))
    assert load_asv(tmp_path, BASE).machines[0].quick is True
    run_info_path(tmp_path, "cpu-a", BASE).write_text('{"quick": "yes"}')
    assert load_asv(tmp_path, BASE).machines[0].quick is None  # not a boolean: not read as one
    run_info_path(tmp_path, "cpu-a", BASE).write_text("[" * 100_000)
    assert load_asv(tmp_path, BASE).machines[0].quick is None  # unreadable: never a crash
