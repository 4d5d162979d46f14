"""Do the GitHub Actions workflows match GitHub's workflow schema?

check-jsonschema (pinned in ci/requirements-lint.txt) ships the schema, so this runs
offline. The validator itself is shown to reject a bad workflow and accept a good one, so
a pass on the real files means something.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def _check_jsonschema() -> str:
    tool = (shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
            or shutil.which("check-jsonschema"))
    if tool is None:
        pytest.fail("check-jsonschema is not installed; run: pip install -r ci/requirements-lint.txt")
    return tool


def _validate(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_check_jsonschema(), "--builtin-schema", "vendor.github-workflows",
                           *map(str, files)], capture_output=True, text=True, timeout=120)


def workflow_files() -> list[Path]:
    return sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


def test_workflows_match_the_github_schema():
    files = workflow_files()
    if not files:
        pytest.skip(f"no workflow file in {WORKFLOWS.relative_to(ROOT)} yet (written by another engineer)")
    r = _validate(*files)
    assert r.returncode == 0, r.stdout + r.stderr


GOOD = """\
name: bench
on:
  pull_request:
permissions:
  contents: read
jobs:
  bench:
    runs-on: ubuntu-latest
    timeout-minutes: 30
    steps:
      - uses: actions/checkout@v4
      - run: echo ok
"""


def test_validator_accepts_a_good_workflow(tmp_path):
    good = tmp_path / "good.yml"
    good.write_text(GOOD)
    r = _validate(good)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("bad", [
    GOOD.replace("    steps:\n      - uses: actions/checkout@v4\n      - run: echo ok\n",
                 "    steps: echo ok\n"),
    GOOD.replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"),
    GOOD.replace("timeout-minutes: 30", "timeout-minutes: [30]"),
], ids=["steps-not-a-list", "misspelt-runs-on", "timeout-not-a-number"])
def test_validator_rejects_a_bad_workflow(tmp_path, bad):
    path = tmp_path / "bad.yml"
    path.write_text(bad)
    r = _validate(path)
    assert r.returncode != 0
    assert "Schema validation errors" in r.stdout and "bad.yml" in r.stdout
