"""Does the serve chart show each side's throughput per concurrency level as measured, readably?

Synthetic run files: each side's line goes through the median of its samples over the
rounds with n and the min-max spread; a failed level is a FAILED marker, never a point;
the axes name concurrency and output tok/s with "higher is better"; ``serve-compare
--chart`` writes the PNG.
"""

from __future__ import annotations

from vlmpath.cli import main
from vlmpath.render.report_figure import figure_marks
from vlmpath.render.serve_chart import serve_figure
from vlmpath.serving.run_file import SCHEMA, parse_run, write_run


def _case(workload: str, c: int, samples, errors: int = 0) -> dict:
    return {"workload": workload, "concurrency": c, "prompts": 2, "repeats": len(samples), "completed": 2,
            "errors": errors, "early_stops": 0, "request_per_s": 1.0, "input_tok_per_s": 10.0,
            "output_tok_per_s": sorted(samples)[len(samples) // 2], "ttft_p50_s": 0.1, "ttft_p99_s": 0.2,
            "itl_p50_s": 0.01, "itl_p99_s": 0.02, "agreement_solo": 1.0, "first_diff_solo": None,
            "error": "HTTP 500: boom" if errors else None, "samples": {"output_tok_per_s": list(samples)},
            "rids": [0, 1], "outputs": ["a", "b"]}


def _doc(cases) -> dict:
    return parse_run({"schema": SCHEMA, "server": {"kind": "transformers"}, "solo": {}, "cases": cases}, "t")


def test_each_side_is_its_medians_with_n_and_spread_and_a_failed_level_is_a_marker():
    base = [_doc([_case("video", 1, [10.0, 12.0]), _case("video", 4, [30.0])]),
            _doc([_case("video", 1, [11.0]), _case("video", 4, [32.0])])]
    head = [_doc([_case("video", 1, [5.0, 6.0]), _case("video", 4, [1.0], errors=1)])]
    fig = serve_figure(base, head)
    marks = figure_marks(fig)
    assert "base video: c=1 11, c=4 31" in marks  # medians over every round's samples
    assert "head video: c=1 5.5" in marks and "head video c=4: failed" in marks
    ax = fig.axes[0]
    assert "higher is better" in ax.get_ylabel() and "tok/s" in ax.get_ylabel()
    assert ax.get_xlabel() == "concurrency (requests in flight)"
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("n=3") == 1 and texts.count("n=2") == 2  # base c=1: 3 samples; c=4: 2; head c=1: 2
    bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    base_seg = bars[0].lines[2][0].get_segments()[0]
    assert (base_seg[0][1], base_seg[1][1]) == (10.0, 12.0)  # min to max of base's c=1 samples


def test_serve_compare_writes_the_chart(tmp_path, capsys):
    for side, tok in (("base", 10.0), ("head", 9.0)):
        write_run(tmp_path / f"{side}.json", {"schema": SCHEMA, "server": {"kind": "transformers"}, "solo": {},
                                              "cases": [_case("video", 1, [tok]), _case("video", 2, [2 * tok])]})
    chart = tmp_path / "out" / "serve.png"
    main(["serve-compare", "--base", str(tmp_path / "base.json"), "--head", str(tmp_path / "head.json"),
          "--chart", str(chart)])
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000
    assert f"wrote {chart}" in capsys.readouterr().out
