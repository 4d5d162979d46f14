"""Is a pull request judged with the base's yardstick, and does the comment say when the PR moved it?

The yardstick: benchmark definitions, thresholds and instruments (``core.yardstick``).
The flow tests run ``ci pr`` on small real git histories with a fake suite runner whose
reading depends on the *definition* it is handed (``req.bench_root``'s benchmarks/): a
head that rewrites its benchmark to return a constant would read "unchanged" if its own
definitions measured it. Head's changed definitions are found by asv's real discovery
(asv's version hash of each benchmark's source).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, write_asv_run
from test_ci_flow import MACHINE, git, worktrees

from vlmpath.pr import flow as ci_flow
from vlmpath.pr.options import PrOptions
from vlmpath.pr import side as pr_side
from vlmpath.pr.merge import merge_artifacts
from vlmpath.pr.yardstick import NEW_DEFINITION, yardstick_of
from vlmpath.compare.comparison import ComparisonReport, MachineComparison, Verdict
from vlmpath.core.errors import VlmpathError
from vlmpath.core.run_lock import results_lock
from vlmpath.core.yardstick import ENGINE_NOTICE, notice, yardstick_files
from vlmpath.render.comment import render_markdown

BENCH = "bench_embed.Embed.track_accuracy"
HONEST = "class Embed:\n    def track_accuracy(self):\n        import vlmpath as pkg\n        return pkg.ACCURACY\n"
LIAR = "class Embed:\n    def track_accuracy(self):\n        return 1.0\n"


# --- which files are the yardstick, and the notice ------------------------------------------


def test_the_yardstick_is_benchmarks_thresholds_and_instruments_and_nothing_else():
    changed = ["README.md", "benchmarks/bench_embed.py", "benchmarks/accepted.yaml", "src/vlmpath/paths/inject.py",
               "src/vlmpath/compare/thresholds.yaml", "src/vlmpath/measure/syncs.py", "src/vlmpath/measure/timing.py",
               "src/vlmpath/measure/memory.py", "src/vlmpath/measure/op_count.py", "asv.conf.json",
               "src/vlmpath/measure/workload.py", "benchmarks_old/x.py"]
    assert yardstick_files(changed) == sorted([
        "asv.conf.json", "benchmarks/accepted.yaml", "benchmarks/bench_embed.py",
        "src/vlmpath/compare/thresholds.yaml", "src/vlmpath/measure/memory.py", "src/vlmpath/measure/op_count.py",
        "src/vlmpath/measure/syncs.py", "src/vlmpath/measure/timing.py"])
    assert notice([]) is None


def _report(notes=()) -> ComparisonReport:
    return ComparisonReport("a" * 40, "b" * 40, (MachineComparison("cpu-ci", "both", ()),), notes=tuple(notes))


def test_the_notice_stands_under_the_verdict_escaped_and_once_per_merge():
    moved = notice(["benchmarks/bench_<b>x</b>.py", "src/vlmpath/measure/timing.py"])
    # ci merge brings each machine's run.json note with its machine in front: shown once.
    text = render_markdown(_report([f"cpu-ci: {moved}", f"rocm-ci: {moved}", "an ordinary note"]))
    lines = text.splitlines()
    top = [i for i, ln in enumerate(lines) if "yardstick moved" in ln]
    assert len(top) == 1 and top[0] <= 5  # under the verdict and the commits line
    assert "timing\\.py" in lines[top[0]] and "<b>x" not in text  # the PR's file names are escaped
    assert "an ordinary note" in text
    assert "yardstick moved" not in render_markdown(_report(["an ordinary note"]))


def test_the_notice_survives_the_fit():
    moved = notice(["benchmarks/bench_embed.py"])
    text = render_markdown(_report([moved, *(f"note {i} " + "x" * 400 for i in range(40))]), max_chars=3000)
    assert len(text) <= 3000 and "yardstick moved" in text and "warning line(s) left out" in text


# --- the flow: base's definitions and thresholds judge --------------------------------------


def _commit(repo: Path, msg: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


class DefinitionSuite:
    """Reads what the definition it is given reads: ``return 1.0`` is a constant, else the
    commit's own ACCURACY; the asv version is the definition's hash, as asv's is."""

    def __init__(self):
        self.calls: list[pr_side.SuiteRequest] = []

    def __call__(self, req: pr_side.SuiteRequest) -> None:
        self.calls.append(req)
        # The benchmark and the helpers it measures through (``_common.py``).
        definition = "".join(p.read_text() for p in sorted((req.bench_root / "benchmarks").glob("*.py")))
        code = (req.source / "src" / "vlmpath" / "__init__.py").read_text()
        acc = 1.0 if "return 1.0" in definition else float(re.search(r"ACCURACY = (\S+)", code).group(1))
        speed = float(re.search(r"SPEED = (\S+)", code).group(1))
        specs = {BENCH: ("fraction", [], [], [acc], None),
                 "bench_embed.Embed.track_tok_per_s": ("tok/s", [], [], [speed], None)}
        if req.bench and not re.search(req.bench, BENCH):
            specs.pop(BENCH)
        if req.bench and not re.search(req.bench, "bench_embed.Embed.track_tok_per_s"):
            specs.pop("bench_embed.Embed.track_tok_per_s")
        write_asv_run(req.results_dir, req.machine, req.commit, specs, fingerprint("cpu"))


def _package(accuracy: float, speed: float = 1000.0) -> dict[str, str]:
    return {"src/vlmpath/__init__.py": f"ACCURACY = {accuracy}\nSPEED = {speed}\n",
            "benchmarks/__init__.py": ""}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    return r


def _run(repo, tmp_path, base, head, suite, **kw):
    return ci_flow.run_pr(PrOptions(base, head, out_dir=tmp_path / "out", repo=repo, machine=MACHINE,
                                    results_dir=tmp_path / "store", charts=False, **kw),
                          run_suite=suite, env={"PATH": os.environ["PATH"]}, profile=False)


def test_a_benchmark_the_head_rewrote_to_read_less_is_flagged_and_judged_by_base(repo, tmp_path):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/bench_embed.py": HONEST})
    # The head's code loses accuracy and its benchmark stops measuring it.
    head = _commit(repo, "head", {**_package(0.6), "benchmarks/bench_embed.py": LIAR})
    suite = DefinitionSuite()
    res = _run(repo, tmp_path, base, head, suite)
    judged = {c.benchmark: c for m in res.report.machines if m.machine == MACHINE for c in m.comparisons}
    assert judged[BENCH].verdict is Verdict.REGRESSION and (judged[BENCH].base, judged[BENCH].head) == (1.0, 0.6)
    assert res.exit_code == 1  # the lie did not decide
    head_run, base_run, definitions = suite.calls
    assert head_run.bench_root == base_run.bench_root == base_run.source  # base's benchmarks/, both sides
    # Head's changed definition was run too (its suite, its package) and shown, not judged.
    assert definitions.bench_root == definitions.source == head_run.source
    assert definitions.results_dir == tmp_path / "out" / "head-definitions" and re.search(definitions.bench, BENCH)
    shown = [c for c in res.report.all() if c.machine != MACHINE]
    assert [(c.benchmark, c.head, c.verdict) for c in shown] == [(BENCH, 1.0, Verdict.NEW)]
    assert NEW_DEFINITION in shown[0].reason and "changed in head" in shown[0].reason
    assert not any(c.machine != MACHINE for c in res.report.regressions)
    lines = (tmp_path / "out" / "comment.md").read_text().splitlines()
    top = next(i for i, ln in enumerate(lines) if "yardstick moved" in ln)
    assert top <= 5 and "benchmarks/bench\\_embed\\.py" in lines[top] and "\\_\\_init\\_\\_" not in lines[top]
    assert any(NEW_DEFINITION in ln for ln in lines)
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert any("yardstick moved" in n for n in meta["notes"])  # for ci merge's comment too
    assert len(worktrees(repo)) == 1


HELPER = "def read():\n    import vlmpath as pkg\n    return pkg.ACCURACY\n"
THROUGH_HELPER = "from . import _common\n\n\nclass Embed:\n    def track_accuracy(self):\n        return _common.read()\n"


@pytest.mark.parametrize("helper", ["changed", "same"])
def test_a_helper_the_head_rewrote_makes_its_benchmarks_head_definitions(repo, tmp_path, helper):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/_common.py": HELPER,
                                  "benchmarks/bench_embed.py": THROUGH_HELPER})
    # The benchmark's own source (asv's version) is unchanged; its helper now reads a constant.
    files = {**_package(0.6)}
    if helper == "changed":
        files["benchmarks/_common.py"] = "def read():\n    return 1.0\n"
    head = _commit(repo, "head", files)
    suite = DefinitionSuite()
    res = _run(repo, tmp_path, base, head, suite)
    judged = {c.benchmark: c for m in res.report.machines if m.machine == MACHINE for c in m.comparisons}
    assert judged[BENCH].verdict is Verdict.REGRESSION and res.exit_code == 1  # base's helper, both sides
    shown = [c for c in res.report.all() if c.machine != MACHINE]
    if helper == "same":  # the control: no head definitions to show
        assert shown == [] and len(suite.calls) == 2
        return
    assert [(c.benchmark, c.head, c.verdict) for c in shown] == [(BENCH, 1.0, Verdict.NEW)]
    assert "helper module" in shown[0].reason and NEW_DEFINITION in shown[0].reason
    assert suite.calls[2].bench_root == suite.calls[2].source != suite.calls[1].bench_root


def test_head_definitions_run_only_where_the_selection_reaches(repo, tmp_path):
    """A helper edit changes every benchmark that measures through it; a run selecting others
    re-runs none of them (it re-ran all: 435 cases for a one-line edit), one selecting them
    runs them."""
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/_common.py": HELPER,
                                  "benchmarks/bench_embed.py": THROUGH_HELPER})
    head = _commit(repo, "head", {**_package(0.6), "benchmarks/_common.py": "def read():\n    return 1.0\n"})
    elsewhere = DefinitionSuite()
    _run(repo, tmp_path, base, head, elsewhere, bench="track_tok_per_s")
    assert len(elsewhere.calls) == 2  # base and head only: the changed definition is not selected
    shutil.rmtree(tmp_path / "out")
    selected = DefinitionSuite()
    _run(repo, tmp_path, base, head, selected, bench="track_accuracy")
    assert len(selected.calls) == 3 and re.search(selected.calls[2].bench, BENCH)


def _merged(out: Path, tmp_path: Path):
    """``ci merge`` over the one machine's artifact (``out`` copied in as the runner uploads it)."""
    arts = tmp_path / "arts"
    shutil.copytree(out, arts / "bench-cpu")
    return merge_artifacts(arts, tmp_path / "merged", fail_on_regression=True)


def test_ci_merge_carries_the_head_definition_rows(repo, tmp_path):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/bench_embed.py": HONEST})
    head = _commit(repo, "head", {**_package(0.6), "benchmarks/bench_embed.py": LIAR})
    single = _run(repo, tmp_path, base, head, DefinitionSuite())
    merged = _merged(tmp_path / "out", tmp_path)
    def shown(report):
        return [(c.machine, c.benchmark, c.head, c.verdict, c.reason) for c in report.all() if c.machine != MACHINE]
    assert shown(merged.report) == shown(single.report) != []
    assert all(v is Verdict.NEW and NEW_DEFINITION in why for _, _, _, v, why in shown(merged.report))
    assert merged.exit_code == single.exit_code == 1  # judged by base's definitions, as before
    assert not any(c.machine != MACHINE for c in merged.report.regressions)
    comment = (tmp_path / "merged" / "comment.md").read_text()
    assert NEW_DEFINITION in comment and "yardstick moved" in comment
    # The one artifact given as the root itself: the same rows.
    alone = merge_artifacts(tmp_path / "arts" / "bench-cpu", tmp_path / "merged1", fail_on_regression=True)
    assert shown(alone.report) == shown(single.report)
    # A head-definitions/ that claims another machine's results is refused, naming the artifact.
    other = tmp_path / "arts" / "bench-cpu" / "head-definitions"
    (other / MACHINE).rename(other / "elsewhere")
    with pytest.raises(VlmpathError, match="bench-cpu.*head-definitions.*elsewhere"):
        merge_artifacts(tmp_path / "arts", tmp_path / "merged2")


def test_ci_merge_of_a_pair_without_head_definitions_has_none(repo, tmp_path):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/bench_embed.py": HONEST})
    head = _commit(repo, "head", {"README.md": "words\n"})
    _run(repo, tmp_path, base, head, DefinitionSuite())
    merged = _merged(tmp_path / "out", tmp_path)
    assert merged.exit_code == 0 and {m.machine for m in merged.report.machines} == {MACHINE}
    assert NEW_DEFINITION not in (tmp_path / "merged" / "comment.md").read_text()


def test_a_pair_that_leaves_the_yardstick_alone_stays_green_without_a_notice(repo, tmp_path):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/bench_embed.py": HONEST})
    head = _commit(repo, "head", {"README.md": "words\n"})
    suite = DefinitionSuite()
    res = _run(repo, tmp_path, base, head, suite)
    assert res.exit_code == 0 and not res.report.regressions and len(suite.calls) == 2
    assert "yardstick" not in (tmp_path / "out" / "comment.md").read_text()


def test_a_new_benchmark_in_head_is_shown_as_a_new_definition_never_judged(repo, tmp_path):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/bench_embed.py": HONEST})
    head = _commit(repo, "head", {"benchmarks/bench_embed.py": HONEST + (
        "\n    def track_tok_per_s(self):\n        return 1e9\n")})
    suite = DefinitionSuite()
    res = _run(repo, tmp_path, base, head, suite)
    assert res.exit_code == 0
    shown = [c for c in res.report.all() if c.machine != MACHINE]
    assert [c.benchmark for c in shown] == ["bench_embed.Embed.track_tok_per_s"]
    assert "not in base" in shown[0].reason and shown[0].verdict is Verdict.NEW


def _packaged_yaml() -> str:
    return resources.files("vlmpath.compare").joinpath("thresholds.yaml").read_text(encoding="utf-8")


def test_the_thresholds_are_the_base_revisions_not_the_heads_nor_the_runners(repo, tmp_path):
    yaml_path = "src/vlmpath/compare/thresholds.yaml"
    factor = r"(?m)^factor:\n  gpu: .*\n  cpu: .*$"
    strict = re.sub(factor, "factor: {gpu: 0.02, cpu: 0.02}", _packaged_yaml())
    assert strict != _packaged_yaml()
    base = _commit(repo, "base", {**_package(1.0, 1000.0), "benchmarks/bench_embed.py": HONEST, yaml_path: strict})
    lax = re.sub(factor, "factor: {gpu: 50, cpu: 50}", _packaged_yaml())
    head = _commit(repo, "head", {**_package(1.0, 950.0), yaml_path: lax})
    assert yardstick_of(repo, base, base).thresholds.cpu_factor == 0.02
    assert yardstick_of(repo, base, head).thresholds.cpu_factor == 0.02  # base's, whatever head wrote
    assert yardstick_of(repo, head, head).thresholds.cpu_factor == 50
    moved = yardstick_of(repo, base, head)
    assert yaml_path in moved.moved and moved.notice and not yardstick_of(repo, base, base).moved
    res = _run(repo, tmp_path, base, head, DefinitionSuite())
    # -5% tok/s: within the runner's own packaged band (10%) and head's (5000%), not base's (2%).
    assert [c.benchmark for c in res.report.regressions] == ["bench_embed.Embed.track_tok_per_s"]
    assert f"base {base[:8]}" in res.report.thresholds_source
    top = next(ln for ln in (tmp_path / "out" / "comment.md").read_text().splitlines() if "yardstick moved" in ln)
    assert "thresholds\\.yaml" in top


def test_a_second_ci_pr_on_a_held_results_directory_refuses_and_leaves_nothing(repo, tmp_path):
    base = _commit(repo, "base", {**_package(1.0), "benchmarks/bench_embed.py": HONEST})
    head = _commit(repo, "head", {"README.md": "words\n"})
    suite = DefinitionSuite()
    # The holder's own outputs (its interleaved rounds so far): a refused run never wipes them.
    running = [tmp_path / "out" / "rounds" / "00" / "base" / "r.json", tmp_path / "out" / "results" / "r.json"]
    for f in running:
        f.parent.mkdir(parents=True)
        f.write_text("{}")
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from vlmpath.core.run_lock import results_lock\n"
                               "with results_lock(sys.argv[1], 'vlmpath run --trusted'):\n"
                               "    print('held', flush=True); sys.stdin.read()", str(tmp_path / "store")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(ci_flow.__file__).parents[2])})
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        with pytest.raises(VlmpathError, match=rf"in use by another run \(pid {holder.pid}.*vlmpath run --trusted"):
            _run(repo, tmp_path, base, head, suite)
    finally:
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(timeout=30)
    assert suite.calls == [] and len(worktrees(repo)) == 1
    assert all(f.is_file() for f in running)
    with results_lock(tmp_path / "store", "after"):  # and it was never taken by the refused run
        pass


def test_an_engine_pr_says_the_yardstick_is_vlmpaths_own():
    text = render_markdown(_report([ENGINE_NOTICE]))
    assert "never the engine pull request" in "\n".join(text.splitlines()[:6])
