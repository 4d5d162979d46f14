"""Does ``ci pr --serve`` serve each side's own tree and judge the serve rows in the PR comment?

Small real git repositories and the fake suite runner of tests/test_ci_flow.py; the servers
are faked (``pr.serve.interleaved`` replaced: the real rounds are tests/test_serve_e2e.py):
the fake reads the greedy texts from the tree on the server's ``PYTHONPATH``, so serving
the wrong side's tree shows as a wrong verdict. An unchanged pair is green and its serve
rows judged; a head whose served outputs differ is red on the across-side agreement,
naming the workload, with the chart drawn; a model directory that is not one is one line
(exit 2) before anything is measured.
"""

from __future__ import annotations

import json
import os
import re

from test_ci_flow import MACHINE, FakeSuite, commit_value, repo  # noqa: F401 - the fixture

from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.pr import flow as ci_flow
from vlmpath.pr import serve as pr_serve
from vlmpath.pr.options import PrOptions
from vlmpath.pr.serve import ServeOptions
from vlmpath.serving.run_file import SCHEMA, write_run


def _fake_rounds(seen: list):
    def interleaved(sides, settings, rounds, out_dir, progress=lambda _m: None):
        files = {name: [] for name in sides}
        for name, spec in sides.items():
            seen.append((name, spec.pythonpath))
            text = (os.path.join(spec.pythonpath[0], "vlmpath", "__init__.py"))
            acc = float(re.search(r"ACCURACY = (\S+)", open(text).read()).group(1))
            outputs = ["ab", "cd"] if acc == 1.0 else ["ab", "cX"]  # a changed tree answers differently
            for i in range(rounds):
                case = {"workload": "video", "concurrency": 1, "prompts": 2, "repeats": 1, "completed": 2,
                        "errors": 0, "early_stops": 0, "request_per_s": 1.0 + 0.01 * i, "input_tok_per_s": 100.0,
                        "output_tok_per_s": 8.0 + 0.1 * i, "ttft_p50_s": 0.1, "ttft_p99_s": 0.2, "itl_p50_s": 0.01,
                        "itl_p99_s": 0.02, "agreement_solo": 1.0, "first_diff_solo": None, "error": None,
                        "samples": {"output_tok_per_s": [8.0 + 0.1 * i]}, "rids": [0, 1], "outputs": outputs}
                path = out_dir / f"{name}-{i}.json"
                write_run(path, {"schema": SCHEMA, "server": {"kind": "transformers"},
                                 "solo": {"video": outputs}, "cases": [case]})
                files[name].append(path)
        return files
    return interleaved


def _model(tmp_path):
    m = tmp_path / "model"
    m.mkdir()
    (m / "config.json").write_text("{}")
    return str(m)


def _run(repo, tmp_path, base, head, monkeypatch, seen):  # noqa: F811
    monkeypatch.setattr(pr_serve, "interleaved", _fake_rounds(seen))
    opts = PrOptions(base, head, out_dir=tmp_path / "out", repo=repo, machine=MACHINE, charts=False,
                     results_dir=tmp_path / "store", serve=ServeOptions(_model(tmp_path), rounds=2))
    return ci_flow.run_pr(opts, run_suite=FakeSuite(), env={"PATH": os.environ["PATH"]})


def _serve_rows(res) -> dict[str, Verdict]:
    return {c.benchmark.rsplit(".", 1)[1]: c.verdict for c in res.report.all() if c.benchmark.startswith("serve.")}


def test_an_unchanged_pair_is_green_with_its_serve_rows_judged(repo, tmp_path, monkeypatch):  # noqa: F811
    a = commit_value(repo, 1.0, "a")
    b = commit_value(repo, 1.0, "b")
    seen = []
    res = _run(repo, tmp_path, a, b, monkeypatch, seen)
    # Each side's own worktree src/ is what its server imports first.
    assert [name for name, _ in seen] == ["base", "head"] and seen[0][1] != seen[1][1]
    assert all(pp[0].endswith("src") for _, pp in seen)
    rows = _serve_rows(res)
    assert rows["track_serve_agreement_base"] == Verdict.UNCHANGED and res.exit_code == 0
    assert "track_serve_output_tok_per_s" in rows
    assert json.loads((tmp_path / "out" / "run.json").read_text())["serve"]


def test_a_head_whose_served_outputs_differ_is_red_naming_the_workload(repo, tmp_path, monkeypatch):  # noqa: F811
    a = commit_value(repo, 1.0, "a")
    b = commit_value(repo, 0.6, "b")
    res = _run(repo, tmp_path, a, b, monkeypatch, [])
    assert _serve_rows(res)["track_serve_agreement_base"] == Verdict.REGRESSION and res.exit_code == 1
    assert any(n.endswith("served outputs differ: video c=1, first at character 1") for n in res.notes)
    reg = next(c for c in res.report.regressions if c.benchmark.endswith("track_serve_agreement_base"))
    assert dict(reg.params)["workload"] == "video"
    assert (tmp_path / "out" / "serve" / "serve-chart.png").stat().st_size > 10_000
    comment = (tmp_path / "out" / "comment.md").read_text()
    row = next(ln for ln in comment.splitlines() if "track\\_serve\\_agreement\\_base" in ln)
    assert "workload=video" in row and "regression" in row


def test_a_model_directory_that_is_not_one_is_one_line_before_measuring(tmp_path, capsys):
    code = main(["ci", "pr", "--base", "HEAD", "--head", "HEAD", "--serve", str(tmp_path / "nope"),
                 "--out", str(tmp_path / "out"), "--repo", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--model" in err and "no config.json" in err
