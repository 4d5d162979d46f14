"""Does ``vlmpath engine sweep`` pick the right releases, put them in date order, resume without
measuring a release twice, record a release it cannot drive as one failure point, and file
every release as one dated commit of one asv store (issue 28, point 5)?

All on fakes: a made-up package index, ``prepare``/``measure`` functions standing in for the
install and the adapter's measurement, no network, no engine env. The one e2e test sweeps two
"releases" of the fixture engine tree (``tests/fixtures/fake_engine``) through the real
worker and ``asv publish``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import read_failures
from vlmpath.engines import env_recipe
from vlmpath.engines.base import EngineSpec
from vlmpath.engines.env_disk import disk_bytes
from vlmpath.engines.releases import Release, parse_index, parse_selection, select
from vlmpath.render.report_figure import figure_marks, figure_notes
from vlmpath.render.sweep_chart import draw_sweep
from vlmpath.runner.sweep_asv import machine_name, release_history, write_asv
from vlmpath.suite import sweep
from vlmpath.suite.record import CaseRecord

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "fixtures" / "fake_engine"
T0 = datetime(2026, 5, 1, tzinfo=timezone.utc)


# --- which releases, in which order ---------------------------------------------------------
def test_range_keeps_final_releases_inside_it_in_date_order():
    days = {"0.5.10": 0, "0.5.11": 5, "0.5.12rc1": 8, "0.5.12": 10, "0.5.12.post1": 12, "0.5.13": 20, "0.5.14": 30}
    index = {v: T0 + timedelta(days=d) for v, d in days.items()}
    got = select("sglang", parse_selection("0.5.11..0.5.13"), index)
    assert [r.version for r in got] == ["0.5.11", "0.5.12", "0.5.13"]  # no rc, no post, 0.5.10/14 outside


def test_releases_are_ordered_by_upload_date_not_by_version():
    # a backport (0.4.9 out after 0.5.0) is drawn where it happened on the time axis
    index = {"0.4.9": T0 + timedelta(days=40), "0.5.0": T0 + timedelta(days=10), "0.5.1": T0 + timedelta(days=50)}
    got = select("vllm", parse_selection("0.4.9,0.5.0,0.5.1"), index)
    assert [r.version for r in got] == ["0.5.0", "0.4.9", "0.5.1"]
    assert [r.date_ms for r in got] == sorted(r.date_ms for r in got)


def test_numeric_not_text_order_in_a_range():
    index = {"0.5.9": T0, "0.5.10": T0 + timedelta(days=1), "0.5.2": T0 - timedelta(days=9)}
    assert [r.version for r in select("sglang", parse_selection("0.5.3..0.5.10"), index)] == ["0.5.9", "0.5.10"]


@pytest.mark.parametrize("text", ["0.5.23..0.5.11", "latest", "0.5.x..0.6", "", "0.5.1,,foo"])
def test_bad_selection_is_one_clear_error(text):
    with pytest.raises(VlmpathError, match="engine sweep"):
        parse_selection(text)


def test_a_listed_release_the_index_lacks_is_refused_naming_it():
    with pytest.raises(VlmpathError, match="no release 0.5.99"):
        select("sglang", parse_selection("0.5.23,0.5.99"), {"0.5.23": T0})


def test_index_date_is_the_first_upload_and_yanked_or_bad_entries_are_skipped():
    data = {"releases": {
        "1.0": [{"upload_time": "2026-05-02T10:00:00"}, {"upload_time_iso_8601": "2026-05-01T09:00:00Z"}],
        "1.1": [{"upload_time": "2026-06-01T00:00:00", "yanked": True}],
        "1.2": [{"upload_time": "not a date"}], "<script>": [{"upload_time": "2026-06-01T00:00:00"}],
        "1.3": "nope"}}
    got = parse_index(data)
    assert got == {"1.0": datetime(2026, 5, 1, 9, tzinfo=timezone.utc)}
    with pytest.raises(VlmpathError, match="releases"):
        parse_index({"info": {}})


# --- the sweep loop: resume, failure points, partial ----------------------------------------
def test_the_index_answer_is_read_bounded_in_size_and_depth(tmp_path, monkeypatch):
    from vlmpath.engines import releases

    (tmp_path / "sglang").mkdir()
    answer = tmp_path / "sglang" / "json"
    answer.write_text(json.dumps({"releases": {"0.5.22": [{"upload_time": "2026-10-16T00:26:04"}]}}))
    monkeypatch.setenv(releases.INDEX_URL_ENV, tmp_path.as_uri())
    assert list(releases.index_releases("sglang")) == ["0.5.22"]  # an unchanged answer reads
    monkeypatch.setattr(releases, "MAX_INDEX_BYTES", 40)
    with pytest.raises(VlmpathError, match="over 40 bytes; refused: not a package index answer"):
        releases.index_releases("sglang")
    monkeypatch.setattr(releases, "MAX_INDEX_BYTES", 1 << 20)
    answer.write_text("[" * 100_000 + "]" * 100_000)  # deep nesting: one line, not a RecursionError
    with pytest.raises(VlmpathError, match="not JSON .*nested more than"):
        releases.index_releases("sglang")


def _releases(*versions: str) -> list[Release]:
    return [Release("sglang", v, T0 + timedelta(days=10 * i)) for i, v in enumerate(versions)]


class Fakes:
    """prepare/measure stand-ins that record what they were asked to do."""

    def __init__(self, broken_install=(), api_moved=()):
        self.prepared, self.measured = [], []
        self.broken_install, self.api_moved = set(broken_install), set(api_moved)

    def prepare(self, rel):
        self.prepared.append(rel.version)
        if rel.version in self.broken_install:
            raise VlmpathError(f"vlmpath engine install {rel.label}: step 'sglang' failed (pip exited 1):\nno wheel")
        return sweep.Prepared(EngineSpec("release", rel.engine, rel.version), None, 12.0, 3 * 2**30)

    def measure(self, prepared, cases):
        v = prepared.spec.version
        self.measured.append(v)
        if v in self.api_moved:
            return [CaseRecord(workload=c.workload, error="Traceback (most recent call last):\n  File x\n"
                               "EngineError: sglang has no embed_mm_inputs (API moved)") for c in cases]
        calls = 2 if v >= "0.5.14" else 5  # cross-request batching arrives
        return [CaseRecord(workload=c.workload, accuracy=1.0, encoder_calls=calls, syncs=0, tok_per_s=1000.0,
                           routine_bytecodes=9000 + int(v.split(".")[-1])) for c in cases]


def _sweep(store, fakes, versions, **kw):
    return sweep.run_sweep("sglang", _releases(*versions), store, prepare=fakes.prepare, measure=fakes.measure,
                           workloads=["multi_region"], log=lambda m: None, **kw)


def test_a_release_already_measured_is_not_measured_again(tmp_path):
    first = Fakes()
    _sweep(tmp_path, first, ["0.5.12", "0.5.13"])
    again = Fakes()
    state = _sweep(tmp_path, again, ["0.5.12", "0.5.13", "0.5.14"])
    assert first.measured == ["0.5.12", "0.5.13"]
    assert again.prepared == again.measured == ["0.5.14"]  # only the new one
    assert [p.version for p in state.ordered()] == ["0.5.12", "0.5.13", "0.5.14"]
    assert not state.partial


def test_a_release_the_adapter_cannot_drive_is_one_failure_point_and_the_sweep_goes_on(tmp_path):
    fakes = Fakes(broken_install={"0.5.12"}, api_moved={"0.5.11"})
    state = _sweep(tmp_path, fakes, ["0.5.11", "0.5.12", "0.5.13"])
    pts = {p.version: p for p in state.ordered()}
    assert pts["0.5.11"].state == "failed" and pts["0.5.11"].reason == \
        "EngineError: sglang has no embed_mm_inputs (API moved)"  # the traceback's last line, one line
    assert pts["0.5.12"].state == "failed" and pts["0.5.12"].reason.startswith("install failed:")
    assert "\n" not in pts["0.5.12"].reason
    assert pts["0.5.13"].state == "measured" and fakes.measured == ["0.5.11", "0.5.13"]
    assert not sweep.records_path(tmp_path, "sglang", "0.5.11").exists()
    # resumed: a failure is a point too, not measured again unless asked
    again = Fakes()
    _sweep(tmp_path, again, ["0.5.11", "0.5.12", "0.5.13"])
    assert again.prepared == []
    _sweep(tmp_path, again, ["0.5.11", "0.5.12", "0.5.13"], retry_failed=True)
    assert again.prepared == ["0.5.11", "0.5.12"]
    assert sweep.load_state(tmp_path, "sglang").points["0.5.11"].state == "measured"


def test_a_partial_sweep_is_recorded_as_partial_and_finished_later(tmp_path):
    state = _sweep(tmp_path, Fakes(), ["0.5.12", "0.5.13", "0.5.14"], limit=1)
    assert state.partial and list(state.points) == ["0.5.12"]
    on_disk = json.loads(sweep.state_path(tmp_path, "sglang").read_text())
    assert on_disk["partial"] is True and on_disk["requested"] == ["0.5.12", "0.5.13", "0.5.14"]
    done = _sweep(tmp_path, Fakes(), ["0.5.12", "0.5.13", "0.5.14"])
    assert not done.partial and json.loads(sweep.state_path(tmp_path, "sglang").read_text())["partial"] is False


def test_a_sweep_with_other_workloads_is_refused_not_mixed_in(tmp_path):
    _sweep(tmp_path, Fakes(), ["0.5.12"])
    with pytest.raises(VlmpathError, match="--workload"):
        sweep.run_sweep("sglang", _releases("0.5.13"), tmp_path, prepare=Fakes().prepare,
                        measure=Fakes().measure, workloads=["mixed"], log=lambda m: None)


def test_a_corrupt_state_file_names_itself(tmp_path):
    sweep.state_path(tmp_path, "sglang").write_text('{"points": {"1": {"state": "odd"}}}')
    with pytest.raises(VlmpathError, match="sweep-sglang.json"):
        sweep.load_state(tmp_path, "sglang")


# --- one asv store, the releases as dated commits ----------------------------------------------
def test_each_release_is_one_commit_dated_at_its_upload_in_one_asv_store(tmp_path):
    state = _sweep(tmp_path, Fakes(api_moved={"0.5.13"}), ["0.5.12", "0.5.13", "0.5.14"])
    results = write_asv(tmp_path, [state])
    files = sorted((results / machine_name("sglang")).glob("*-sweep.json"))
    data = {json.loads(f.read_text())["requirements"]["sglang"]: json.loads(f.read_text()) for f in files}
    assert sorted(data) == ["0.5.12", "0.5.13", "0.5.14"]
    for p in state.ordered():
        assert data[p.version]["date"] == int(p.when.timestamp() * 1000)
    calls = "bench_engine.Engine.track_encoder_calls"
    assert data["0.5.12"]["results"][calls][0] == [5.0] and data["0.5.14"]["results"][calls][0] == [2.0]
    assert data["0.5.13"]["results"][calls][0] == [None]  # the failed point: no number
    fail = results / machine_name("sglang") / f"vlmpath-failures-{data['0.5.13']['commit_hash'][:8]}.json"
    entries = read_failures(fail)  # the failure file of `vlmpath run`, one entry per case
    assert {f.benchmark for f in entries} >= {calls} and all("API moved" in f.error for f in entries)
    # the history asv reads: date order, each commit at its release's date, tagged
    hist = tmp_path / "history"
    order = subprocess.run(["git", "-C", str(hist), "rev-list", "--all", "--date-order", "--reverse",
                            "--format=%ct %s", "--no-commit-header"], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    assert [ln.split(" ", 1)[1] for ln in order if ln] == ["sglang 0.5.12", "sglang 0.5.13", "sglang 0.5.14"]
    assert [int(ln.split()[0]) * 1000 for ln in order if ln] == [data[v]["date"] for v in ("0.5.12", "0.5.13",
                                                                                           "0.5.14")]
    # rebuilt for a resumed sweep: the same shas, so the result files stay valid
    assert release_history(tmp_path, [state])[("sglang", "0.5.12")] == data["0.5.12"]["commit_hash"]


def test_timeline_chart_shows_every_release_the_failure_and_partial():
    state = sweep.SweepState("sglang", requested=["0.5.12", "0.5.13", "0.5.14"], workloads=["multi_region"])
    state.points = {v: sweep.Point(v, (T0 + timedelta(days=i)).isoformat(), s, r)
                    for i, (v, s, r) in enumerate([("0.5.12", "measured", None), ("0.5.13", "failed", "API moved")])}
    recs = {"0.5.12": [CaseRecord(workload="multi_region", accuracy=1.0, encoder_calls=5, syncs=0,
                                  tok_per_s=900.0, routine_bytecodes=9000)]}
    fig = draw_sweep(state, recs)
    marks = figure_marks(fig)
    assert "encoder_calls multi_region: 5" in marks and "accuracy multi_region: 1" in marks
    assert "accuracy FAILED: 0.5.13" in marks
    assert any("PARTIAL: 2 of 3" in m for m in marks)
    assert any("0.5.13: API moved" in n for n in figure_notes(fig))


# --- cheap installs -----------------------------------------------------------------------------
def test_shared_cache_installs_with_uv_hard_links_and_plain_install_keeps_pip(tmp_path, monkeypatch):
    monkeypatch.setenv(env_recipe.UV_ENV, "/opt/uv")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    spec = EngineSpec("release", "sglang", "0.5.23")
    plain = env_recipe.InstallContext(spec, None, tmp_path / "e", ROOT)
    shared = env_recipe.InstallContext(spec, None, tmp_path / "e", ROOT, shared_cache=tmp_path / "cache")
    assert plain.pip[:4] == [str(plain.python), "-m", "pip", "install"]
    cmd = shared.pip
    assert cmd[:3] == ["/opt/uv", "pip", "install"] and "--link-mode=hardlink" in cmd
    assert cmd[cmd.index("--cache-dir") + 1] == str(tmp_path / "cache")
    assert cmd[cmd.index("--python") + 1] == str(shared.python)
    assert cmd[cmd.index("--find-links") + 1] == "/opt/wheels"  # uv reads no pip.conf: the CPU torch wheel


def test_disk_of_a_set_counts_a_hard_linked_file_once(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "w").write_bytes(os.urandom(200_000))
    os.link(a / "w", b / "w")
    one, both = disk_bytes([a]), disk_bytes([a, b])
    assert one >= 200_000 and both < one + 8192  # the second env adds its directory entry, not the file
    (b / "own").write_bytes(os.urandom(100_000))
    assert disk_bytes([a, b]) >= one + 100_000


def test_cli_bad_range_exits_2_naming_it(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vlmpath.cli", "engine", "sweep", "sglang", "0.5.23..0.5.11",
                           "--store", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "backwards" in proc.stderr and not list(tmp_path.iterdir())


# --- e2e: two releases through the real worker and asv publish ----------------------------------
@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_two_release_sweep_of_the_fixture_engine_publishes_both_points(tmp_path):
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"releases": {"0.5.22": [{"upload_time": "2026-10-16T00:26:04"}],
                                              "0.5.23": [{"upload_time": "2026-10-30T01:34:33"}]}}))
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "vlmpath.cli", "engine", "sweep", "sglang", "0.5.22..0.5.23", "--engine-src",
           str(FAKE), "--offline-dates", str(index), "--store", str(store), "--workload", "few_large_images"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["measured"] == 2 and summary["partial"] is False
    assert Path(summary["chart"]).stat().st_size > 10_000
    graph = next((store / "html" / "graphs").glob("branch-main/*/machine-sweep-sglang/*/"
                                                   "bench_engine.Engine.track_accuracy.json"))
    points = json.loads(graph.read_text())
    assert [p[0] for p in points] == [0, 1] and all(not math.isnan(p[1][0]) and p[1][0] == 1.0 for p in points)
    tags = json.loads((store / "html" / "index.json").read_text())["tags"]
    assert set(tags) == {"sglang-0.5.22", "sglang-0.5.23"}


def test_a_release_is_measured_in_the_env_the_sweep_installed_not_the_default_home(tmp_path, monkeypatch):
    from vlmpath.engines import envs
    from vlmpath.suite import engine_run

    seen = {}

    def fake_install(spec, home=None, *, log=print, shared_cache=None, project_root=None):
        seen["install"] = (spec.label, home, shared_cache)
        return envs.EngineEnv(EngineSpec("release", "sglang", "0.5.12"), Path(home) / "sglang-0.5.12")

    monkeypatch.setattr(envs, "install", fake_install)
    monkeypatch.setattr(engine_run, "measure_cases", lambda cases, spec, **kw: seen.setdefault("measure", kw) and [])
    prepared = sweep.install_release(_releases("0.5.12")[0], home=tmp_path / "envs", shared_cache=tmp_path / "c")
    sweep.measure_release(prepared, [])
    assert seen["install"] == ("sglang==0.5.12", tmp_path / "envs", tmp_path / "c")
    assert seen["measure"]["home"] == str(tmp_path / "envs")  # not ~/.cache/vlmpath/engines


def test_vllm_no_deps_version_is_resolved_by_pip_even_when_uv_installs(tmp_path, monkeypatch):
    # uv has no `--report`: asked through uv the dry run failed and the bare name got the newest
    # xgrammar, which needs an apache-tvm-ffi vLLM 0.21 does not pin (the sweep's first 0.21.0 point)
    import subprocess as sp

    from vlmpath.engines.known import vllm as known_vllm

    monkeypatch.setenv(env_recipe.UV_ENV, "/opt/uv")
    ctx = env_recipe.InstallContext(EngineSpec("release", "vllm", "0.21.0"), None, tmp_path / "e", ROOT,
                                    shared_cache=tmp_path / "cache")
    monkeypatch.setattr(env_recipe, "pip_recipe", lambda c: {})
    asked, ran = [], []

    def fake_run(cmd, **kw):
        asked.append(cmd)
        report = Path(cmd[cmd.index("--report") + 1])
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"install": [{"metadata": {"name": "xgrammar", "version": "0.2.5.post1"}}]}))
        return sp.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(sp, "run", fake_run)
    monkeypatch.setattr(env_recipe.InstallContext, "run", lambda self, name, cmd, **kw: ran.append(cmd))
    out = known_vllm.install(ctx)
    assert asked[0][:3] == [str(ctx.python), "-m", "pip"]  # the resolver: pip
    assert ran[0][:3] == ["/opt/uv", "pip", "install"] and "xgrammar==0.2.5.post1" in ran[0]  # the install: uv
    assert out["no_deps"] == ["xgrammar==0.2.5.post1"]


# --- steps at a release boundary (issue 38) ---------------------------------------------
def _steps_state(*versions_states):
    pts = {v: sweep.Point(v, f"2026-10-{10 + i:02d}T00:00:00+00:00", st)
           for i, (v, st) in enumerate(versions_states)}
    return sweep.SweepState("sglang", list(pts), pts, ["cache_oversize", "multi_span_chunks"])


def test_a_changed_exact_metric_is_a_step_at_the_release_that_changed_it():
    state = _steps_state(("0.5.21", "measured"), ("0.5.22", "failed"), ("0.5.23", "measured"), ("0.5.24", "measured"))
    rec = lambda w, **kw: CaseRecord(workload=w, accuracy=1.0, encoder_calls=2, reencodes=0, **kw)  # noqa: E731
    old = [rec("cache_oversize", cache_evictions=2), rec("multi_span_chunks", off_chunk_encodes=2)]
    new = [rec("cache_oversize", cache_evictions=0), rec("multi_span_chunks", off_chunk_encodes=1)]
    records = {"0.5.21": old, "0.5.23": new, "0.5.24": list(new)}  # 0.5.24: an unchanged pair
    steps = sweep.release_steps(state, records)
    assert [s.line for s in steps] == [
        "step\t0.5.21 -> 0.5.23\tcache_oversize\tcache_evictions 2 -> 0 (better)",
        "step\t0.5.21 -> 0.5.23\tmulti_span_chunks\toff_chunk_encodes 2 -> 1 (better)"]
    # Planted the other way: the later release regresses; a value one side did not measure
    # (a record older than the metric) is no step.
    back = sweep.release_steps(state, {"0.5.21": new, "0.5.23": old, "0.5.24": [rec("cache_oversize"), new[1]]})
    assert {(s.before, s.metric, s.worse) for s in back} == {
        ("0.5.21", "cache_evictions", True), ("0.5.21", "off_chunk_encodes", True), ("0.5.23", "off_chunk_encodes", False)}
