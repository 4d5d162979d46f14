"""Does the real counter turn a change of the routine's own code red and name it?

Both counters, natively (``ops``, the PR job's default: seconds, so in the default set) and
under callgrind (``e2e``), on copies of this source tree counted at once (one counter process
each, as the PR job counts base and head; mode ``routine``: the vision tower replayed from an
uncounted recording pass, and counted on its own per shape set). Two plants in the default
injector (``masked_scatter``): it also sorts the rows it injects (a planted ``torch.sort``),
and it calls an extra Python helper once per row. One small case
(``EmbedRoutine('default', 'video')``).

- natively: three sides, the tree itself (base) and one copy per plant: each plant alone is
  a regression of its own tally (the sort of aten elements, the helper of bytecodes), the
  tower tallies do not move, and "what grew" names ``aten::sort`` and the helper;
- under callgrind: valgrind's start-up with torch is the cost (minutes per process, one
  core each), so two sides: base and ONE copy carrying both plants. The routine count must
  be a regression, the tower count must not move (neither plant is in the tower), and the
  comment's "what grew" must name both ``aten::sort`` and the helper: the callgrind path
  sees and names each plant; that each alone is red is the native test's.

The unchanged pair is judged green on synthetic counts in ``test_instruction_gate.py``;
A/A figures come from ``vlmpath trust``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vlmpath.selfcheck import ir_cases
from vlmpath.compare.ir_grew import grew
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.render.ir_grew import render_grew

ROOT = Path(__file__).resolve().parents[1]
CASE = r"\('default', 'video'\)"
INJECT = "    dest.masked_scatter_(mask.expand_as(dest), rows.to(dest.dtype))\n"
PLANTS = {
    "sort": "    torch.sort(rows, dim=0)  # planted by tests/test_instruction_gate_e2e.py\n" + INJECT,
    "helper": "    for i in range(rows.shape[0]):  # planted by tests/test_instruction_gate_e2e.py\n"
              "        _planted_helper(rows, i)\n" + INJECT,
}
HELPER = "\n\ndef _planted_helper(rows, i):\n    return rows.shape[1] * i + 1\n"

def _copy(tmp: Path, name: str, plants: tuple[str, ...]) -> Path:
    """A copy of this tree as side ``name`` with ``plants`` (in order) in ``masked_scatter``."""
    src = tmp / name / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    inject = src / "vlmpath" / "paths" / "inject.py"
    text = inject.read_text(encoding="utf-8")
    assert text.count(INJECT) == 1, "masked_scatter changed: update the plant"
    planted = "".join(PLANTS[p][:-len(INJECT)] for p in plants) + INJECT
    inject.write_text(text.replace(INJECT, planted) + (HELPER if "helper" in plants else ""), encoding="utf-8")
    return src


def _sides(tmp_path: Path, counter: str, heads: dict[str, tuple[str, ...]]):
    """Base (this tree) and one planted copy per entry of ``heads`` (side name -> its plants),
    counted at once: (records by side and benchmark, ``RunResults`` by side)."""
    names = ("base", *heads)
    shas = {n: c * 40 for n, c in zip(names, "abcdef")}
    sides = [ir_cases.Side("base", ROOT / "src", shas["base"]),
             *(ir_cases.Side(n, _copy(tmp_path, n, plants), shas[n]) for n, plants in heads.items())]
    got = ir_cases.count_sides(sides, bench=CASE, threads=1, log=lambda m: None, profiles=tmp_path / "prof",
                               counter=counter)
    assert all(s["not_measured"] is None for s in got), got
    by = {n: {r["benchmark"]: r for r in s["records"]} for n, s in zip(names, got)}
    runs = {n: ir_cases.run_results(s, "cpu-e2e", shas[n]) for n, s in zip(names, got)}
    return by, runs, got


def _three_sides(tmp_path: Path, counter: str):
    by, runs, _ = _sides(tmp_path, counter, {"sort": ("sort",), "helper": ("helper",)})
    return by, runs


def _grew(tmp_path: Path, by: dict, bench: str, plant: str, unit: str):
    return grew(f"video ({plant})", tmp_path / "prof" / "base", tmp_path / "prof" / plant,
                by["base"][bench]["profile"], by[plant][bench]["profile"], unit=unit)


def test_the_native_counter_turns_each_planted_change_red_names_it_and_leaves_the_tower(tmp_path):
    """The PR job's default counter (``ops``): the sort is more aten elements, the helper more
    bytecodes; each is a regression of its tally, the other tally and both tower tallies
    stay unchanged, and what grew names ``aten::sort`` and the helper."""
    by, runs = _three_sides(tmp_path, "ops")
    b = ir_cases.OPS_BENCHES
    routine_b, routine_e = b[("routine", "bytecodes")], b[("routine", "elements")]
    towers = {b[("tower", "bytecodes")], b[("tower", "elements")]}
    assert all(set(x) == {routine_b, routine_e, *towers} for x in by.values()), by
    assert all(r["error"] is None and r["instructions"] > 1000 for x in by.values() for r in x.values()), by
    expected = {"sort": routine_e, "helper": routine_b}
    for plant, grown in expected.items():
        verdicts = {c.benchmark: c.verdict for c in compare(runs["base"], runs[plant], Thresholds.default()).all()}
        assert {k for k, v in verdicts.items() if v is Verdict.REGRESSION} == {grown}, (plant, verdicts)
        assert all(verdicts[t] is Verdict.UNCHANGED for t in towers), (plant, verdicts)
    g_sort = _grew(tmp_path, by, routine_e, "sort", "elements")
    g_help = _grew(tmp_path, by, routine_b, "helper", "bytecodes")
    assert g_sort.aten[0].name == "aten::sort" and g_sort.aten[0].share == pytest.approx(1.0), g_sort
    # The helper's own bytecodes and the planted loop's, in its caller, are what grew.
    assert {r.name for r in g_help.python[:2]} == {"vlmpath/paths/inject.py:_planted_helper",
                                                   "vlmpath/paths/inject.py:masked_scatter"}, g_help
    text = render_grew([g_sort, g_help])
    assert "`aten::sort`" in text and "inject.py:_planted_helper" in text and "bytecodes" in text
    sizes = {p: by[p][g]["instructions"] / by["base"][g]["instructions"] - 1 for p, g in expected.items()}
    print(f"native counts: base {by['base'][routine_b]['instructions']} bytecodes, "
          f"{by['base'][routine_e]['instructions']} elements; plants {sizes}; what grew:\n{text}")


@pytest.mark.e2e
@pytest.mark.timeout(2400)  # valgrind's start-up with torch: minutes per process, more on a loaded box
def test_planted_changes_of_the_routine_turn_its_count_red_and_are_named(tmp_path):
    if shutil.which("valgrind") is None:
        pytest.skip("needs valgrind (ci/setup.sh installs it)")
    by, runs, got = _sides(tmp_path, "callgrind", {"both": ("sort", "helper")})
    routine, tower = ir_cases.ROUTINE_BENCH, ir_cases.TOWER_BENCH
    assert all(set(b) == {routine, tower} for b in by.values()), by
    assert all(r["error"] is None and r["instructions"] > 100_000 for b in by.values() for r in b.values()), by
    verdicts = {c.benchmark: c.verdict for c in compare(runs["base"], runs["both"], Thresholds.default()).all()}
    assert verdicts == {routine: Verdict.REGRESSION, tower: Verdict.UNCHANGED}, by
    g = grew("video (sort + helper)", tmp_path / "prof" / "base", tmp_path / "prof" / "both",
             by["base"][routine]["profile"], by["both"][routine]["profile"])
    assert "aten::sort" in [r.name for r in g.aten], g
    assert "vlmpath/paths/inject.py:_planted_helper" in [r.name for r in g.python], g
    text = render_grew([g])
    assert "`aten::sort`" in text and "inject.py:_planted_helper" in text
    size = by["both"][routine]["instructions"] / by["base"][routine]["instructions"] - 1
    print(f"routine-only counts: base {by['base'][routine]['instructions']}, both plants {size:+.1%}; "
          f"tower {by['base'][tower]['instructions']}; seconds per side {[s['seconds'] for s in got]}, "
          f"CPU phases {[s['phases'] for s in got]}; what grew:\n{text}")
