"""Does ``vlmpath ci pr --engine-src`` catch the #25910 mistake in the real engine, and stay
green on a change that changes nothing?

A git repository is built from a released sglang source: the 0.5.23 wheel's ``sglang/``
unzipped into ``python/sglang/`` (the layout of sglang's own repository), committed as
released. Two commits on top of it:

- ``mistake``: the chunked-prefill full path (``_get_chunked_embedding_full`` in
  ``python/sglang/srt/managers/mm_schedule.py``, the path of every request whose item has
  several placeholder spans) splits the encoder output by placeholder-span counts, one
  span per item, as #25910's cross-request split did. A MiniCPM-like item (one item, N
  regions, N spans of rows) is then split wrongly: the encoder gave N spans of rows, the
  split expects one;
- ``copy``: the same path makes one careless extra copy of the flattened encoder output (a
  silent cost: accuracy, syncs and calls unchanged, a timing on a CPU runner cannot see
  it); the engine's routine count (``routine_aten_elements``, the tower replayed) must.

``vlmpath ci pr --engine-src`` between release and ``mistake`` must exit 1 and name the
accuracy drop on ``multi_region``; between release and ``copy`` it must exit 1 on that one
routine count with every other row of both workloads unchanged: those rows are the flow's
unchanged pair (two separate sglang processes on code the copy does not touch, what a
whitespace-only commit measured as a third flow). The engine flow that exits 0 on an
unchanged pair is ``test_engine_pr_vllm.py``'s ``--tower ours`` flow. tok/s is given a band
no timing can leave (``--config``): timings never decide a pass/fail test.

Needs an engine environment (``_engine_python``) and the released source: the wheel
(``_wheel``) or, as in CI, sglang 0.5.23 installed in that environment; skipped, with the
reason, where either is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from engine_pr_repo import ci_pr as run_ci_pr
from engine_pr_repo import git

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

RELEASE = "0.5.23"
WHEEL_DIRS = ("/work/engine-envs/wheels",)
ENV_DIRS = (f"/work/engine-envs/sglang-{RELEASE}",)
SCHEDULE = "python/sglang/srt/managers/mm_schedule.py"
WORKLOADS = ("multi_region", "many_small_images")
# The mistake, inserted right after the full path flattens a per-item encoder result: one
# split piece per item, sized by the item's first placeholder span. torch.split raises when
# the spans do not add up to the rows (what #26442 reported for MiniCPM-V).
ANCHOR = re.compile(r"^(?P<ind>[ \t]+)embedding = _flatten_embedding_result\(embedding\)\n", re.M)
MISTAKE = ("# vlmpath test: split the encoder output by placeholder-span counts (#25910)\n"
           "embedding = torch.cat(torch.split(embedding, [it.offsets[0][1] - it.offsets[0][0] + 1 "
           "for it in embedding_items_per_req], dim=0))\n")


def _wheel() -> Path | None:
    given = os.environ.get("VLMPATH_SGLANG_WHEEL")
    if given:
        return Path(given) if Path(given).is_file() else None
    for d in WHEEL_DIRS:
        found = sorted(Path(d).glob(f"sglang-{RELEASE}-*.whl"))
        if found:
            return found[0]
    return None


def _installed_release(python: str) -> Path | None:
    """The ``sglang/`` package installed in the engine environment, when it is RELEASE: the
    same files as the wheel's (CI has the environment, not the wheel). Found without
    importing sglang (``find_spec`` of a top-level package runs none of its code)."""
    code = ("import importlib.metadata as m, importlib.util as u; s = u.find_spec('sglang'); "
            "print(m.version('sglang')); print(list(s.submodule_search_locations)[0])")
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    lines = r.stdout.split()
    if r.returncode != 0 or len(lines) != 2 or lines[0] != RELEASE:
        return None
    return Path(lines[1])


def _extract_release(dest: Path) -> None:
    """``dest/sglang/`` = the released package: from the wheel, else from the engine env."""
    wheel = _wheel()
    if wheel is not None:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(dest, [n for n in z.namelist() if n.startswith("sglang/")])
        return
    shutil.copytree(_installed_release(_engine_python()), dest / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _engine_python() -> str | None:
    """VLMPATH_ENGINE_PYTHON, else the newest installed engine environment, else a known one."""
    given = os.environ.get("VLMPATH_ENGINE_PYTHON")
    if given:
        return given if Path(given).exists() else None
    try:
        from vlmpath.engines import envs

        newest = envs.env_for_tests("sglang")
        if newest is not None:
            return str(newest.python)
    except ImportError:
        pass
    for d in ENV_DIRS:
        if (Path(d) / "bin" / "python").exists():
            return str(Path(d) / "bin" / "python")
    return None


def _skip_reason() -> str | None:
    try:
        import vlmpath.suite.engine_run  # noqa: F401  (the adapter's entry point)
    except ImportError:
        return "the engine layer (vlmpath.suite.engine_run) is not in this checkout"
    python = _engine_python()
    if python is None:
        return (f"no engine environment: run `vlmpath engine install sglang=={RELEASE}` "
                "(or set VLMPATH_ENGINE_INSTALL for ci/setup.sh, or VLMPATH_ENGINE_PYTHON)")
    if _wheel() is None and _installed_release(python) is None:
        return (f"no released sglang {RELEASE} source: neither a wheel (VLMPATH_SGLANG_WHEEL, "
                f"{WHEEL_DIRS[0]}) nor sglang {RELEASE} installed in {python}")
    return None


def plant_mistake(text: str) -> str:
    """``mm_schedule.py`` with the span-count split planted; fails loudly if the anchor moved."""
    m = ANCHOR.search(text)
    assert m is not None, "anchor not found: _get_chunked_embedding_full changed in this release"
    ind = m.group("ind")[:-4]  # the statement after the ``if isinstance(embedding, list):`` block
    planted = "".join(ind + line + "\n" for line in MISTAKE.splitlines())
    new = text[:m.end()] + planted + text[m.end():]
    assert new != text and new.count("placeholder-span counts (#25910)") == 1
    return new


@pytest.fixture(scope="module")
def sglang_repo(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    repo = tmp_path_factory.mktemp("sglang") / "sglang"
    (repo / "python").mkdir(parents=True)
    _extract_release(repo / "python")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"sglang {RELEASE} as released")
    release = git(repo, "rev-parse", "HEAD")
    path = repo / SCHEDULE
    original = path.read_text(encoding="utf-8")

    git(repo, "checkout", "-q", "-b", "mistake")
    path.write_text(plant_mistake(original), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "chunked prefill: split encoder output by placeholder-span counts")
    mistake = git(repo, "rev-parse", "HEAD")
    assert git(repo, "diff", "--stat", release, mistake).count("mm_schedule.py") == 1

    git(repo, "checkout", "-q", "-b", "copy", release)
    m = ANCHOR.search(original)
    ind = m.group("ind")[:-4]
    path.write_text(original[:m.end()] + f"{ind}embedding = embedding.clone()  # vlmpath test: a careless copy\n"
                    + original[m.end():], encoding="utf-8")
    git(repo, "commit", "-q", "-am", "chunked prefill: copy the flattened encoder output")
    copy = git(repo, "rev-parse", "HEAD")
    return repo, {"release": release, "mistake": mistake, "copy": copy}


def ci_pr(repo: Path, base: str, head: str, out: Path, tmp: Path) -> tuple[int, str, float]:
    return run_ci_pr(repo, _engine_python(), base, head, out, tmp, WORKLOADS)


# Two engine processes per comparison, each importing sglang and building the tower: minutes
# on a busy 2-core box, so more than the suite's per-test default.
@pytest.mark.timeout(1500)
def test_the_span_count_split_is_caught_as_an_accuracy_drop_on_multi_region(sglang_repo, tmp_path):
    repo, c = sglang_repo
    code, comment, took = ci_pr(repo, c["release"], c["mistake"], tmp_path / "out", tmp_path)
    headline = comment.splitlines()[1].replace("\\", "") if comment else ""
    print(f"FIGURE mistake: exit {code} in {took:.0f}s; headline: {headline}")
    assert code == 1, comment
    # The split raises on multi_region: one failed case, named with what it placed first.
    assert "Engine multi_region (accuracy 1.00 -&gt; " in headline and "failing: RuntimeError" in headline
    report = json.loads((tmp_path / "out" / "comparison.json").read_text())
    rows = [r for m in report["machines"] for r in m["comparisons"]]
    (failed,) = [r for r in rows if r["verdict"] == "newly failing"]
    assert dict(failed["params"])["workload"] == "multi_region" and failed["finding"].startswith("accuracy 1.00 -> ")
    acc = {dict(r["params"])["workload"]: r for r in rows if r["benchmark"].endswith("track_accuracy")}
    assert "multi_region" not in acc  # the failed case's other rows are not compared
    assert acc["many_small_images"]["verdict"] == "unchanged"  # single-span items never reach the split
    records = [json.loads(x) for x in (tmp_path / "out" / "records" / "head.jsonl").read_text().splitlines()]
    assert {r["engine"].split("@")[0].split("==")[0] for r in records} == {"sglang"}
    assert git(repo, "worktree", "list").count("\n") == 0  # the side worktrees are gone


@pytest.mark.timeout(1500)
def test_a_careless_copy_is_caught_by_the_engines_routine_count_alone(sglang_repo, tmp_path):
    repo, c = sglang_repo
    code, comment, took = ci_pr(repo, c["release"], c["copy"], tmp_path / "out", tmp_path)
    print(f"FIGURE copy: exit {code} in {took:.0f}s; headline: {comment.splitlines()[1] if comment else ''}")
    assert code == 1, comment
    report = json.loads((tmp_path / "out" / "comparison.json").read_text())
    rows = [r for m in report["machines"] for r in m["comparisons"]]
    regressed = {(r["benchmark"].rsplit(".", 1)[1], dict(r["params"])["workload"]) for r in rows
                 if r["verdict"] == "regression"}
    assert regressed == {("track_routine_aten_elements", "multi_region")}, regressed
    # Every other row is the unchanged pair of the flow (two separate sglang processes on code
    # the copy does not touch, both workloads): judged, and unchanged.
    verdicts = {(r["benchmark"].rsplit(".", 1)[1], dict(r["params"])["workload"]): r["verdict"] for r in rows}
    others = {k: v for k, v in verdicts.items() if k != ("track_routine_aten_elements", "multi_region")}
    assert len(others) >= 2 * len(WORKLOADS) and set(others.values()) == {"unchanged"}, others
    assert {w for _, w in others} == set(WORKLOADS), others
    row = next(r for r in rows if r["benchmark"].endswith("track_routine_aten_elements")
               and dict(r["params"])["workload"] == "multi_region")
    print(f"FIGURE copy: routine_aten_elements {row['base']:.0f} -> {row['head']:.0f}")
    # What grew names the copy: the operator and its share of the change.
    section = comment[comment.index("### What grew"):].replace("\\", "")  # the names are Markdown-escaped
    assert "routine_aten_elements(multi_region)" in section and "| `aten::clone` |" in section, section
    grew = json.loads((tmp_path / "out" / "ir-grew.json").read_text())
    assert grew[0]["aten"][0]["name"] == "aten::clone" and grew[0]["unit"] == "elements"
