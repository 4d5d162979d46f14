"""Does the docs site build with no warning, and does the strict build catch a broken link?

``.ci/run`` builds docs/ with ``mkdocs build --strict`` (mkdocs.yml: a link to a missing
page or anchor, and a page left out of the nav, are warnings, and strict turns them into a
failed build). Here the real site builds, and copies with a planted broken anchor, a link
to a missing page and an orphan page each fail naming it. Nothing is fetched: no external
link is checked (CI has no internet).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.e2e


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    # This interpreter's mkdocs (ci/setup.sh installs it into .venv), else one on the PATH.
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.fail("mkdocs is not installed; run: pip install -r ci/requirements-lint.txt")
    return subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strict_with_no_warning(tmp_path):
    r = _build(ROOT, tmp_path / "site")
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stderr
    assert (tmp_path / "site" / "reading-a-pr-comment" / "index.html").is_file()


@pytest.mark.parametrize("plant, words", [
    (("index.md", "[What it measures](measures.md)", "[What it measures](measures.md#no-such-anchor)"),
     "does not contain an anchor '#no-such-anchor'"),
    (("index.md", "[Commands](commands.md)", "[Commands](no-such-page.md)"), "'no-such-page.md'"),
    (("orphan.md", None, "# An orphan\n"), "orphan.md"),
])
def test_a_planted_broken_link_or_orphan_page_fails_the_build(tmp_path, plant, words):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copyfile(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    name, old, new = plant
    page = tmp_path / "docs" / name
    if old is None:
        page.write_text(new, encoding="utf-8")
    else:
        text = page.read_text(encoding="utf-8")
        assert old in text
        page.write_text(text.replace(old, new, 1), encoding="utf-8")
    r = _build(tmp_path, tmp_path / "site")
    assert r.returncode != 0 and words in r.stderr, r.stderr
