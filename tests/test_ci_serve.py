"""Does ``ci pr --serve`` serve each side's own tree and judge the serve rows in the PR comment?

Small real git repositories and the fake suite runner of tests/test_ci_flow.py; the servers
are faked (a stand-in for the child ``vlmpath serve-pair`` takes the arguments the flow
builds; the real rounds are tests/test_serve_e2e.py): it reads the greedy texts from the
tree on each side's path, so serving the wrong side's tree shows as a wrong verdict, and it
compares and draws with the real ``vlmpath serve-compare``. A child that dies or leaves a
round out is one error naming its log. An unchanged pair is green and its serve
rows judged; a head whose served outputs differ is red on the across-side agreement,
naming the workload, with the chart drawn; a model directory that is not one is one line
(exit 2) before anything is measured.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from test_ci_flow import MACHINE, FakeSuite, commit_value, repo  # noqa: F401 - the fixture

from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.pr import flow as ci_flow
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.options import PrOptions
from vlmpath.pr.serve import ServeOptions


# The stand-in for the child ``vlmpath serve-pair`` (``pr.serve.serve_rounds``): it takes the
# very arguments the flow builds, fakes only the servers and the rounds (reading each side's
# greedy texts from the tree first on its path), then compares and draws with the real
# ``vlmpath serve-compare``, as serve-pair does.
STAND_IN = r"""
import argparse, json, os, re, subprocess, sys
from vlmpath.serving.run_file import SCHEMA, write_run

p = argparse.ArgumentParser()
for flag in ("--launch", "--model", "--device", "--startup-timeout", "--max-tokens", "--python"):
    p.add_argument(flag)
p.add_argument("--rounds", type=int)
p.add_argument("--out")
p.add_argument("--base-pythonpath", action="append")
p.add_argument("--head-pythonpath", action="append")
p.add_argument("--workload", action="append")
p.add_argument("--concurrency", action="append", type=int)
a = p.parse_args(sys.argv[2:])
assert sys.argv[1] == "serve-pair", sys.argv
os.makedirs(a.out, exist_ok=True)
files = {}
for name, pp in (("base", a.base_pythonpath), ("head", a.head_pythonpath)):
    with open(os.path.join(os.path.dirname(a.out), "seen.jsonl"), "a") as fh:
        fh.write(json.dumps([name, pp]) + "\n")
    acc = float(re.search(r"ACCURACY = (\S+)", open(os.path.join(pp[0], "vlmpath", "__init__.py")).read()).group(1))
    outputs = ["ab", "cd"] if acc == 1.0 else ["ab", "cX"]  # a changed tree answers differently
    for i in range(a.rounds):
        case = {"workload": "video", "concurrency": 1, "prompts": 2, "repeats": 1, "completed": 2,
                "errors": 0, "early_stops": 0, "request_per_s": 1.0 + 0.01 * i, "input_tok_per_s": 100.0,
                "output_tok_per_s": 8.0 + 0.1 * i, "ttft_p50_s": 0.1, "ttft_p99_s": 0.2, "itl_p50_s": 0.01,
                "itl_p99_s": 0.02, "agreement_solo": 1.0, "first_diff_solo": None, "error": None,
                "samples": {"output_tok_per_s": [8.0 + 0.1 * i]}, "rids": [0, 1], "outputs": outputs}
        path = os.path.join(a.out, f"{name}-{i}.json")
        write_run(path, {"schema": SCHEMA, "server": {"kind": a.launch}, "solo": {"video": outputs}, "cases": [case]})
        files.setdefault(name, []).append(path)
sys.exit(subprocess.run([sys.executable, "-m", "vlmpath.cli", "serve-compare", "--base", *files["base"],
                         "--head", *files["head"], "--chart", os.path.join(a.out, "serve-chart.png")]).returncode)
"""


def _seen(tmp_path) -> list:
    path = tmp_path / "out" / "seen.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _model(tmp_path):
    m = tmp_path / "model"
    m.mkdir()
    (m / "config.json").write_text("{}")
    return str(m)


def _run(repo, tmp_path, base, head, stand_in=STAND_IN):  # noqa: F811
    script = tmp_path / "serve_pair_stand_in.py"
    script.write_text(stand_in)
    opts = PrOptions(base, head, out_dir=tmp_path / "out", repo=repo, machine=MACHINE, charts=False,
                     results_dir=tmp_path / "store", serve=ServeOptions(_model(tmp_path), rounds=2))
    return ci_flow.run_pr(opts, run_suite=FakeSuite(), env={"PATH": os.environ["PATH"]},
                          serve_command=(sys.executable, str(script)))


def _serve_rows(res) -> dict[str, Verdict]:
    return {c.benchmark.rsplit(".", 1)[1]: c.verdict for c in res.report.all() if c.benchmark.startswith("serve.")}


def test_an_unchanged_pair_is_green_with_its_serve_rows_judged(repo, tmp_path):  # noqa: F811
    a = commit_value(repo, 1.0, "a")
    b = commit_value(repo, 1.0, "b")
    res = _run(repo, tmp_path, a, b)
    # Each side's own worktree src/ is what its server imports first.
    seen = _seen(tmp_path)
    assert [name for name, _ in seen] == ["base", "head"] and seen[0][1] != seen[1][1]
    assert all(pp[0].endswith("src") for _, pp in seen)
    rows = _serve_rows(res)
    assert rows["track_serve_agreement_base"] == Verdict.UNCHANGED and res.exit_code == 0
    assert "track_serve_output_tok_per_s" in rows
    assert json.loads((tmp_path / "out" / "run.json").read_text())["serve"]


def test_a_head_whose_served_outputs_differ_is_red_naming_the_workload(repo, tmp_path):  # noqa: F811
    a = commit_value(repo, 1.0, "a")
    b = commit_value(repo, 0.6, "b")
    res = _run(repo, tmp_path, a, b)
    assert _serve_rows(res)["track_serve_agreement_base"] == Verdict.REGRESSION and res.exit_code == 1
    assert any(n.endswith("served outputs differ: video c=1, first at character 1") for n in res.notes)
    reg = next(c for c in res.report.regressions if c.benchmark.endswith("track_serve_agreement_base"))
    assert dict(reg.params)["workload"] == "video"
    assert (tmp_path / "out" / "serve" / "serve-chart.png").stat().st_size > 10_000
    comment = (tmp_path / "out" / "comment.md").read_text()
    row = next(ln for ln in comment.splitlines() if "track\\_serve\\_agreement\\_base" in ln)
    assert "workload=video" in row and "regression" in row


def test_a_serving_child_that_wrote_no_rounds_is_one_error_naming_its_log(repo, tmp_path):  # noqa: F811
    a = commit_value(repo, 1.0, "a")
    b = commit_value(repo, 1.0, "b")
    crash = "import sys; print('server on port 1234 died: CUDA out of memory'); sys.exit(2)"
    with pytest.raises(VlmpathError) as err:
        _run(repo, tmp_path, a, b, stand_in=crash)
    msg = str(err.value)
    assert "serve-pair exited 2" in msg and "CUDA out of memory" in msg
    assert msg.endswith(f"{tmp_path / 'out' / 'serve' / 'serve-pair.log'})")


def test_a_serving_child_that_left_a_round_out_is_one_error(repo, tmp_path):  # noqa: F811
    a = commit_value(repo, 1.0, "a")
    b = commit_value(repo, 1.0, "b")
    short = STAND_IN.replace("for i in range(a.rounds):", "for i in range(a.rounds - 1):")
    with pytest.raises(VlmpathError, match=r"serve-pair wrote no base-1\.json"):
        _run(repo, tmp_path, a, b, stand_in=short)


def test_a_model_directory_that_is_not_one_is_one_line_before_measuring(tmp_path, capsys):
    code = main(["ci", "pr", "--base", "HEAD", "--head", "HEAD", "--serve", str(tmp_path / "nope"),
                 "--out", str(tmp_path / "out"), "--repo", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--model" in err and "no config.json" in err
