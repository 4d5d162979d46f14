"""Does each shared format or helper live in exactly one module (no drifting copies)?

Issue 15 found git helpers in two modules, the failure-file format in five places, asv's
method prefixes in four and number formatting by unit in three. Each now has one home;
this reads the sources (library and asv suite) and fails when a copy comes back.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (what, pattern that only its home may contain, home relative to the repo root)
HOMES = [
    ("git helper", re.compile(r"""\[\s*["']git["']\s*,\s*["']-C["']"""), "src/vlmpath/core/git.py"),
    ("failure-file name", re.compile(r"""["']vlmpath-failures-"""), "src/vlmpath/core/failures.py"),
    ("failure-file variable", re.compile(r"""["']VLMPATH_FAILURES_FILE["']"""), "src/vlmpath/core/failures.py"),
    ("asv prefix list", re.compile(r"""\(\s*["'](track|time|peakmem|mem|timeraw)_["']\s*,"""),
     "src/vlmpath/core/asv_names.py"),
    ("seconds scaling", re.compile(r"""\(1e-3,\s*["']ms["']\)"""), "src/vlmpath/render/fmt.py"),
]
#: Named compatibility shims (benchmarks/_compat.py) may spell a name out for older packages.
SHIMS = {"benchmarks/_compat.py"}


def copies(files: dict[str, str]) -> list[str]:
    """``what in path`` for every match outside its home (and outside the named shims)."""
    found = []
    for what, pattern, home in HOMES:
        for rel, text in files.items():
            if rel != home and rel not in SHIMS and pattern.search(text):
                found.append(f"{what} in {rel}")
    return found


def _sources() -> dict[str, str]:
    paths = [*(ROOT / "src" / "vlmpath").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}


def test_each_shared_format_has_one_home():
    assert copies(_sources()) == []


def test_every_home_still_holds_its_pattern():
    files = _sources()
    missing = [what for what, pattern, home in HOMES if not pattern.search(files.get(home, ""))]
    assert missing == [], "a home lost its definition: update HOMES"


def test_a_planted_copy_is_found():
    files = _sources()
    files["src/vlmpath/ci/planted.py"] = 'subprocess.run(["git", "-C", repo, "status"])\nP = "vlmpath-failures-"\n'
    files["src/vlmpath/render/planted.py"] = 'for p in ("track_", "time_"):\n    pass\nS = ((1e-3, "ms"),)\n'
    assert sorted(copies(files)) == sorted([
        "git helper in src/vlmpath/ci/planted.py", "failure-file name in src/vlmpath/ci/planted.py",
        "asv prefix list in src/vlmpath/render/planted.py", "seconds scaling in src/vlmpath/render/planted.py"])

