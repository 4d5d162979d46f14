"""Do several engines and releases land side by side in one table and one chart?

``vlmpath measure --engine A --engine B --chart FILE`` (issue 23, item 3): the chart has one
bar per engine label and workload with its accuracy written on it, a failed case is the
red marker, and syncs sit in the panel below; the CLI refuses a chart it cannot write and
several engines with one ``--engine-src`` tree. The real releases side by side are the
command in docs/side-by-side.md on the installed engine envs.
"""

from __future__ import annotations

import pytest

from vlmpath.cli import main
from vlmpath.render.engines_chart import engines_chart, engines_figure
from vlmpath.render.report_figure import figure_marks
from vlmpath.suite.record import CaseRecord


def rec(engine: str, workload: str, **kw) -> CaseRecord:
    base = dict(tok_per_s=1000.0, accuracy=1.0, syncs=0, encoder_calls=2)
    return CaseRecord(workload=workload, engine=engine, **{**base, **kw})


def test_every_release_is_a_bar_per_workload_with_its_accuracy_and_syncs(tmp_path):
    records = [rec("reference", "video"), rec("sglang==0.5.23", "video", syncs=1),
               rec("vllm==0.11.1", "video", syncs=2, accuracy=0.5),
               rec("vllm==0.33.0", "video", error="RuntimeError: boom", tok_per_s=None)]
    marks = figure_marks(engines_figure(records))
    assert "reference video: tok/s 1000, accuracy 1.00" in marks
    assert "vllm==0.11.1 video: tok/s 1000, accuracy 0.50" in marks
    assert "sglang==0.5.23 video: syncs 1" in marks and "vllm==0.11.1 video: syncs 2" in marks
    assert "vllm==0.33.0 video: failed" in marks
    assert "direction tok/s: tok/s (higher is better)" in marks
    out = engines_chart(records, tmp_path / "engines.svg")
    assert out.read_text().count("<svg") == 1


def test_the_cli_refuses_what_it_cannot_do_before_measuring(tmp_path, capsys):
    assert main(["measure", "--engine", "reference", "--chart", str(tmp_path / "x.pdf")]) == 2
    assert "name a .png or .svg file" in capsys.readouterr().err
    assert main(["measure", "--engine", "sglang", "--engine", "vllm", "--engine-src", str(tmp_path)]) == 2
    assert "--engine-src measures one engine tree" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no records"):
        engines_chart([], tmp_path / "y.png")


def test_the_references_strategies_are_series_of_their_own():
    records = [rec("reference", "video", pipeline={"encode": "batched"}),
               rec("reference", "video", pipeline={"encode": "per_request"}, tok_per_s=500.0),
               rec("sglang==0.5.23", "video")]
    marks = figure_marks(engines_figure(records))
    assert "reference/batched video: tok/s 1000, accuracy 1.00" in marks
    assert "reference/per_request video: tok/s 500, accuracy 1.00" in marks
