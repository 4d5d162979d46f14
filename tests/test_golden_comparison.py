"""Does ``vlmpath compare --json`` still say exactly what it said for a fixed pair of runs?

The behaviour lock for refactors (issue 24): two checked-in pairs of real asv result sets
(``tests/fixtures/asv_results``, ``tests/fixtures/asv_report_results``; see their READMEs
for how they were recorded) are compared through the CLI entry point, and the comparison
JSON must equal the golden file under ``tests/data/golden/`` key for key and value for
value (floats included: the inputs are fixed, so the statistics are too).

A deliberate change of the comparison's output regenerates the golden files:

    PYTHONPATH=src python tests/test_golden_comparison.py

and the diff of ``tests/data/golden/`` goes into the same commit, for review.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "data" / "golden"

#: golden file stem -> (results dir, base sha prefix, head sha prefix)
PAIRS = {
    # skipped, partial runs, a timing (mann-whitney on samples) and a threshold regression
    "compare_asv_results": (HERE / "fixtures" / "asv_results", "e8bafdb4", "0b9c015c"),
    # failing cases on both sides, improvements, regressions, exact counters
    "compare_asv_report_results": (HERE / "fixtures" / "asv_report_results", "12413b37", "4e17ba22"),
}


def comparison_json(stem: str, out_dir: Path) -> tuple[int, str]:
    """(exit code, JSON text) of ``vlmpath compare BASE HEAD --results DIR --json FILE``."""
    from vlmpath.cli import main

    results, base, head = PAIRS[stem]
    out = out_dir / f"{stem}.json"
    rc = main(["compare", base, head, "--results", str(results), "--json", str(out)])
    return rc, out.read_text()


@pytest.mark.parametrize("stem", sorted(PAIRS))
def test_comparison_json_matches_golden(stem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text = comparison_json(stem, tmp_path)
    capsys.readouterr()  # the terminal table is not what is locked here
    golden = json.loads((GOLDEN / f"{stem}.json").read_text())
    assert rc == 1  # both pairs hold a regression
    assert json.loads(text) == golden, (
        f"the comparison JSON of {stem} changed; if intended, regenerate: "
        "PYTHONPATH=src python tests/test_golden_comparison.py")


def test_golden_files_are_not_trivial() -> None:
    # A golden file of nothing would lock nothing: each holds verdicts of every kind it claims.
    verdicts = {stem: {c["verdict"] for m in json.loads((GOLDEN / f"{stem}.json").read_text())["machines"]
                       for c in m["comparisons"]} for stem in PAIRS}
    assert verdicts["compare_asv_results"] >= {"regression", "improvement", "unchanged", "not comparable"}
    assert verdicts["compare_asv_report_results"] >= {"regression", "improvement", "unchanged", "not comparable"}


if __name__ == "__main__":  # regenerate: see the module docstring
    import contextlib
    import tempfile

    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for s in sorted(PAIRS):
            with contextlib.redirect_stdout(sys.stderr):  # the terminal table, not the result
                code, body = comparison_json(s, Path(tmp))
            (GOLDEN / f"{s}.json").write_text(body)
            print(f"wrote {GOLDEN / f'{s}.json'} (compare exit {code})", file=sys.stderr)
