"""Does the vendor comparison work for any number of GPU backends?

One reference backend (``core.backends.VENDOR_REFERENCE``, CUDA) and any number of others:
the comparison gives each other backend's ratio to the reference, the comment has one
column per backend present, the vendor chart draws 1..N backends. A third backend (``xpu``)
is a ``Backend`` row passed in, not a change to the global table, and needs nothing else.
Also: comparison JSON of the older two-vendor shape (``cuda_*``/``rocm_*``) still reads.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from vlmpath.compare.comparison import ComparisonReport, CrossVendorRow
from vlmpath.compare.records import Fingerprint, MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.backends import BACKENDS, backend
from vlmpath.render.comment import render_markdown, render_terminal
from vlmpath.render.report_charts import vendor_chart
from vlmpath.render.report_figure import figure_marks, figure_notes

TH = Thresholds.default()
TOK = "bench_embed.EmbedRoutine.track_tok_per_s"
XPU = dataclasses.replace(backend("cuda"), name="xpu", label="XPU", smi=("xpu-smi",), toolkit_key=None, hatch="..")
WITH_XPU = BACKENDS + (XPU,)
MACHINES = {"cuda-h200": "cuda", "rocm-mi300x": "rocm", "xpu-max1550": "xpu"}


def _run(commit: str, values: dict[str, tuple[float, float]]) -> RunResults:
    """Two cases (presets a, b) per machine; the backend from the fingerprint, as a run writes it."""
    return RunResults(commit=commit, machines=tuple(
        MachineRun(machine=name, commit=commit, fingerprint=Fingerprint(backend=MACHINES[name]), metrics=tuple(
            Metric(machine=name, benchmark=TOK, params=(("preset", p),), unit="tok/s", value=v)
            for p, v in zip("ab", vals)))
        for name, vals in values.items()))


BASE = _run("b" * 40, {"cuda-h200": (1000.0, 1000.0), "rocm-mi300x": (900.0, 900.0), "xpu-max1550": (500.0, 500.0)})
HEAD = _run("h" * 40, {"cuda-h200": (1000.0, 1000.0), "rocm-mi300x": (900.0, 900.0), "xpu-max1550": (500.0, 250.0)})


def test_a_third_backend_row_gets_its_own_ratios():
    rows = compare(BASE, HEAD, TH, backends=WITH_XPU).cross_vendor
    got = {(r.other, dict(r.params)["preset"]): r for r in rows}
    assert set(got) == {("rocm", "a"), ("rocm", "b"), ("xpu", "a"), ("xpu", "b")}
    assert all(r.reference == "cuda" and r.reference_machine == "cuda-h200" for r in rows)
    assert got["xpu", "b"].head_ratio == pytest.approx(0.25) and got["xpu", "b"].flagged
    assert got["xpu", "b"].other_change == pytest.approx(-0.5) and got["xpu", "b"].reference_change == 0.0
    assert not any(r.flagged for k, r in got.items() if k != ("xpu", "b"))
    # The XPU machine is judged in the GPU band because its row says GPU.
    (xpu,) = [m for m in compare(BASE, HEAD, TH, backends=WITH_XPU).machines if m.machine == "xpu-max1550"]
    assert {c.factor for c in xpu.comparisons} == {TH.gpu_factor}
    # The global table has no xpu: nothing about it is compared there (the machine counts as CPU).
    assert {r.other for r in compare(BASE, HEAD, TH).cross_vendor} == {"rocm"}


def _table(md: str) -> tuple[list[str], list[list[str]]]:
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("### ") and "ratio" in ln)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("| "))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    table = [ln for ln in lines[first:end] if ln.startswith("| ")]
    split = [[c.strip() for c in ln.strip("|").split("|")] for ln in table]
    return lines[start], split[0], split[1:]


def test_the_comment_has_one_column_per_backend_present():
    report = compare(BASE, HEAD, TH, backends=WITH_XPU)
    title, header, rows = _table(render_markdown(report))
    assert title == "### ROCm · XPU / CUDA ratio"
    assert header == ["case", "metric", "machines", "ROCm/CUDA base → head", "XPU/CUDA base → head",
                      "CUDA change", "ROCm change", "XPU change"]
    assert len(rows) == 2  # one per case, not one per pair
    flagged = rows[0]  # flagged cases first
    assert flagged[0].endswith("preset=b\\)") and flagged[2] == "cuda\\-h200 / rocm\\-mi300x / xpu\\-max1550"
    assert "⚠️" in flagged[4] and "⚠️" not in flagged[3] and "0.5 → 0.25 ⚠️" == flagged[4]
    assert "CROSS-VENDOR:" in render_terminal(report) and "xpu/cuda ratio 0.5 -> 0.25" in render_terminal(report)
    # Two backends present: no XPU column at all.
    two = compare(BASE, HEAD, TH)
    title, header, rows = _table(render_markdown(two))
    assert title == "### ROCm / CUDA ratio" and header[3:] == ["ROCm/CUDA base → head", "CUDA change", "ROCm change"]


def test_two_machines_of_one_backend_share_a_cell_each_named():
    values = {"cuda-h200": (1000.0, 1000.0), "rocm-mi300x": (900.0, 900.0), "rocm-mi250": (800.0, 800.0)}
    machines = {**MACHINES, "rocm-mi250": "rocm"}
    runs = [RunResults(commit=c, machines=tuple(
        MachineRun(machine=n, commit=c, fingerprint=Fingerprint(backend=machines[n]), metrics=tuple(
            Metric(machine=n, benchmark=TOK, params=(("preset", p),), unit="tok/s", value=v) for p, v in zip("ab", vs)))
        for n, vs in values.items())) for c in ("b" * 40, "h" * 40)]
    _, header, rows = _table(render_markdown(compare(*runs, TH)))
    assert len(rows) == 2 and "(rocm\\-mi300x)" in rows[0][3] and "(rocm\\-mi250)" in rows[0][3]


def test_comparison_json_round_trips_and_the_two_vendor_shape_still_reads():
    report = compare(BASE, HEAD, TH, backends=WITH_XPU)
    assert ComparisonReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    old = {"benchmark": TOK, "params": [["preset", "a"]], "unit": "tok/s", "cuda_machine": "cuda-h200",
           "rocm_machine": "rocm-mi300x", "base_ratio": 0.9, "head_ratio": 0.45, "cuda_change": 0.0,
           "rocm_change": -0.5, "flagged": True}
    row = CrossVendorRow.from_dict(old)
    assert (row.reference, row.reference_machine, row.other, row.other_machine) == \
        ("cuda", "cuda-h200", "rocm", "rocm-mi300x")
    assert (row.reference_change, row.other_change, row.params) == (0.0, -0.5, (("preset", "a"),))
    data = {**report.to_dict(), "cross_vendor": [old]}
    assert ComparisonReport.from_dict(data).cross_vendor == (row,)


def _only(run: RunResults, names: set[str]) -> RunResults:
    return dataclasses.replace(run, machines=tuple(m for m in run.machines if m.machine in names))


@pytest.mark.parametrize("names, ratios", [
    ({"cuda-h200"}, []),
    ({"cuda-h200", "rocm-mi300x"}, ["ROCm/CUDA 0.90"]),
    ({"cuda-h200", "rocm-mi300x", "xpu-max1550"}, ["ROCm/CUDA 0.90", "XPU/CUDA 0.50", "XPU/CUDA 0.25"]),
])
def test_the_vendor_chart_draws_one_to_n_backends(names, ratios):
    fig = vendor_chart(_only(HEAD, names), thresholds=TH, backends=WITH_XPU)
    assert fig.get_suptitle().startswith("CUDA vs ROCm vs XPU")
    (ax,) = fig.axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:len(names)] == [f"{n} ({MACHINES[n].upper()})" for n in sorted(names, key=list(MACHINES).index)]
    drawn = sorted({m.rsplit(": ", 1)[1] for m in figure_marks(fig) if m.startswith("ratio ")})
    assert drawn == sorted(set(ratios))
    notes = figure_notes(fig)
    assert (len(names) == 1) == any("only CUDA results" in n and "no ROCM or XPU machine" in n for n in notes)
