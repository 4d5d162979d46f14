"""Charts from real asv results: labels, units, failures, notes, files that are not blank."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import matplotlib
import matplotlib.image
import pytest
from asv_fixtures import fingerprint, sha, write_asv_run
from report_fixture import FIXTURE

from vlmpath import cli
from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError
from vlmpath.render.comment import render_json
from vlmpath.render.dashboard import write_dashboard
from vlmpath.render.report import write_report
from vlmpath.render.report_charts import path_chart, vendor_chart
from vlmpath.render.report_data import (
    History,
    consecutive_regressions,
    load_comparison,
    load_history,
    path_of,
)
from vlmpath.render.report_figure import FAIL, figure_notes, save_figure
from vlmpath.render.report_history import history_chart, pr_chart

TH = Thresholds.default()  # the thresholds every chart here is told it was judged with
OTHER_FIXTURE = Path(__file__).parent / "fixtures" / "asv_results"  # `vlmpath run`'s recording
MIN_PNG_BYTES = 15_000


def _real_fixtures() -> list[Path]:
    """Both recordings: the suite's own (``vlmpath run``) and ours (with a failing case)."""
    return [p for p in (OTHER_FIXTURE, FIXTURE) if any(p.glob("*/machine.json"))]


@pytest.fixture(scope="module", params=_real_fixtures(), ids=lambda p: p.name)
def real(request, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("real") / "results"
    shutil.copytree(request.param, dst)
    return dst


@pytest.fixture(scope="module")
def history(real) -> History:
    return load_history(real)


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts] + [ax.get_title(loc="left"), ax.get_ylabel(), ax.get_xlabel()]
    return out


def assert_not_blank(path: Path, min_bytes: int = MIN_PNG_BYTES) -> None:
    assert path.stat().st_size > min_bytes, f"{path} is only {path.stat().st_size} bytes"
    img = matplotlib.image.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 300
    assert float(img[..., :3].std()) > 0.05, f"{path} looks blank"


def _legend_outside(fig, ax) -> bool:
    fig.canvas.draw()
    leg = ax.get_legend()
    return leg is not None and leg.get_window_extent().x0 >= ax.get_window_extent().x1


# --- per path ---------------------------------------------------------------------------------


def test_real_fixtures_have_several_commits_and_ours_a_real_failure(history):
    assert len(history.runs) >= 2 and list(history.dates) == sorted(history.dates)
    ours = load_history(FIXTURE).latest
    failed = [m for m in ours.metrics() if m.unit == "tok/s" and not m.ok and not m.skipped]
    assert failed, "our recording includes batched_by_span failing on multi_region"


def _expected_panels(run, path):
    """Per benchmark class of ``path``: its tok/s or GB/s benchmarks, else its timings."""
    classes = {}
    for m in run.metrics():
        if path_of(m.benchmark) == path:
            classes.setdefault(m.benchmark.rsplit(".", 1)[0], {}).setdefault(m.unit, set()).add(m.benchmark)
    out = set()
    for units in classes.values():
        out |= (units.get("tok/s", set()) | units.get("GB/s", set())) or units.get("seconds", set())
    # A benchmark skipped in every case (all "not run") is no panel (render.report_charts).
    return sorted(b for b in out if any(not m.skipped for m in run.metrics() if m.benchmark == b))


def test_path_chart_labels_units_accuracy_and_failed_marker(history, tmp_path):
    run = history.latest
    checked_failures = 0
    for path in sorted({path_of(m.benchmark) for m in run.metrics()}):
        fig = path_chart(run, path, thresholds=TH)
        assert fig.get_suptitle().startswith(f"{path} path")
        benches = _expected_panels(run, path)
        assert len(fig.axes) == max(1, len(benches) * len(run.machines))
        for ax, bench in zip(fig.axes, benches):
            metrics = [m for m in run.metrics() if m.benchmark == bench]
            unit = metrics[0].unit
            assert bench in ax.get_title(loc="left") and run.machines[0].machine in ax.get_title(loc="left")
            shown = ("s", "ms", "µs", "ns") if unit == "seconds" else (unit,)  # time in a unit people read
            assert any(f"({u}" in ax.get_ylabel() for u in shown), ax.get_ylabel()
            assert ("higher is better" if unit in ("tok/s", "GB/s") else "lower is better") in ax.get_ylabel()
            assert ax.get_xlabel() == ("feature size (MiB)" if path == "hash" else "workload")
            assert _legend_outside(fig, ax)
            acc = {m.params: m for m in run.metrics()
                   if m.benchmark == bench.rsplit(".", 1)[0] + ".track_accuracy"}
            texts = [t.get_text() for t in ax.texts]
            measured = [m for m in metrics if not m.skipped]
            assert texts.count("not run") == len(metrics) - len(measured)
            ok_strategies = {tuple(v for k, v in m.params if k != "preset") for m in measured if m.ok}
            hatches = {p.get_hatch() for p in ax.patches}
            assert len(hatches) == len(ok_strategies), "each strategy needs its own hatch (greyscale)"
            for m in measured:
                a = acc[m.params].value if m.params in acc else None
                if m.ok and a is not None:
                    assert any(t.startswith(f"acc {a:.2f}") for t in texts)
                elif not m.ok:  # drawn, red, with the accuracy of the same run beside it
                    checked_failures += 1
                    assert any(t.startswith("FAILED") and (a is None or f"{a:.2f}" in t) for t in texts)
                    assert any(line.get_color() == FAIL and line.get_marker() == "X" for line in ax.lines)
                    if a is not None and a < 1.0:
                        assert any("WRONG" in t for t in texts)
        out = save_figure(fig, tmp_path / f"{path}.png")
        assert_not_blank(out, MIN_PNG_BYTES if benches else 5_000)
    failures = sum(1 for m in run.metrics() if not m.ok and not m.skipped and m.benchmark in
                   {b for p in {path_of(x.benchmark) for x in run.metrics()} for b in _expected_panels(run, p)})
    assert checked_failures == failures


def test_path_chart_without_results_is_a_note_not_a_crash(tmp_path):
    fig = path_chart(None, "inject", thresholds=TH)
    assert any("no inject results yet" in n for n in figure_notes(fig))
    assert_not_blank(save_figure(fig, tmp_path / "x.png"), 5_000)


def test_charts_do_not_touch_global_rcparams(history):
    before = dict(matplotlib.rcParams)
    backend = matplotlib.get_backend()
    vendor_chart(history.latest, thresholds=TH)
    assert dict(matplotlib.rcParams) == before and matplotlib.get_backend() == backend


# --- CUDA vs ROCm -----------------------------------------------------------------------------

_CASES = ["multi_region", "video"]


def _gpu_results(root: Path, machines: dict[str, str], label: str = "c1", **kw) -> str:
    commit = sha(label)
    for i, (name, backend) in enumerate(machines.items()):
        write_asv_run(root, name, commit, {
            "bench_embed.EmbedRoutine.track_tok_per_s": (
                "tok/s", ["pipeline", "preset"], [["default", "legacy"], _CASES],
                [1000.0 / (i + 1), 900.0, None, 700.0], None),
            "bench_embed.EmbedRoutine.track_accuracy": (
                "fraction", ["pipeline", "preset"], [["default", "legacy"], _CASES], [1.0, 1.0, 0.6, 1.0], None),
        }, fingerprint(backend), **kw)
    return commit


def test_vendor_chart_puts_cuda_and_rocm_side_by_side(tmp_path):
    commit = _gpu_results(tmp_path, {"cuda-h200": "cuda", "rocm-mi300x": "rocm", "cpu-epyc": "cpu"})
    fig = vendor_chart(load_asv(tmp_path, commit), thresholds=TH)
    assert figure_notes(fig) == []
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["cuda-h200 (CUDA)", "rocm-mi300x (ROCM)"] and "cpu-epyc" not in " ".join(labels)
    assert "ROCm/CUDA 0.50" in [t.get_text() for t in ax.texts]  # 500 / 1000 for default/multi_region
    assert "FAILED" in [t.get_text() for t in ax.texts]
    assert "(tok/s)" in ax.get_ylabel()
    assert_not_blank(save_figure(fig, tmp_path / "v.png"))


def test_vendor_chart_with_one_vendor_or_none_says_so(tmp_path, history):
    commit = _gpu_results(tmp_path, {"cuda-h200": "cuda"})
    fig = vendor_chart(load_asv(tmp_path, commit), thresholds=TH)
    assert any("only CUDA results (cuda-h200)" in n and "no ROCM machine" in n for n in figure_notes(fig))
    assert len(fig.axes[0].patches) == 3  # the CUDA bars are still drawn
    fig = vendor_chart(history.latest, thresholds=TH)  # the real recording is CPU only
    assert any("no CUDA or ROCm results" in n for n in figure_notes(fig))
    assert_not_blank(save_figure(fig, tmp_path / "none.png"), 5_000)


# --- history ----------------------------------------------------------------------------------


def test_history_chart_from_real_results(history, tmp_path):
    bench = sorted({m.benchmark for m in history.latest.metrics() if m.unit == "tok/s"})[0]
    fig = history_chart(history, bench, thresholds=TH)
    ax = fig.axes[0]
    ticks = [t.get_text().split("\n")[0] for t in ax.get_xticklabels()]
    assert ticks == [r.commit[:8] for r in history.runs]
    machines = {m for r in history.runs for m in r.machine_names}
    assert {line.get_label() for line in ax.lines if not line.get_label().startswith("_")} == machines
    assert "(tok/s)" in ax.get_ylabel() and bench in ax.get_title(loc="left")
    assert_not_blank(save_figure(fig, tmp_path / "h.png"))
    svg = save_figure(fig, tmp_path / "h.svg")
    assert ET.parse(svg).getroot().tag.endswith("svg")


def test_history_marks_regressions_between_consecutive_commits(tmp_path):
    for i, scale in enumerate((1.0, 1.02, 0.5)):  # the third commit halves the throughput
        write_asv_run(tmp_path, "cuda-h200", sha(f"c{i}"), {
            "bench_embed.EmbedRoutine.track_tok_per_s": (
                "tok/s", ["pipeline", "preset"], [["default"], _CASES], [1000.0 * scale, 800.0 * scale], None),
        }, fingerprint("cuda"), date=1_700_000_000_000 + i * 86_400_000)
    h = load_history(tmp_path)
    regs = consecutive_regressions(h, TH)
    assert {k[0] for k in regs} == {sha("c2")}
    fig = history_chart(h, "bench_embed.EmbedRoutine.track_tok_per_s", regs, thresholds=TH)
    texts = _texts(fig)
    assert sum(t.startswith("regression (2 cases)") for t in texts) == 1
    assert any(line.get_marker() == "v" and line.get_markeredgecolor() == FAIL for line in fig.axes[0].lines)


# --- PR chart ---------------------------------------------------------------------------------


def test_pr_chart_from_real_results_and_its_json(history, tmp_path):
    base, head = history.runs[0], history.runs[-1]
    # A tight band so that the recorded (noisy, CPU) runs have changes to draw; the
    # packaged CPU band is about noise, not about this chart.
    report = compare(base, head, replace(Thresholds.default(), cpu_factor=0.05))
    changed = [c for c in report.all() if c.verdict not in (Verdict.UNCHANGED, Verdict.NOT_COMPARABLE)]
    assert changed
    (tmp_path / "cmp.json").write_text(render_json(report))
    fig = pr_chart(load_comparison(tmp_path / "cmp.json"), thresholds=TH)
    assert fig.get_suptitle().startswith(f"base {base.commit[:8]} vs head {head.commit[:8]}")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "value relative to base (base = 1.0)"
    assert len(ax.get_yticklabels()) == len(changed)
    assert all("[" in t.get_text() and "better]" in t.get_text() for t in ax.get_yticklabels())
    assert_not_blank(save_figure(fig, tmp_path / "pr.png"))


def test_pr_chart_with_a_benchmark_new_at_head(tmp_path):
    base = _gpu_results(tmp_path, {"cuda-h200": "cuda"}, "base")
    head = sha("head")
    write_asv_run(tmp_path, "cuda-h200", head, {
        "bench_embed.EmbedRoutine.track_tok_per_s": (
            "tok/s", ["pipeline", "preset"], [["default", "legacy"], _CASES], [400.0, 900.0, None, 700.0], None),
        "bench_hash.HashPath.track_gb_per_s": ("GB/s", ["path"], [["xxh3"]], [9.0], None),
    }, fingerprint("cuda"))
    fig = pr_chart(compare(load_asv(tmp_path, base), load_asv(tmp_path, head)), thresholds=TH)
    assert any("exist at head but not at base" in n for n in figure_notes(fig))
    texts = _texts(fig)
    assert any(t.startswith("new:") and "(not in base)" in t for t in texts)
    assert any(t.startswith("regression:") for t in texts)
    assert_not_blank(save_figure(fig, tmp_path / "pr.png"))


def test_pr_chart_with_nothing_changed_says_so(history, tmp_path):
    fig = pr_chart(compare(history.latest, history.latest), thresholds=TH)
    assert any("unchanged" in n for n in figure_notes(fig))
    assert_not_blank(save_figure(fig, tmp_path / "same.png"), 5_000)


# --- the whole report and the CLI -------------------------------------------------------------


def test_write_report_on_real_results(real, history, tmp_path):
    judged = compare(load_asv(real, history.runs[0].commit[:8]), load_asv(real, history.runs[-1].commit[:8]), TH)
    out = write_report(real, tmp_path / "reports", thresholds=TH, comparison=judged)
    kinds = {c.kind for c in out.charts}
    assert kinds == {"path", "vendor", "history", "pr"}
    for c in out.charts:
        for f in c.files:
            p = out.out_dir / f
            if p.suffix == ".png":
                assert_not_blank(p, 5_000)
            else:
                assert ET.parse(p).getroot().tag.endswith("svg")
    manifest = json.loads((tmp_path / "reports" / "charts" / "charts.json").read_text())
    assert [c["name"] for c in manifest["charts"]] == [c.name for c in out.charts]
    assert manifest["commit"] == history.runs[-1].commit
    assert any("no CUDA or ROCm" in w for w in out.warnings)
    assert not list((tmp_path / "reports" / "charts").glob(".*"))  # no temp files left


def test_cli_report_with_no_results_yet_warns_and_draws(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "html").mkdir()
    rc = cli.main(["report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "out"),
                   "--html", str(tmp_path / "html")])
    err = capsys.readouterr().err
    assert rc == 0
    page = (tmp_path / "html" / "vlmpath" / "index.html").read_text()
    # Charts drawn without data are named in one line, not shown as empty graphs.
    assert "No results yet" in page and "Not shown (nothing to draw here): " in page and "vendors: " in page
    assert 'src="charts/vendors.png"' not in page
    assert "vlmpath report: warning: no results yet" in err
    assert "PR chart was not drawn" in err
    pngs = sorted((tmp_path / "out" / "charts").glob("*.png"))
    assert {p.stem for p in pngs} >= {"path-embed", "path-encode", "path-hash", "path-inject", "vendors", "history"}
    for p in pngs:
        assert_not_blank(p, 5_000)


def test_cli_report_one_machine_and_new_benchmark_warns(tmp_path, capsys):
    res = tmp_path / "results"
    base = _gpu_results(res, {"cuda-h200": "cuda"}, "base", date=1_700_000_000_000)
    head = sha("head")
    write_asv_run(res, "cuda-h200", head, {
        "bench_embed.EmbedRoutine.track_tok_per_s": (
            "tok/s", ["pipeline", "preset"], [["default"], _CASES], [1000.0, 900.0], None),
        "bench_hash.HashPath.track_gb_per_s": ("GB/s", ["path"], [["xxh3", "rehash"]], [9.0, 1.0], None),
    }, fingerprint("cuda"), date=1_700_086_400_000)
    rc = cli.main(["report", "--results", str(res), "--out", str(tmp_path / "out"),
                   "--base", base[:10], "--head", head[:10]])
    err = capsys.readouterr().err
    assert rc == 0
    assert "vendors: only CUDA results (cuda-h200)" in err
    assert "exist at head but not at base" in err
    assert_not_blank(tmp_path / "out" / "charts" / "pr.png")


@pytest.mark.parametrize("make, expect", [
    (lambda p: None, "does not exist"),
    (lambda p: p.write_text("x"), "is not a directory"),
    (lambda p: (p.mkdir(), (p / "m").mkdir(), (p / "m" / "machine.json").write_text("{}"),
                (p / "m" / "abcdef12-env.json").write_text("{not json")), "corrupted results file"),
])
def test_unreadable_results_dir_is_a_clear_error(tmp_path, capsys, make, expect):
    res = tmp_path / "results"
    make(res)
    with pytest.raises(VlmpathError, match=expect):
        write_report(res, tmp_path / "out", thresholds=TH)
    assert cli.main(["report", "--results", str(res), "--out", str(tmp_path / "out")]) == 2
    assert expect in capsys.readouterr().err


def test_the_pr_chart_draws_the_report_it_is_given_and_never_judges_it_again(real, history, tmp_path):
    # A report whose verdicts differ from what the data would give (planted: every row a
    # regression): a chart writer that compared base and head again would draw improvements.
    judged = compare(history.runs[0], history.runs[-1], TH)
    planted = replace(judged, machines=tuple(
        replace(m, comparisons=tuple(replace(c, verdict=Verdict.REGRESSION) if c.verdict is Verdict.IMPROVEMENT
                                     else c for c in m.comparisons)) for m in judged.machines))
    assert any(c.verdict is Verdict.IMPROVEMENT for c in judged.all())
    out = write_report(real, tmp_path / "reports", thresholds=TH, comparison=planted)
    [pr] = [c for c in out.charts if c.kind == "pr"]
    assert pr.marks and all(m.startswith("regression ") for m in pr.marks), pr.marks


def test_bad_arguments_are_clear_errors(tmp_path, history, real, capsys):
    assert cli.main(["report", "--results", str(real), "--out", str(tmp_path), "--base", history.runs[0].commit]) == 2
    assert "pass both --base and --head" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(VlmpathError, match="not a vlmpath comparison JSON|schema_version"):
        load_comparison(tmp_path / "bad.json")
    with pytest.raises(VlmpathError, match="cannot read comparison"):
        load_comparison(tmp_path / "missing.json")


# --- dashboard page (the browser test loads it for real) ---------------------------------------


def test_dashboard_page_links_charts_and_summary_and_leaves_asv_alone(real, tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("<html>asv</html>")
    out = write_report(real, tmp_path / "reports", thresholds=TH)
    (tmp_path / "reports" / "summary.md").write_text("**No regressions** <b> on cpu\\-ci\n| a | b |\n")
    page = write_dashboard(html, tmp_path / "reports")
    text = page.read_text()
    assert page == html / "vlmpath" / "index.html"
    assert (html / "index.html").read_text() == "<html>asv</html>"
    assert 'href="../index.html"' in text and "<strong>No regressions</strong> &lt;b&gt; on cpu-ci" in text
    assert (html / "vlmpath" / "summary.md").is_file() and "summary.json" not in text
    for c in out.charts:
        for f in c.files:
            assert (html / "vlmpath" / f).read_bytes() == (out.out_dir / f).read_bytes()
            if f.endswith(".png"):
                assert f'src="{f}"' in text


def test_dashboard_bad_input(tmp_path):
    with pytest.raises(VlmpathError, match="run `asv publish`"):
        write_dashboard(tmp_path / "nope", tmp_path)
    with pytest.raises(VlmpathError, match="run `vlmpath report"):
        write_dashboard(tmp_path, tmp_path / "nope")
    (tmp_path / "reports").mkdir()
    text = write_dashboard(tmp_path, tmp_path / "reports").read_text()
    assert "No charts yet" in text and "No summary yet" in text and "not been published" in text
    (tmp_path / "reports" / "charts").mkdir()
    (tmp_path / "reports" / "charts" / "charts.json").write_text("{broken")
    with pytest.raises(VlmpathError, match="corrupted chart manifest"):
        write_dashboard(tmp_path, tmp_path / "reports")
