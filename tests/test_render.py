"""render: PR comment body (headline, tables, escaping, size limit), terminal table, JSON."""

from __future__ import annotations

import json
import re

import pytest

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.records import Fingerprint, MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.render.comment import GITHUB_COMMENT_LIMIT, MARKER, render_json, render_markdown, render_terminal
from vlmpath.render.escape import md_escape
from vlmpath.render.fmt import fmt_pair

CFG = Thresholds.default()
EMBED = "bench_embed.Embed.track_tok_per_s"
ACC = "bench_encode.Encode.track_accuracy"


def _m(machine, bench, unit, value, params=(), **kw):
    return Metric(machine=machine, benchmark=bench, params=params, unit=unit, value=value, **kw)


def _run(commit, machines: dict[str, list[Metric]], fps=None) -> RunResults:
    fps = fps or {}
    return RunResults(commit=commit, machines=tuple(
        MachineRun(machine=n, commit=commit, metrics=tuple(ms), fingerprint=fps.get(n))
        for n, ms in machines.items()))


def _cells(row: str) -> list[str]:
    """Split a markdown table row on pipes that are not backslash-escaped."""
    assert row.startswith("| ") and row.endswith(" |"), row
    return re.split(r"(?<!\\)\|", row[1:-1])


def _regression_report() -> ComparisonReport:
    w = (("workload", "multi_region"),)
    base = _run("a" * 40, {
        "rocm-mi300x": [_m("rocm-mi300x", EMBED, "tok/s", 9443.0, w), _m("rocm-mi300x", ACC, "fraction", 1.0),
                        _m("rocm-mi300x", "b.B.time_same", "seconds", 0.01)],
        "cuda-h200": [_m("cuda-h200", EMBED, "tok/s", 10000.0, w), _m("cuda-h200", ACC, "fraction", 1.0)],
    }, fps={"rocm-mi300x": Fingerprint(backend="rocm", torch="2.6.0")})
    head = _run("b" * 40, {
        "rocm-mi300x": [_m("rocm-mi300x", EMBED, "tok/s", 857.0, w), _m("rocm-mi300x", ACC, "fraction", 0.25),
                        _m("rocm-mi300x", "b.B.time_same", "seconds", 0.0101)],
        "cuda-h200": [_m("cuda-h200", EMBED, "tok/s", 10100.0, w), _m("cuda-h200", ACC, "fraction", 1.0)],
    }, fps={"rocm-mi300x": Fingerprint(backend="rocm", torch="2.7.1")})
    return compare(base, head, CFG)


def test_comment_starts_with_marker_then_the_verdict_in_words():
    md = render_markdown(_regression_report())
    lines = md.splitlines()
    assert lines[0] == MARKER
    assert lines[1].startswith("**2 regressions on rocm\\-mi300x**: ")
    assert "tok/s -90.9%" in lines[1]
    assert "1.00 -> 0.25" in lines[1]
    # Warnings sit above the tables.
    warn = md.index("toolchain changed between base and head: torch 2\\.6\\.0 -> 2\\.7\\.1; timings not comparable")
    assert warn < md.index("### What changed") < md.index("### ROCm / CUDA ratio") < md.index("<details>")


def test_compact_table_has_only_changes_and_details_have_everything():
    rep = _regression_report()
    md = render_markdown(rep)
    compact = md[md.index("### What changed"):md.index("### ROCm / CUDA ratio")]
    rows = [line for line in compact.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2 and all("🔴 regression" in r for r in rows)
    assert all(len(_cells(r)) == 7 for r in rows)
    details = md[md.index("<details>"):]
    assert details.count("<details>") == details.count("</details>") == 2
    assert "time\\_same" in details and "⚪ unchanged" in details
    cross = md[md.index("### ROCm / CUDA ratio"):md.index("<details>")]
    assert "0.944" in cross and "0.0849" in cross and "⚠️" in cross


def test_no_regressions_headline():
    base = _run("a" * 40, {"cpu-xyz": [_m("cpu-xyz", f"b.B.time_{i}", "seconds", 1.0) for i in range(43)],
                           "cuda-h200": []})
    head_metrics = [_m("cpu-xyz", f"b.B.time_{i}", "seconds", 0.5 if i < 3 else 1.0) for i in range(43)]
    head = _run("b" * 40, {"cpu-xyz": head_metrics, "cuda-h200": []})
    md = render_markdown(compare(base, head, CFG))
    assert md.splitlines()[1] == "**No regressions**: 3 improvements, 40 unchanged on cpu\\-xyz, cuda\\-h200"


def test_partial_comparison_is_visible_in_the_headline():
    base = _run("a" * 40, {"cpu-a": [_m("cpu-a", "b.B.time_x", "seconds", 1.0)],
                           "cuda-h200": [_m("cuda-h200", "b.B.time_x", "seconds", 1.0)]})
    head = _run("b" * 40, {"cpu-a": [_m("cpu-a", "b.B.time_x", "seconds", 1.0)]})
    md = render_markdown(compare(base, head, CFG))
    assert "partial comparison" in md.splitlines()[1]
    assert "no head results" in md[:md.index("<details>")]


MALICIOUS = "x|y`z`<script>alert(1)</script>*b*_i_[l](http://e)\n# h @someone :rocket:"


def test_malicious_names_are_escaped():
    params = (("w|<img src=x onerror=1>", MALICIOUS),)
    base = _run("a" * 40, {MALICIOUS: [_m(MALICIOUS, "b.B.time_" + MALICIOUS, MALICIOUS, 1.0, params)]})
    head = _run("b" * 40, {MALICIOUS: [_m(MALICIOUS, "b.B.time_" + MALICIOUS, MALICIOUS, 9.0, params)]})
    md = render_markdown(compare(base, head, CFG))
    for raw in ("<script>", "<img", "@someone", "`z`", "*b*", "_i_", "](http", "\n# h", ":rocket:"):
        assert raw not in md, raw
    table_rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
    header_widths = {7}
    for row in table_rows:
        assert len(_cells(row)) in header_widths, row
    summary = next(line for line in md.splitlines() if line.startswith("<summary>"))
    assert summary.count("<") == summary.count(">") == 4  # only our own tags
    # The escaped text still carries the name (a reader can find the benchmark).
    assert "alert\\(1\\)" in md


def test_md_escape_neutralises_every_markdown_and_html_special():
    s = md_escape("a|b`c*d_e<f>g&h[i]j\\k\nl@m")
    assert re.search(r"(?<!\\)[|`*_\[\]]", s) is None
    assert "<" not in s and ">" not in s and "\n" not in s and "@" not in s


def test_huge_report_stays_under_the_comment_limit():
    n = 20_000
    names = [f"bench_embed.Embed.track_tok_per_s_{i:05d}" for i in range(n)]
    base = _run("a" * 40, {"cuda-h200": [_m("cuda-h200", b, "tok/s", 1000.0, (("workload", "w" * 20),)) for b in names]})
    head_vals = [500.0 if i % 100 == 0 else 1000.0 for i in range(n)]  # 200 regressions
    head = _run("b" * 40, {"cuda-h200": [_m("cuda-h200", b, "tok/s", v, (("workload", "w" * 20),))
                                         for b, v in zip(names, head_vals)]})
    rep = compare(base, head, CFG)
    assert len(rep.regressions) == 200
    md = render_markdown(rep)
    assert len(md) <= 65000 < GITHUB_COMMENT_LIMIT
    m = re.search(r"truncated: (\d+) rows omitted; full comparison in the artifact", md)
    assert m
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
    compact_rows = [r for r in rows if r.startswith("| cuda\\-h200 | bench")]
    detail_rows = [r for r in rows if r.startswith("| bench")]
    # Every row is either shown or counted as omitted.
    assert len(compact_rows) + len(detail_rows) + int(m.group(1)) == 200 + n
    assert detail_rows and "more rows omitted" in md
    # Folded rows go first: the compact table of regressions survives whole.
    compact = md[md.index("### What changed"):md.index("<details>")]
    assert compact.count("🔴 regression") == 200
    assert md.splitlines()[0] == MARKER and md.splitlines()[1].startswith("**200 regressions")
    assert md.count("<details>") == md.count("</details>") == 1


def test_small_report_is_not_truncated_and_limit_is_respected_when_tiny():
    rep = _regression_report()
    assert "truncated" not in render_markdown(rep)
    small = render_markdown(rep, max_chars=1500)
    assert len(small) <= 1500 and "truncated:" in small and small.startswith(MARKER)


def test_chart_link():
    md = render_markdown(_regression_report(), chart_url="https://example.org/run/1 (x).png")
    assert "[Charts](https://example.org/run/1%20%28x%29.png)" in md


def test_terminal_table_lists_every_case_with_verdicts():
    out = render_terminal(_regression_report())
    assert "2 regressions on rocm-mi300x" in out and "**" not in out
    assert "WARNING: rocm-mi300x: toolchain changed between base and head: torch 2.6.0 -> 2.7.1" in out
    rows = [line for line in out.splitlines() if line.startswith(("rocm-", "cuda-"))]
    assert len(rows) == 5
    assert sum("regression" in r for r in rows) == 2
    assert "CROSS-VENDOR" in out


def test_a_unit_without_a_trusted_rule_is_said_untrusted_and_never_green():
    rep = compare(_run("a" * 40, {"cpu-a": [_m("cpu-a", "b.B.track_r", "furlongs", 2.0)]}),
                  _run("b" * 40, {"cpu-a": [_m("cpu-a", "b.B.track_r", "furlongs", 1.0)]}), CFG)
    for text in (render_terminal(rep), render_markdown(rep)):
        assert "untrusted definition" in text and "'furlongs'" in text
        assert "No regressions" not in text and "0 improvements" in text
    assert rep.exit_code() == 3


def test_json_output_round_trips():
    rep = _regression_report()
    assert ComparisonReport.from_dict(json.loads(render_json(rep))) == rep


@pytest.mark.parametrize("b,h,unit,expect", [
    (0.995, 0.99, "fraction", ("0.995", "0.990")),
    (1.0, 0.25, "fraction", ("1.00", "0.25")),
    (0.0123, 0.0124, "seconds", ("12.3 ms", "12.4 ms")),
    (9443.0, 857.0, "tok/s", ("9443", "857")),
    (3 * 2**30, 3 * 2**30 + 2**20, "bytes", ("3 GiB", "3.001 GiB")),
    (None, 1.0, "syncs", ("—", "1")),
])
def test_fmt_pair_shows_a_difference_when_there_is_one(b, h, unit, expect):
    assert fmt_pair(b, h, unit) == expect


def test_escaping_keeps_entities_intact():
    assert md_escape("it's <a&b>") == "it's &lt;a&amp;b&gt;"
    from vlmpath.render.escape import html_escape
    assert html_escape("o'k <b> #1 @x") == "o&#39;k &lt;b&gt; &#35;1 &#64;x"


SPLIT = ("RuntimeError: split_with_sizes expects split_sizes to sum exactly to 256 (input tensor's size at "
         "dimension 0), but got split_sizes=[128, 64]")


def _failing_report(error=SPLIT) -> ComparisonReport:
    p = (("pipeline", "default"), ("preset", "multi_region"))
    names = ("bench_embed.EmbedRoutine.track_accuracy", "bench_embed.EmbedRoutine.track_syncs",
             "bench_embed.EmbedRoutine.track_tok_per_s")
    units = ("fraction", "syncs", "tok/s")
    base = _run("a" * 40, {"cpu-x": [_m("cpu-x", n, u, 1.0, p) for n, u in zip(names, units)]})
    head = _run("b" * 40, {"cpu-x": [_m("cpu-x", names[0], "fraction", 0.6, p)]
                           + [_m("cpu-x", n, u, None, p, error=error) for n, u in zip(names[1:], units[1:])]})
    return compare(base, head, CFG)


def test_headline_names_a_failed_case_once_with_its_error():
    # The case failed on head: its accuracy (measured before the failure) is not compared as
    # a row, only said as the case's finding, and its counters are not attributed the failure
    # one by one (issue 27, point 4).
    md = render_markdown(_failing_report())
    first = md.splitlines()[1]
    assert first.startswith("**1 newly failing on cpu\\-x**: ")
    assert (md_escape("EmbedRoutine default multi_region") + " (" + md_escape("accuracy 1.00 -> 0.60") + ") failing: "
            + md_escape("RuntimeError: split_with_sizes expects")) in first
    assert first.count("split\\_with\\_sizes") == 1 and "…" in first
    assert "but got" not in first  # clipped: the whole message is in the tables / JSON
    # Its accuracy is said once, as the failed case's finding (report_failed), never as a row.
    assert first.count("accuracy") == 1 and "regression" not in first and "syncs" not in first


def test_changes_table_and_details_show_the_failed_case_once_clipped():
    md = render_markdown(_failing_report())
    changed = md[md.index("### What changed"):md.index("<details>")]
    rows = [r for r in changed.splitlines() if "newly failing" in r]
    assert len(rows) == 1 and len(_cells(rows[0])) == 7
    assert md_escape("bench_embed.EmbedRoutine (pipeline=default") in rows[0]
    verdict = _cells(rows[0])[-1].strip()
    assert verdict.startswith("💥 newly failing: " + md_escape("accuracy 1.00 -> 0.60") + "; "
                              + md_escape("RuntimeError: split_with_sizes expects split_sizes"))
    assert verdict.endswith("…") and len(verdict.replace("\\", "")) <= len("💥 newly failing: accuracy 1.00 -&gt; 0.60; ") + 120
    assert "improvement" not in changed and "regression" not in changed.replace("regressions", "")
    details = md[md.index("<details>"):]
    notes = [_cells(r)[-1] for r in details.splitlines() if r.startswith("| ") and "newly failing" in r]
    assert len(notes) == 1 and "split\\_with\\_sizes" in notes[0]
    [row] = json.loads(render_json(_failing_report()))["machines"][0]["comparisons"]
    assert (row["error"], row["case"], row["left_out"]) == (SPLIT, "bench_embed.EmbedRoutine", 2)


def test_failure_message_is_escaped_everywhere():
    md = render_markdown(_failing_report(error="Boom: " + MALICIOUS))
    for raw in ("<script>", "@someone", "`z`", "*b*", "_i_", "](http", "\n# h", ":rocket:"):
        assert raw not in md, raw
    for row in (r for r in md.splitlines() if r.startswith("| ") and "---" not in r):
        assert len(_cells(row)) == 7, row
    assert "alert\\(1\\)" in md.splitlines()[1]


def test_terminal_shows_why_it_failed():
    text = render_terminal(_failing_report())
    assert "1 newly failing on cpu-x" in text.splitlines()[1]
    row = next(r for r in text.splitlines() if "bench_embed.EmbedRoutine (" in r and r.startswith("cpu-x"))
    assert "newly failing" in row and "RuntimeError: split_with_sizes expects" in row and row.endswith("…")


def test_failing_without_a_known_message_reads_as_before():
    md = render_markdown(_failing_report(error=None))
    first = md.splitlines()[1]
    assert "EmbedRoutine default multi\\_region newly failing" in first and "failing:" not in first
