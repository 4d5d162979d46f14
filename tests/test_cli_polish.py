"""Bad input read at a glance: one line, a "did you mean" for a close name, refused before
torch is imported; the port range; the trace: prefix; revisions for report --base; the
measure table's pipeline column."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.cli import main
from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.render.tables import measure_table, pipeline_name
from vlmpath.suite.inputs import check_choices
from vlmpath.suite.record import CaseRecord

ROOT = Path(__file__).resolve().parents[1]


def test_a_close_name_gets_a_did_you_mean_and_a_far_one_does_not():
    assert "(did you mean 'batched'?)" in str(UnknownNameError("encode strategy", "batchd", ["batched", "per_request"]))
    assert "did you mean" not in str(UnknownNameError("encode strategy", "zzz", ["batched", "per_request"]))


def test_check_choices_refuses_unknown_names_and_a_path_without_trace(tmp_path):
    check_choices({"encode": ["batched"], "hash": ["forwarded"]}, ["video", "trace:x.jsonl"])  # all known
    with pytest.raises(UnknownNameError, match=r"unknown inject strategy 'masked_scater' \(did you mean 'masked_scatter'"):
        check_choices({"inject": ["masked_scater"]}, None)
    with pytest.raises(UnknownNameError, match="did you mean 'video'"):
        check_choices({}, ["vidoe"])
    trace = tmp_path / "t.jsonl"
    for given in (str(trace), "t.jsonl", "traces/t"):
        with pytest.raises(VlmpathError, match=rf"a trace file is named trace:PATH, e.g. --workload trace:{given}"):
            check_choices({}, [given])


def test_measure_refuses_a_bad_name_before_importing_torch():
    code = ("import sys\nfrom vlmpath.cli import main\n"
            "rc = main(['measure', '--encode', 'batchd', '--workload', 'video'])\n"
            "print('RC', rc, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.stdout.strip().endswith("RC 2 False"), proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "did you mean 'batched'" in err[0]


def test_profile_refuses_each_bad_value_in_one_line_before_importing_torch(tmp_path):
    """Every value of `vlmpath profile` (engine, case form and names, passes, top, out) is
    judged before the profiler's imports load torch; one interpreter runs them all."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    bad = {"bogus-engine": (["embed:default/video", "--engine", "bogus"], "unknown engine 'bogus'"),
           "close-engine": (["embed:default/video", "--engine", "referenc"], "did you mean 'reference'"),
           "form": (["notacase"], "write PATH:VARIANT/PRESET"),
           "path": (["fold:default/video"], "write PATH:VARIANT/PRESET"),
           "pipeline": (["embed:nope/video"], "unknown pipeline 'nope'"),
           "strategy": (["encode:batchd/video"], "did you mean 'batched'"),
           "preset": (["embed:default/vidoe"], "did you mean 'video'"),
           "passes": (["embed:default/video", "--passes", "0"], "--passes must be at least 1"),
           "top": (["embed:default/video", "--top", "-3"], "--top must be at least 1"),
           "out": (["embed:default/video", "--out", str(blocker)], "a file is in the way")}
    code = ("import contextlib, io, json, sys\nfrom vlmpath.cli import main\nout = {}\n"
            "for name, argv in json.loads(sys.argv[1]).items():\n"
            "    err = io.StringIO()\n"
            "    with contextlib.redirect_stderr(err):\n"
            "        rc = main(['profile', *argv])\n"
            "    out[name] = [rc, err.getvalue(), 'torch' in sys.modules]\n"
            "print(json.dumps(out))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps({k: v[0] for k, v in bad.items()})],
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    got = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else proc.stderr
    assert isinstance(got, dict), got
    for name, (_, want) in bad.items():
        rc, err, torch_loaded = got[name]
        lines = err.strip().splitlines()
        assert (rc, len(lines), torch_loaded) == (2, 1, False), (name, got[name])
        assert lines[0].startswith("vlmpath profile: error: ") and want in lines[0], (name, lines)


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_refuses_a_port_out_of_range_in_one_line(port, capsys, tmp_path):
    assert main(["serve", "--port", port, "--html-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--port must be" in err[0] and "65535" in err[0]


def test_report_base_takes_a_revision_as_compare_does(capsys, tmp_path, monkeypatch):
    results = ROOT / "tests" / "fixtures" / "asv_report_results"  # commits of another repository
    monkeypatch.chdir(ROOT)  # a git checkout: HEAD resolves
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    assert main(["report", "--base", "HEAD", "--head", "HEAD", "--results", str(results),
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "not a hex sha" not in err and head in err  # resolved, then no results for it


def test_the_measure_table_says_which_pipeline_each_row_ran():
    from vlmpath.engines.pipelines import LEGACY_PIPELINE, Pipeline

    rows = [CaseRecord("video", pipeline=Pipeline().to_dict()), CaseRecord("video", pipeline=LEGACY_PIPELINE.to_dict()),
            CaseRecord("video", pipeline=Pipeline(encode="per_request").to_dict())]
    assert [pipeline_name(r) for r in rows] == ["default", "legacy", "custom"]
    table = measure_table(rows).splitlines()
    assert table[0].split()[:3] == ["engine", "workload", "pipeline"]
    assert [line.split()[2] for line in table[2:5]] == ["default", "legacy", "custom"]


def test_a_busy_machine_is_warned_about_once_per_measure_not_once_per_case(monkeypatch, capsys):
    import vlmpath.suite.engine_run as engine_run

    def fake(cases, spec, **kw):  # what was measured does not matter here, only the load seen
        return [CaseRecord(c.workload if isinstance(c.workload, str) else "w", load_avg=999.0) for c in cases]

    monkeypatch.setattr(engine_run, "measure_cases", fake)
    assert main(["measure", "--workload", "video", "--workload", "mixed", "--workload", "cache_reuse"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "WARNING" in line]
    import re

    n = re.search(r"WARNING \((\d+) of (\d+) cases measured on a busy machine", warnings[0]) if warnings else None
    assert len(warnings) == 1 and n and n.group(1) == n.group(2) and int(n.group(1)) >= 3
