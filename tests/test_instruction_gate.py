"""Do per-case instruction counts gate a pull request like every other metric (issue 12, item 3)?

Synthetic records (no valgrind) through the same code the PR flow uses: records to
``Metric`` rows, merged with a side's asv results, judged by the ``track_instructions``
band (2%, deterministic: one value per side is a full measurement). A planted 5% turns the
gate red, an unchanged pair and a 1% move stay green; a side that could not be counted is a
note, never a crash; the flow (fake suite, fake counter) carries the rows into the
comment, the exit code, ``OUT/instructions.json`` and the comment workflow's merge.
The real counter under callgrind runs in ``test_instruction_gate_e2e.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_ir_grew import dump
from test_ci_flow import MACHINE, FakeSuite, commit_value, repo, run  # noqa: F401 (repo: a fixture)

from vlmpath.selfcheck import callgrind
from vlmpath.selfcheck import ir_cases
from vlmpath.selfcheck import ir_worker
from vlmpath.pr import merge as ci_merge
from vlmpath.pr import instructions as pr_instructions
from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.records import MachineRun, Metric, RunResults, merge_runs
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError

SHA_B, SHA_H = "a" * 40, "b" * 40
PRESETS = ("video", "few_large_images")


def side(counts: dict[str, int | None], label: str = "head", not_measured: str | None = None,
         commit: str | None = None) -> dict:
    recs = [ir_cases._record({"pipeline": "default", "preset": p, "instructions": n,
                              "error": None if n is not None else "RuntimeError: boom"}, commit)
            for p, n in counts.items()]
    return {"side": label, "not_measured": not_measured, "records": [] if not_measured else recs}


def asv_side(commit: str) -> RunResults:
    m = Metric(machine=MACHINE, benchmark="bench_embed.EmbedRoutine.track_accuracy", params=(), unit="fraction",
               value=1.0, commit=commit)
    return RunResults(commit=commit, machines=(MachineRun(MACHINE, commit, (m,)),))


def judged(base: dict, head: dict):
    runs = [merge_runs(asv_side(sha), ir_cases.run_results(s, MACHINE, sha))
            for s, sha in ((base, SHA_B), (head, SHA_H))]
    return compare(*runs, Thresholds.default())


def ir_rows(report) -> dict[str, Verdict]:
    return {dict(c.params)["preset"]: c.verdict for c in report.all() if c.unit == "instructions"}


def test_a_planted_five_percent_is_red_and_an_unchanged_pair_green():
    base = side({"video": 400_000_000, "few_large_images": 900_000_000}, "base")
    assert ir_rows(judged(base, side({"video": 400_000_000, "few_large_images": 900_000_000}))) == {
        "video": Verdict.UNCHANGED, "few_large_images": Verdict.UNCHANGED}
    report = judged(base, side({"video": 420_000_000, "few_large_images": 909_000_000}))  # +5%, +1%
    assert ir_rows(report) == {"video": Verdict.REGRESSION, "few_large_images": Verdict.UNCHANGED}
    (reg,) = report.regressions
    assert (reg.benchmark, dict(reg.params), reg.indicative) == (ir_cases.BENCH, {"pipeline": "default", "preset": "video"},
                                                                   False)  # deterministic: never indicative
    assert report.exit_code(fail_on_regression=True) == 1
    assert ir_rows(judged(base, side({"video": 380_000_000, "few_large_images": 900_000_000})))["video"] is Verdict.IMPROVEMENT


def test_a_side_not_measured_is_a_note_and_a_failed_case_is_a_failure():
    report = judged(side({}, "base", not_measured="the checkout lacks what the counter imports (ImportError: x)"),
                    side({"video": 400_000_000}))
    assert ir_rows(report) == {"video": Verdict.NEW}
    assert any("base aaaaaaaa not measured: the checkout lacks" in n for n in report.notes)
    assert report.exit_code(fail_on_regression=True) == 0
    failed = judged(side({"video": 400_000_000}, "base"), side({"video": None}))
    assert ir_rows(failed) == {"video": Verdict.NEWLY_FAILING}
    assert failed.regressions[0].error == "RuntimeError: boom"


def test_the_records_file_round_trips_and_a_malformed_one_is_one_clear_error():
    text = ir_cases.to_json([side({"video": 12}, "base"), side({"video": 13})])
    sides = ir_cases.load_sides(text, "f")
    assert [s["records"][0]["instructions"] for s in sides] == [12, 13]
    assert sides[0]["records"][0]["case"] == "embed:default/video"
    for bad in ("{", json.dumps({"schema_version": 1}),
                text.replace('"instructions": 12', '"instructions": "12"'),
                text.replace('"preset": "video"', '"preset": 3', 1)):
        with pytest.raises(VlmpathError, match="f: "):
            ir_cases.load_sides(bad, "f")


def test_the_worker_selects_cases_like_asv_and_names_what_a_checkout_lacks(tmp_path, monkeypatch):
    assert ir_worker._wanted(None, "default", "video")
    assert ir_worker._wanted(r"EmbedRoutine\.track_instructions\('default', 'video'\)", "default", "video")
    assert ir_worker._wanted("bench_embed", "legacy", "video")
    assert not ir_worker._wanted("legacy", "default", "video")
    assert not ir_worker._wanted("track_tok_per_s", "default", "video")

    def lacking():
        raise ImportError("cannot import name 'prepare' from 'vlmpath.suite.measure'")

    monkeypatch.setattr(ir_worker, "_imports", lacking)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"out": str(tmp_path / "r.json"), "probe": False}))
    ir_worker.main(str(spec))
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["records"] == [] and "lacks what the counter imports" in result["not_measured"]
    assert "'prepare'" in result["not_measured"]


def test_a_missing_valgrind_is_one_error_naming_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(VlmpathError, match=r"Valgrind.*apt-get install -y valgrind.*ci/setup.sh"):
        ir_cases.count_sides([ir_cases.Side("head", None)], counter="callgrind")
    assert main(["instructions", "--counter", "callgrind", "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


def test_the_pr_flow_refuses_before_measuring_without_valgrind(monkeypatch, repo, tmp_path):  # noqa: F811
    monkeypatch.setattr(shutil, "which", lambda name: None)
    good = commit_value(repo, 1.0, "good")
    head = commit_value(repo, 1.0, "head")
    suite = FakeSuite()
    with pytest.raises(VlmpathError, match="or count with --counter ops"):
        run(repo, tmp_path, good, head, suite, instructions=True, counter="callgrind")
    assert suite.calls == []  # refused before any measuring


def test_a_gpu_backend_refuses_instruction_counts(monkeypatch):
    from vlmpath.measure import platform

    class Gpu:
        is_gpu, backend = True, "cuda"

    monkeypatch.setattr(platform, "probe", lambda: Gpu())
    with pytest.raises(VlmpathError, match="CPU runners only.*backend is cuda"):
        pr_instructions.refuse_gpu()


def test_bad_cli_input_exits_2(tmp_path, capsys):
    assert main(["instructions", "--out", str(tmp_path / "x.json"), "--bench", "["]) == 2
    assert main(["instructions", "--out", str(tmp_path / "x.json"), "--src", str(tmp_path)]) == 2
    assert "no vlmpath package" in capsys.readouterr().err


def commit_counted(repo: Path, count: int, msg: str) -> str:
    """A commit whose (fake) instruction count is in its own checkout (src/vlmpath/ir.txt)."""
    (repo / "src" / "vlmpath").mkdir(parents=True, exist_ok=True)
    (repo / "src" / "vlmpath" / "ir.txt").write_text(f"{count}\n")
    return commit_value(repo, 1.0, msg)


class FakeCounter:
    """Stands in for ``count_sides``: each side's count is read from its own checkout."""

    def __init__(self):
        self.sides: list = []

    def __call__(self, sides, **kw):
        self.sides.extend(sides)
        self.bench = kw["bench"]
        out = []
        for s in sides:
            n = int((s.src / "vlmpath" / "ir.txt").read_text())
            res = {**side({"video": n}, s.label, commit=s.commit), "commit": s.commit}
            if kw.get("profiles") is not None:  # as the worker keeps them: a dump and the call counts
                d = kw["profiles"] / s.label
                d.mkdir(parents=True, exist_ok=True)
                (d / "default.video.callgrind").write_text(dump(n - 300_000_000, 100, 300_000_000 - 105))
                (d / "default.video.calls.json").write_text(json.dumps({"python": {}, "aten": {"aten::sort": n // 10**7}}))
                res["records"][0]["profile"] = "default.video.callgrind"
            out.append(res)
        return out


def test_the_pr_flow_gates_on_counts_and_the_merge_keeps_them(monkeypatch, repo, tmp_path):  # noqa: F811
    base, head = (commit_counted(repo, n, msg) for n, msg in ((400_000_000, "base"), (420_000_000, "head +5%")))
    counter = FakeCounter()
    monkeypatch.setattr(pr_instructions, "count_sides", counter)
    monkeypatch.setattr(callgrind, "valgrind", lambda fix="": "/usr/bin/valgrind")
    res = run(repo, tmp_path, base, head, FakeSuite(benches=("bench_embed.Embed.track_tok_per_s",)),
              instructions=True, bench="bench_embed", instructions_bench="'video'")
    assert [s.label for s in counter.sides] == ["base", "head"] and counter.bench == "'video'"
    assert [s.commit for s in counter.sides] == [base, head]
    assert all(not s.src.exists() for s in counter.sides)  # the side checkouts are removed again
    assert [(c.benchmark, c.base, c.head) for c in res.report.regressions] == [(ir_cases.BENCH, 400e6, 420e6)]
    assert res.exit_code == 1
    out = tmp_path / "out"
    assert r"**1 regression on cpu\-test**: EmbedRoutine\.instructions default video instructions +5.0%" in (
        (out / "comment.md").read_text())
    assert json.loads((out / "run.json").read_text())["instructions"] is True
    grew_text = (out / "comment.md").read_text()
    assert "What grew" in grew_text and "`at::native::copy_`" in grew_text and "`aten::sort` | 40 | 42 | +2" in grew_text
    saved = ir_cases.load_sides((out / pr_instructions.OUT_FILE).read_text(), "out")
    assert [s["records"][0]["commit"] for s in saved] == [base, head]
    (tmp_path / "artifacts").mkdir()
    out.rename(tmp_path / "artifacts" / "bench-cpu")
    merged = ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged", head_sha=head)
    assert [c.benchmark for c in merged.report.regressions] == [ir_cases.BENCH]
    assert "`at::native::copy_`" in (tmp_path / "merged" / "comment.md").read_text()  # the posted comment names it
    (tmp_path / "artifacts" / "bench-cpu" / pr_instructions.OUT_FILE).write_text("{ not json")
    with pytest.raises(VlmpathError, match="instructions.json: not JSON"):
        ci_merge.merge_artifacts(tmp_path / "artifacts", tmp_path / "merged2", head_sha=head)


def test_a_side_whose_callgrind_run_breaks_is_not_measured_and_the_other_still_counts(monkeypatch, tmp_path):
    monkeypatch.setattr(callgrind, "valgrind", lambda fix="": "/usr/bin/valgrind")
    monkeypatch.setattr(ir_cases, "_probe", lambda src, env: None)
    started = []

    class Proc:
        def poll(self):
            return 0

    def start(argv, tmp, env, instrument=True, native=False):
        started.append((json.loads((tmp / "spec.json").read_text()), env))
        return Proc()

    def finish(proc, tmp, out, timeout):
        if tmp.name == "side0":
            raise VlmpathError("callgrind run failed (exit 139): Segmentation fault")
        return {"records": [{"pipeline": "default", "preset": "video", "instructions": 5, "error": None}]}

    monkeypatch.setattr(callgrind, "start", start)
    monkeypatch.setattr(callgrind, "finish", finish)
    base, head = ir_cases.count_sides([ir_cases.Side("base", tmp_path / "b", "a" * 40),
                                       ir_cases.Side("head", tmp_path / "h", "b" * 40)], bench="video", threads=1,
                                      counter="callgrind")
    assert base["not_measured"].endswith("Segmentation fault") and base["records"] == []
    assert head["not_measured"] is None and head["records"][0]["instructions"] == 5
    assert head["records"][0]["commit"] == "b" * 40
    # Each side runs its own src with threads pinned and one hash seed (the same work each run).
    assert [(s["bench"], s["threads"], e["PYTHONPATH"], e["OMP_NUM_THREADS"], e["PYTHONHASHSEED"])
            for s, e in started] == [("video", 1, str(tmp_path / "b"), "1", "0"), ("video", 1, str(tmp_path / "h"), "1", "0")]


def test_a_native_side_that_imports_another_vlmpath_is_not_measured_without_a_probe(monkeypatch, tmp_path):
    """Natively the worker's own result says which vlmpath it ran (no probe process: one
    torch import less per side); one from elsewhere is not this side's code, so nothing it
    counted stands, and the side that ran its own still counts."""
    monkeypatch.setattr(ir_cases, "_probe", lambda src, env: pytest.fail("the native counter started a probe"))
    for d in ("b", "h"):
        (tmp_path / d / "vlmpath").mkdir(parents=True)

    def finish(proc, tmp, out, timeout):
        ran = tmp_path / ("elsewhere" if tmp.name == "side0" else "h") / "vlmpath" / "__init__.py"
        return {"vlmpath": str(ran), "not_measured": None,
                "records": [{"pipeline": "default", "preset": "video", "error": None,
                             "parts": {"bytecodes": 7, "elements": 9}}]}

    class Proc:
        def poll(self):
            return 0

    monkeypatch.setattr(callgrind, "start", lambda argv, tmp, env, instrument=True, native=False: Proc())
    monkeypatch.setattr(callgrind, "finish", finish)
    base, head = ir_cases.count_sides([ir_cases.Side("base", tmp_path / "b", SHA_B),
                                       ir_cases.Side("head", tmp_path / "h", SHA_H)], bench="video", counter="ops")
    assert base["not_measured"].startswith(f"the counter would import vlmpath from {tmp_path / 'elsewhere'}")
    assert base["records"] == []
    assert head["not_measured"] is None
    assert sorted(r["instructions"] for r in head["records"]) == [7, 9]


def test_the_cpu_pr_job_counts_every_case_and_pairs_its_timings_by_default():
    import subprocess

    import yaml

    root = Path(__file__).resolve().parents[1]
    job = yaml.safe_load((root / ".github" / "workflows" / "bench-pr.yml").read_text())["jobs"]["cpu"]
    steps = job["steps"]
    runs = [str(s.get("run", "")) for s in steps]
    install = next(i for i, r in enumerate(runs) if "apt-get install -y -qq valgrind" in r)
    bench = next(i for i, r in enumerate(runs) if "ci/pr-bench.sh" in r)
    assert install < bench and steps[install]["timeout-minutes"] <= 5
    assert steps[install]["if"] == "env.CPU_INSTRUCTIONS != 'off' && env.CPU_COUNTER == 'callgrind'"
    assert job["env"]["CPU_COUNTER"] == "${{ vars.CPU_COUNTER || 'ops' }}"
    assert job["env"]["CPU_INSTRUCTIONS"] == "${{ vars.CPU_INSTRUCTIONS || 'on' }}"
    assert job["env"]["CPU_INTERLEAVE"] == "${{ vars.CPU_INTERLEAVE || '6' }}"
    # The step's own shell, with pr-bench.sh echoing its arguments: what the defaults pass.
    script = runs[bench].replace("source .venv/bin/activate", ":").replace("ci/pr-bench.sh", "printf '%s\\n'")

    def argv(**env) -> list[str]:
        base = {"PATH": "/usr/bin:/bin", "BASE_SHA": "b", "HEAD_SHA": "h", "CPU_BENCH_REGEX": "bench_embed",
                "CPU_INSTRUCTIONS_REGEX": "", "CPU_INSTRUCTIONS": "on", "CPU_INTERLEAVE": "6", "CPU_COUNTER": "ops"}
        r = subprocess.run(["bash", "-e", "-c", script], env={**base, **env}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.split("\n")

    default = argv()
    assert default[default.index("--interleave") + 1] == "6" and "--quick" in default
    assert "--instructions" in default and "--instructions-bench" not in default
    assert default[default.index("--counter") + 1] == "ops"
    narrowed = argv(CPU_INSTRUCTIONS_REGEX="'default', 'video'", CPU_INTERLEAVE="0", CPU_INSTRUCTIONS="on")
    assert "--interleave" not in narrowed and narrowed[narrowed.index("--instructions-bench") + 1] == "'default', 'video'"
    assert "--instructions" not in argv(CPU_INSTRUCTIONS="off")