"""Do docs/contributing.md's recipes list exactly the files a new metric, strategy, engine or CI job needs?

Each recipe's edits are applied, as a contributor would make them, to a temporary copy of
the repository, and the toy is checked where the recipe says it shows:

- a metric (``toy_rows``, a number the measurement sees): measured by ``vlmpath measure``,
  in its table, a metric of the engine comparison judged by the row's direction, in the PR
  comment and an asv ``track_`` method; with any one of the 3 files left out, it is not;
- a strategy (``toy_batched``, encode): measured by name, benchmarked by the asv suite,
  listed in docs/measures.md's table; without either file, refused or unlisted;
- an engine (``toy``, in the tree): registered, and its 3 CI templates are exactly what
  ``vlmpath ci templates`` reports missing, then writes;
- a CI job: a new workflow is reported until ``tests/test_workflows.py`` walks it and
  docs/ci-security.md's table names it.

The file list of each recipe is read from the page itself (its numbered backticked
paths), so the page and the test cannot drift apart. The measured toys run in a
subprocess on the copy (``-m e2e``); the rest here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "contributing.md"


def recipe_steps(heading: str, stop: str | None = None) -> list[str]:
    """The text of each numbered step of one recipe of docs/contributing.md."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    if stop:
        section = section.split(stop, 1)[0]
    return [" ".join(m.split()) for m in re.findall(r"^\d+\. (.*?)(?=^\d+\. |^\S|\Z)", section + "\n", re.M | re.S)]


def recipe_files(heading: str, stop: str | None = None) -> list[str]:
    """The first repository path each numbered step names."""
    return [re.search(r"`([\w./<>-]+/[\w./<>-]+)`", s).group(1) for s in recipe_steps(heading, stop)]


# --- the edits of each recipe: file -> (anchor in today's file, text added after it) ---
METRIC_EDITS = {
    "src/vlmpath/core/metrics.py": (
        "METRICS: tuple[MetricSpec, ...] = (\n",
        '    MetricSpec(name="toy_rows", unit="rows", direction=Direction.HIGHER, exact=True, fmt="count",\n'
        '               headline=False, description="toy: twice the placed items", routine=("embed", "engine")),\n'),
    "src/vlmpath/suite/record.py": ("    placed: int | None = None\n", "    toy_rows: int | None = None\n"),
    "src/vlmpath/suite/measure.py": ("placed=fid.placed,", " toy_rows=2 * fid.placed,"),
}
STRATEGY_EDITS = {
    "src/vlmpath/paths/encode.py": (
        '{"per_request": per_request, "batched": batched,',
        ' "toy_batched": lambda reqs, ctx: batched(reqs, ctx),'),
    "docs/measures.md": ("| encode | `per_request`, `batched`,", " `toy_batched`,"),
    "src/vlmpath/core/choice_names.py": ('("batched", "batched_by_span", "per_request"', ', "toy_batched"'),
}


def apply(root: Path, edits: dict[str, tuple[str, str]]) -> None:
    for rel, (anchor, added) in edits.items():
        path = root / rel
        text = path.read_text(encoding="utf-8")
        assert text.count(anchor) == 1, f"{rel}: the recipe's anchor {anchor!r} moved; update tests/test_recipes.py"
        path.write_text(text.replace(anchor, anchor + added), encoding="utf-8")


def copy_repo(dst: Path, parts=("src", "benchmarks", "docs")) -> Path:
    for part in parts:
        shutil.copytree(ROOT / part, dst / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def test_the_metric_recipe_lists_the_files_its_toy_edits():
    assert recipe_files("Adding a metric", stop="**A counter of") == sorted(METRIC_EDITS, key=list(METRIC_EDITS).index)


def test_the_strategy_recipe_lists_the_files_its_toy_edits():
    steps = recipe_steps("Adding a strategy")
    assert len(steps) == len(STRATEGY_EDITS) == 3
    assert "`src/vlmpath/paths/`" in steps[0] and "`encode.py`" in steps[0]  # the toy's stage module
    assert recipe_files("Adding a strategy")[1:] == ["docs/measures.md", "src/vlmpath/core/choice_names.py"]


def test_routine_counters_are_incremented_only_where_the_metric_recipe_says():
    # The "counter of the routine's own events" variant lists where each routine counts:
    # every module that increments an existing counter is one the recipe names.
    named = set(re.findall(r"`(src/vlmpath/[\w/]+\.py)`", PAGE.read_text(encoding="utf-8")))
    incrementing = {str(p.relative_to(ROOT)) for p in (ROOT / "src/vlmpath").rglob("*.py")
                    if re.search(r"stats\.(encoder_calls|cache_hits) \+= 1", p.read_text(encoding="utf-8"))}
    assert incrementing and incrementing <= named, incrementing - named


# --- a CI job -----------------------------------------------------------------------------
def unlisted_workflows(root: Path) -> dict[str, list[str]]:
    """Workflows the trust tests do not walk, and those docs/ci-security.md's table lacks."""
    names = sorted(p.name for p in (root / ".github" / "workflows").glob("*.yml"))
    walked = set(re.findall(r'WORKFLOWS / "([\w.-]+\.yml)"', (root / "tests" / "test_workflows.py").read_text()))
    table = {m for m in re.findall(r"^\| `([\w.-]+\.yml)` \|", (root / "docs" / "ci-security.md").read_text(), re.M)}
    return {"tests/test_workflows.py": [n for n in names if n not in walked],
            "docs/ci-security.md": [n for n in names if n not in table]}


def test_every_workflow_is_walked_by_the_trust_tests_and_in_the_security_table():
    assert unlisted_workflows(ROOT) == {"tests/test_workflows.py": [], "docs/ci-security.md": []}


def test_a_toy_ci_job_needs_exactly_the_three_files_of_the_recipe(tmp_path):
    for rel in (".github/workflows", "tests/test_workflows.py", "docs/ci-security.md"):
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    (tmp_path / ".github/workflows/toy-job.yml").write_text("name: toy\non: workflow_dispatch\njobs: {}\n")
    assert unlisted_workflows(tmp_path) == {"tests/test_workflows.py": ["toy-job.yml"],
                                            "docs/ci-security.md": ["toy-job.yml"]}
    tw = tmp_path / "tests/test_workflows.py"
    tw.write_text(tw.read_text().replace('MAIN_WF = WORKFLOWS / "bench-main.yml"\n',
                                         'MAIN_WF = WORKFLOWS / "bench-main.yml"\nTOY_WF = WORKFLOWS / "toy-job.yml"\n'))
    sec = tmp_path / "docs/ci-security.md"
    sec.write_text(sec.read_text().replace("| `bench-pr.yml` |", "| `toy-job.yml` | dispatch | main's | hosted | read | nothing |\n| `bench-pr.yml` |", 1))
    assert unlisted_workflows(tmp_path) == {"tests/test_workflows.py": [], "docs/ci-security.md": []}
    listed = recipe_files("Adding a CI job")
    assert listed == [".github/workflows/<name>.yml", "tests/test_workflows.py", "docs/ci-security.md"]


# --- an engine ----------------------------------------------------------------------------
TOY_ENGINE = '''"""A toy engine in the tree (tests/test_recipes.py)."""
from vlmpath.engines.registry import EngineEntry

ENGINE = EngineEntry(name="toy", package="toy-engine", import_name="toyeng",
                     adapter="vlmpath.engines.known.toy:ToyEngine",
                     ci_paths=("toyeng/merge.py",), example_version="1.0")
'''

_ENGINE_CHECK = '''
import json, sys
from pathlib import Path
from vlmpath.engines import registry
from vlmpath.render import ci_templates
root = Path(sys.argv[1])
before = ci_templates.stale(root)
for name, text in ci_templates.render_all(root).items():
    (root / "ci/templates" / name).write_text(text)
print(json.dumps({"names": list(registry.names()), "missing": before, "after": ci_templates.stale(root)}))
'''


def _run(root: Path, code: str, *args: str, may_fail: bool = False) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=root, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "src"), "HOME": str(root)}, timeout=300)
    if r.returncode != 0 and may_fail:
        return {"crashed": r.stderr[-500:], "table": False}
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_toy_engine_in_the_tree_needs_its_entry_and_the_three_generated_templates(tmp_path):
    root = copy_repo(tmp_path, ("src", "ci"))
    (root / "src/vlmpath/engines/known/toy.py").write_text(TOY_ENGINE)
    got = _run(root, _ENGINE_CHECK, str(root))
    assert "toy" in got["names"]
    assert sorted(got["missing"]) == ["toy-bench-comment.yml", "toy-bench-gpu.yml", "toy-bench-pr.yml"]
    assert got["after"] == []
    steps = recipe_steps("Adding an engine")
    assert recipe_files("Adding an engine")[0] == "src/vlmpath/engines/known/<name>.py"
    assert all(f"`{n}`" in steps[3] for n in ("ci/templates/<name>-bench-pr.yml", "<name>-bench-gpu.yml",
                                               "<name>-bench-comment.yml"))


# --- the measured toys (real measurement on the copy) --------------------------------------
_MEASURE_CHECK = '''
import contextlib, dataclasses, io, json, sys
sys.path.insert(0, ".")
from vlmpath.cli import main
out_file, extra = sys.argv[1], sys.argv[2:]
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = main(["measure", "--workload", "video", "--repeat", "1", "--no-syncs", "--threads", "1",
               "--json", out_file, *extra])
got = {"rc": rc, "table": "toy_rows" in buf.getvalue()}
if rc == 0:
    from vlmpath.suite.record import read_records
    from vlmpath.compare.from_records import run_from_records
    from vlmpath.compare.verdict import compare
    from vlmpath.render.comment import render_markdown
    rec = read_records(out_file)[0]
    value = getattr(rec, "toy_rows", None)
    got.update(value=value, accuracy=rec.accuracy, error=rec.error)
    base = run_from_records([rec], machine="m", commit="a" * 40)
    got["metric"] = any(m.benchmark.endswith("track_toy_rows") for m in base.machines[0].metrics)
    if value is not None:
        head = run_from_records([dataclasses.replace(rec, toy_rows=value - 1)], machine="m", commit="b" * 40)
        rep = compare(base, head)
        got["regression"] = [c.benchmark for c in rep.regressions]
        got["comment"] = "track\\\\_toy\\\\_rows" in render_markdown(rep)
from vlmpath.suite import cases
got["asv_strategies"] = list(cases.ENCODE_STRATEGY_NAMES)
import benchmarks.bench_embed as be
got["asv_track"] = hasattr(be.EmbedRoutine, "track_toy_rows")
print(json.dumps(got))
'''


def _measure(root: Path, *extra: str, may_fail: bool = False) -> dict:
    return _run(root, _MEASURE_CHECK, str(root / "out.jsonl"), *extra, may_fail=may_fail)


@pytest.mark.e2e
def test_a_toy_metric_reaches_everywhere_with_exactly_the_recipes_three_files(tmp_path):
    full = copy_repo(tmp_path / "full")
    apply(full, METRIC_EDITS)
    got = _measure(full, "--pipeline", "default")
    assert got["rc"] == 0 and got["value"] and got["table"] and got["metric"] and got["asv_track"], got
    assert got["regression"] == ["engine_embed.Engine.track_toy_rows"] and got["comment"], got
    for left_out in METRIC_EDITS:  # each file is needed: without it the toy shows nowhere
        root = copy_repo(tmp_path / Path(left_out).stem)
        apply(root, {k: v for k, v in METRIC_EDITS.items() if k != left_out})
        got = _measure(root, "--pipeline", "default", may_fail=True)
        assert not (got.get("value") and got.get("metric") and got["table"]), (left_out, got)


def _strategy_listed(root: Path) -> bool:
    row = next(ln for ln in (root / "docs/measures.md").read_text().splitlines() if ln.startswith("| encode |"))
    return "`toy_batched`" in row


@pytest.mark.e2e
def test_a_toy_strategy_is_measured_benchmarked_and_listed_with_exactly_the_recipes_three_files(tmp_path):
    full = copy_repo(tmp_path / "full")
    apply(full, STRATEGY_EDITS)
    got = _measure(full, "--encode", "toy_batched")
    assert got["rc"] == 0 and got["accuracy"] == 1.0 and not got["error"], got
    assert "toy_batched" in got["asv_strategies"] and _strategy_listed(full)
    no_registry = copy_repo(tmp_path / "no_registry")
    apply(no_registry, {k: v for k, v in STRATEGY_EDITS.items() if k != "src/vlmpath/paths/encode.py"})
    r = subprocess.run([sys.executable, "-c", "from vlmpath.cli import main; raise SystemExit(main("
                        "['measure', '--encode', 'toy_batched', '--workload', 'video']))"],
                       cwd=no_registry, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(no_registry / "src"), "HOME": str(no_registry)})
    assert r.returncode == 2 and "toy_batched" in r.stderr
    no_docs = copy_repo(tmp_path / "no_docs", ("docs",))
    assert not _strategy_listed(no_docs)  # tests/test_docs_true.py fails on this copy's table
