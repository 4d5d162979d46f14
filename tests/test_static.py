"""Does every name the package uses exist, and every import it makes get used?

pyflakes reads each module of ``src/vlmpath`` without running it. A name used but never
defined is a ``NameError`` waiting for the one branch a test did not take: ``ci pr``'s
profile of a regressed case died that way (``COMMENT_FILE`` lost its import in a merge)
while every test stayed green. An import nothing uses is the trace such a merge leaves. The
planted module shows the check sees both.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "vlmpath"


def _flakes(*paths: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "pyflakes", *map(str, paths)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode in (0, 1), proc.stderr  # 1: it found something; else it did not run
    return [ln for ln in proc.stdout.splitlines() if ln.strip()]


def test_the_package_uses_no_undefined_name_and_imports_nothing_it_does_not_use():
    assert _flakes(SRC) == []


def test_the_check_sees_a_planted_undefined_name_and_an_unused_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import time\n\n\ndef profile(out):\n    return out / COMMENT_FILE\n")
    found = _flakes(planted)
    assert any("undefined name 'COMMENT_FILE'" in f for f in found)
    assert any("'time' imported but unused" in f for f in found)
    (tmp_path / "clean.py").write_text("import time\n\n\ndef now():\n    return time.time()\n")
    assert _flakes(tmp_path / "clean.py") == []
