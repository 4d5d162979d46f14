"""Charts people read: log scale past a 30x span, time in ms/µs, axes named after what they
group, n and the spread on every bar, default vs legacy in the legend (render.chart_axes)."""

from __future__ import annotations

from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.render.chart_axes import axis_unit, strategy_label, use_log
from vlmpath.render.report_charts import path_chart
from vlmpath.render.report_figure import figure_marks

TH = Thresholds.default()


def _run(bench: str, unit: str, values: dict[tuple[str, str], float], names=("strategy", "preset"),
         samples: dict | None = None) -> RunResults:
    metrics = tuple(Metric("m1", bench, ((names[0], s), (names[1], g)), unit, v,
                           samples=tuple((samples or {}).get((s, g), ())))
                    for (s, g), v in values.items())
    return RunResults("a" * 40, (MachineRun("m1", "a" * 40, metrics),))


def _axis(run: RunResults, path: str):
    fig = path_chart(run, path, thresholds=TH)
    return fig, fig.axes[0]


def test_a_series_spanning_more_than_30x_gets_a_log_axis_and_one_within_stays_linear():
    wide = _run("bench_encode.EncodeMetrics.track_tok_per_s", "tok/s",
                {("batched", "cache_reuse"): 21000.0, ("batched", "video"): 600.0})
    fig, ax = _axis(wide, "encode")
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    assert "log scale tok/s" in figure_marks(fig)
    narrow = _run("bench_encode.EncodeMetrics.track_tok_per_s", "tok/s",
                  {("batched", "cache_reuse"): 2900.0, ("batched", "video"): 600.0})
    fig, ax = _axis(narrow, "encode")
    assert ax.get_yscale() == "linear" and "log" not in ax.get_ylabel()


def test_time_is_shown_in_a_readable_unit_and_the_hash_axis_is_feature_size():
    run = _run("bench_hash.Receive.time_receive", "seconds",
               {("forwarded", "1"): 4e-5, ("rehash", "1"): 0.009, ("rehash", "64"): 0.045},
               names=("path", "size_mib"))
    fig, ax = _axis(run, "hash")
    assert "(ms" in ax.get_ylabel() and "seconds" not in ax.get_ylabel()
    assert ax.get_xlabel() == "feature size (MiB)"
    assert ax.get_yscale() == "log"  # 40 µs beside 45 ms must not look missing
    heights = sorted(p.get_height() for p in ax.patches if p.get_height() > 0)
    assert abs(heights[0] - 0.04) < 1e-9 and abs(heights[-1] - 45.0) < 1e-9  # values drawn in ms


def test_every_bar_says_its_n_and_samples_draw_a_spread():
    run = _run("bench_encode.EncodeMetrics.track_tok_per_s", "tok/s",
               {("batched", "video"): 1000.0, ("per_request", "video"): 900.0},
               samples={("batched", "video"): (950.0, 1000.0, 1100.0)})
    fig, ax = _axis(run, "encode")
    labels = [t.get_text() for t in ax.texts]
    assert "n=3" in labels and "n=1" in labels  # the lone value is said to be one
    caps = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(caps) == 1  # one bar has samples; the n=1 bar has no invented spread
    seg = caps[0].lines[2][0].get_segments()[0]
    assert (seg[0][1], seg[1][1]) == (950.0, 1100.0)


def test_default_and_legacy_strategies_are_labelled_in_the_legend():
    run = _run("bench_inject.Inject.time_inject", "seconds",
               {("masked_scatter", "video"): 2e-4, ("where_index", "video"): 1.5e-4,
                ("cumsum_index_copy", "video"): 2.5e-4})
    fig, ax = _axis(run, "inject")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "masked_scatter (default)"  # the default first
    assert "where_index (legacy)" in legend and "cumsum_index_copy" in legend
    assert strategy_label("default") == "default" and strategy_label("legacy") == "legacy"


def test_axis_helpers():
    assert use_log([1.0, 31.0]) and not use_log([1.0, 29.0]) and not use_log([5.0])
    assert axis_unit("seconds", [2e-6, 9e-6]) == (1e-6, "µs")
    assert axis_unit("tok/s", [1.0, 2.0]) == (1.0, "tok/s")
