"""The asv suite itself: its config, ``asv check``, and a real ``asv run`` + ``asv publish``.

asv reads ``~/.asv-machine.json``, so every asv call here runs with HOME in a tmp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.runner import run as runmod
from vlmpath.compare.asv_results import load_asv

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "vlmpath-test"


def _env(home: Path) -> dict:
    # VLMPATH_SERVE_MODEL empty: the opt-in serve benchmarks stay skipped even on a machine that sets it.
    return dict(os.environ, HOME=str(home), ASV_PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1",
                VLMPATH_SERVE_MODEL="")


def _config(tmp: Path) -> Path:
    conf = runmod.load_config(ROOT / "asv.conf.json")
    return runmod.write_config(conf, ROOT, tmp / "results", tmp / "html", tmp / "asv.conf.json")


def _asv(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asv", *args], env=_env(home), cwd=ROOT,
                          check=False, capture_output=True, text=True, timeout=timeout)


def test_config_keys():
    conf = runmod.load_config(ROOT / "asv.conf.json")
    assert conf["repo"] == "." and conf["benchmark_dir"] == "benchmarks"
    assert conf["results_dir"] == ".asv/results" and conf["html_dir"] == ".asv/html"
    assert conf["launch_method"] == "spawn"  # never forkserver by default (CUDA)
    assert conf["environment_type"] == "existing"
    assert ".asv/" in (ROOT / ".gitignore").read_text().split()


@pytest.mark.e2e
def test_asv_check_passes(tmp_path):
    proc = _asv("check", "-E", f"existing:{sys.executable}", "--config", str(_config(tmp_path)), home=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "No problems found" in proc.stdout


@pytest.mark.e2e
def test_real_asv_run_records_units_samples_and_publishes(tmp_path):
    cfg = _config(tmp_path)
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert _asv("machine", "--yes", "--machine", MACHINE, "--config", str(cfg), home=tmp_path).returncode == 0
    regex = (r"bench_inject\.Count\.(time_count|track_syncs)\('\w+', 'many_small_images'\)"
             r"|bench_embed\.EmbedRoutine\.track_(syncs|accuracy|peak_bytes|reserved_bytes)\('legacy', 'video'\)"
             r"|bench_serve\.Serve\.track_serve_errors")  # opt-in, no model here: skipped
    proc = _asv("run", "--config", str(cfg), "-E", f"existing:{sys.executable}", "--set-commit-hash", sha,
                "--machine", MACHINE, "--record-samples", "--show-stderr", "--launch-method", "forkserver",
                "-b", regex, home=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]

    meta = json.loads((tmp_path / "results" / "benchmarks.json").read_text())
    assert meta["bench_inject.Count.track_syncs"]["unit"] == "syncs"
    assert meta["bench_embed.EmbedRoutine.track_accuracy"]["unit"] == "fraction"
    assert meta["bench_embed.EmbedRoutine.track_tok_per_s"]["unit"] == "tok/s"
    assert meta["bench_inject.Count.time_count"]["unit"] == "seconds"

    (mrun,) = load_asv(tmp_path / "results", sha).machines
    got = {(m.benchmark, tuple(v for _, v in m.params)): m for m in mrun.metrics if m.ok}
    assert got[("bench_inject.Count.track_syncs", ("mask_sum", "many_small_images"))].value == 1.0
    assert got[("bench_inject.Count.track_syncs", ("offsets", "many_small_images"))].value == 0.0
    assert got[("bench_embed.EmbedRoutine.track_syncs", ("legacy", "video"))].value >= 2
    assert got[("bench_embed.EmbedRoutine.track_accuracy", ("legacy", "video"))].value == 1.0
    # peak memory: measured on CPU (live tensor bytes); reserved has no CPU counter: skipped, not 0
    assert meta["bench_embed.EmbedRoutine.track_peak_bytes"]["unit"] == "bytes"
    assert got[("bench_embed.EmbedRoutine.track_peak_bytes", ("legacy", "video"))].value > 0
    reserved = next(m for m in mrun.metrics if m.benchmark == "bench_embed.EmbedRoutine.track_reserved_bytes"
                    and dict(m.params) == {"pipeline": "legacy", "preset": "video"})
    assert reserved.skipped and reserved.value is None
    for strategy in ("mask_sum", "offsets"):
        timing = got[("bench_inject.Count.time_count", (strategy, "many_small_images"))]
        assert len(timing.samples) >= 7, "asv's Mann-Whitney test needs >= 7 samples per side"
        assert timing.value > 0
    assert len(got) == 7  # exactly the selection (reserved skipped); unselected combinations are skipped
    serve = [m for m in mrun.metrics if m.benchmark == "bench_serve.Serve.track_serve_errors"]
    assert len(serve) == 6 and all(m.skipped and m.error is None for m in serve)  # skipped, never failed

    pub = _asv("publish", "--config", str(cfg), home=tmp_path)
    assert pub.returncode == 0, pub.stdout[-3000:] + pub.stderr[-2000:]
    assert (tmp_path / "html" / "index.html").is_file()
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    assert {"bench_inject.Count.time_count", "bench_embed.EmbedRoutine.track_syncs"} <= set(index["benchmarks"])
    assert MACHINE in index["params"]["machine"]


# --- why a benchmark failed (benchmarks/_common.report_failures) ---------------------------------
SPLIT_ERROR = ("RuntimeError: split_with_sizes expects split_sizes to sum exactly to 256 (input tensor's size "
               "at dimension 0), but got split_sizes=[128, 64]")


@pytest.fixture
def suite(monkeypatch):
    """The benchmark package, importable as asv imports it (``benchmarks.<module>``)."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("VLMPATH_FAILURES_FILE", raising=False)
    from benchmarks import _common

    return _common


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_failing_benchmark_and_setup_append_one_line_each_then_raise(suite, tmp_path, monkeypatch):
    log = tmp_path / "failures.jsonl"

    @suite.report_failures
    class Fake:
        params = (["a", "b"], [1, 64])
        param_names = ("strategy", "size")

        def setup(self, strategy, size):
            if size == 64:
                raise ValueError(f"no room for {size}\nsecond line")

        def time_x(self, strategy, size):
            raise RuntimeError("boom")

        def track_y(self, strategy, size):
            raise NotImplementedError("skipped, not failed")

        track_y.unit = "calls"

    monkeypatch.setenv("VLMPATH_FAILURES_FILE", str(log))
    f = Fake()
    f.setup("a", 1)
    with pytest.raises(RuntimeError, match="boom"):
        f.time_x("a", 1)
    with pytest.raises(NotImplementedError):
        f.track_y("b", 1)
    with pytest.raises(ValueError, match="no room"):
        f.setup("b", 64)
    assert _lines(log) == [
        {"benchmark": "Fake.time_x", "params": {"strategy": "a", "size": 1}, "param_names": ["strategy", "size"], "error": "RuntimeError: boom"},
        # setup fails every benchmark of the class; a skip (NotImplementedError) is no failure
        {"benchmark": "Fake.time_x", "params": {"strategy": "b", "size": 64}, "param_names": ["strategy", "size"], "error": "ValueError: no room for 64"},
        {"benchmark": "Fake.track_y", "params": {"strategy": "b", "size": 64}, "param_names": ["strategy", "size"], "error": "ValueError: no room for 64"},
    ]
    assert Fake.track_y.unit == "calls" and Fake.time_x.__name__ == "time_x"  # asv reads these
    monkeypatch.delenv("VLMPATH_FAILURES_FILE")
    with pytest.raises(RuntimeError, match="boom"):  # without the variable: raises as before, writes nothing
        f.time_x("a", 1)
    assert len(_lines(log)) == 3


def test_failed_case_reports_its_own_error_under_the_asv_name(suite, tmp_path, monkeypatch):
    """The real EmbedRoutine on a case memoised as failed (the #25910 replay's record)."""
    from asv_runner.benchmarks._base import get_source_code

    from benchmarks.bench_embed import EmbedRoutine
    from vlmpath.suite import cases

    monkeypatch.chdir(tmp_path)  # case_summary's memo directory (asv's setup_cache dir)
    case = cases.RoutineCase("embed", "default", "multi_region")
    memo = {"tok_per_s": None, "accuracy": 0.6, "encoder_calls": 3, "syncs": 0, "wall_s": 0.1, "samples": [],
            "error": SPLIT_ERROR}
    Path(suite._memo_path(case, "tiny")).write_text(json.dumps(memo))
    log = tmp_path / "failures.jsonl"
    monkeypatch.setenv("VLMPATH_FAILURES_FILE", str(log))
    cache = {"scale": "tiny", "quick": True}
    bench = EmbedRoutine()
    bench.setup(cache, "default", "multi_region")
    assert bench.track_accuracy(cache, "default", "multi_region") == 0.6  # reported, not a failure
    with pytest.raises(RuntimeError, match="case failed, no tok_per_s: RuntimeError: split_with_sizes"):
        bench.track_tok_per_s(cache, "default", "multi_region")
    assert _lines(log) == [{"benchmark": "bench_embed.EmbedRoutine.track_tok_per_s",
                            "params": {"pipeline": "default", "preset": "multi_region"},
                            "param_names": ["pipeline", "preset"], "error": SPLIT_ERROR}]
    # The wrapper is invisible to asv's code hash: benchmark versions (history) are unchanged.
    code = get_source_code([bench.track_tok_per_s])
    assert "def track_tok_per_s" in code and "report_failures" not in code and "wrapper" not in code


def _append_many(path: str, worker: int) -> None:
    import benchmarks._common as common

    for i in range(200):
        common.record_failure(f"b.B.time_{worker}", {"i": i}, "E: " + "x" * 400, env={"VLMPATH_FAILURES_FILE": path})


def test_concurrent_appends_stay_whole_lines(suite, tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    log = tmp_path / "failures.jsonl"
    procs = [ctx.Process(target=_append_many, args=(str(log), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    lines = _lines(log)  # every line parses: no interleaved writes
    assert len(lines) == 800 and {x["benchmark"] for x in lines} == {f"b.B.time_{w}" for w in range(4)}


def test_failure_line_is_small_and_plain(suite):
    line = suite.failure_line("b.B.time_x", {"size": 64, "obj": object()}, "E: " + "é\n" * 5000)
    assert len(line) <= 3500 and line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert data["params"]["size"] == 64 and data["params"]["obj"].startswith("<object")
    assert suite.error_text(ValueError("")) == "ValueError"
    assert suite.error_text(KeyError("k")) == "KeyError: 'k'"
    assert not suite.record_failure("b.B.time_x", {}, "E: x", env={})  # no variable: nothing to write


@pytest.mark.parametrize("command,imports", [("discover", False), ("setup_cache", False),
                                             ("run_server", True), ("run", True)])
def test_only_processes_that_build_a_tower_import_it(suite, monkeypatch, command, imports):
    # The tower's module made unimportable: an import of it raises, a skipped one does not.
    monkeypatch.setitem(sys.modules, "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl", None)
    monkeypatch.setattr(sys, "argv", ["asv_runner", command, "benchmarks"])
    if imports:
        with pytest.raises(ImportError):
            suite.preimport_tower()
    else:
        suite.preimport_tower()
