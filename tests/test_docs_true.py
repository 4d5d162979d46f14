"""Do the README, the docs site's pages and the code's comments name things that exist?

- every relative link (from the file's own folder) and every backticked repository path in
  the README and docs/*.md resolves to a file or folder inside this repository
  (``../shared/docs/...`` pointed outside it); mkdocs' strict build (.ci/run) checks the
  links between pages and their anchors;
- docs/measures.md's strategy table lists every registered strategy of each stage
  (``cumsum_index_copy`` was missing);
- every ``src/vlmpath/...py`` / ``vlmpath/...py`` path and every dotted ``vlmpath.x.y``
  name in the repository's text files is a module or package that exists (comments named
  ``ci_flow.py``, ``github.py`` and ``run.py`` at the top level after they moved).
Each check is also fed a planted stale name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
README = ROOT / "README.md"
MEASURES = ROOT / "docs" / "measures.md"
TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".sh", ".toml", ".json", ".txt", ".cfg", ".Dockerfile"}
SKIP_PARTS = {".git", ".venv", "__pycache__", "node_modules", ".asv", "build", "dist"}
_PATH = re.compile(r"(?<![\w/.-])((?:src/)?vlmpath/[\w/]+\.py)")
_DOTTED = re.compile(r"(?<![\w.])(vlmpath(?:\.\w+)+)")
_ALLOWED_DOTTED = {"vlmpath.x"}  # tests/test_layers.py's example of a module name
#: Files that plant names which do not exist, on purpose (each says why).
PLANTING = {"tests/test_docs_true.py": "the planted stale names of this test",
            "tests/test_one_home.py": "plants modules into a temporary copy of src/",
            "tests/test_layers.py": "plants modules into a temporary tree (private names, re-exports)",
            "tests/test_recipes.py": "writes the recipes' toy modules into a temporary copy of src/"}


def _text_files() -> list[Path]:
    """The repository's files (tracked or not yet added, never git-ignored build output)."""
    import subprocess

    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       cwd=ROOT, capture_output=True, text=True)
    names = r.stdout.split("\0") if r.returncode == 0 else [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")]
    paths = [ROOT / n for n in names if n]
    return [p for p in paths if p.is_file() and p.suffix in TEXT_SUFFIXES
            and not SKIP_PARTS & set(p.relative_to(ROOT).parts)]


def _module_exists(parts: list[str]) -> bool:
    base = SRC.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def stale_names(text: str) -> list[str]:
    out = []
    for m in _PATH.finditer(text):
        rel = m.group(1) if m.group(1).startswith("src/") else f"src/{m.group(1)}"
        if not (ROOT / rel).is_file():
            out.append(m.group(1))
    for m in _DOTTED.finditer(text):
        parts = m.group(1).split(".")
        if m.group(1) in _ALLOWED_DOTTED or parts[1].startswith("__"):
            continue
        # vlmpath.a.b.name: some prefix is a module, the rest an attribute of it.
        if not any(_module_exists(parts[:i]) for i in range(len(parts), 1, -1)):
            out.append(m.group(1))
    return out


def test_no_text_file_names_a_module_that_does_not_exist():
    stale = {rel: s for p in _text_files() if (rel := str(p.relative_to(ROOT))) not in PLANTING
             and (s := stale_names(p.read_text(encoding="utf-8", errors="replace")))}
    assert stale == {}


def test_a_planted_stale_module_name_is_seen():
    text = "# logic in src/vlmpath/ci_flow.py; see vlmpath/run.py and vlmpath.dashboard.localize_assets\n"
    assert stale_names(text) == ["src/vlmpath/ci_flow.py", "vlmpath/run.py", "vlmpath.dashboard.localize_assets"]
    assert stale_names("src/vlmpath/paths/inject.py, vlmpath.paths.inject.INJECTORS") == []


def outside_or_missing(text: str, folder: Path = ROOT) -> list[str]:
    """Links (relative to ``folder``, the file's own) and backticked repository paths
    (relative to the root) that leave the repository or name nothing."""
    links = re.findall(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)", text)
    paths = re.findall(r"`((?:\.\./|src/|docs/|docker/|ci/|tests/|benchmarks/)[\w./-]+)`", text)
    out = []
    for base, targets in ((folder, links), (ROOT, paths)):
        for t in targets:
            path = (base / t.split("#")[0]).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                out.append(t)
    return out


def _doc_pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", _doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_links_and_paths_stay_inside_the_repository(page):
    assert outside_or_missing(page.read_text(encoding="utf-8"), page.parent) == []


def test_a_planted_missing_or_outside_target_is_seen():
    assert outside_or_missing("(`docs`: `../shared/docs/embed-path.md`), [x](docs/nope.md)") == [
        "docs/nope.md", "../shared/docs/embed-path.md"]
    # A page's link is read from its own folder: docs/measures.md links commands.md, not docs/commands.md.
    assert outside_or_missing("[c](commands.md)", ROOT / "docs") == []
    assert outside_or_missing("[c](docs/commands.md)", ROOT / "docs") == ["docs/commands.md"]


@pytest.mark.parametrize("stage, registry", [
    ("encode", "vlmpath.paths.encode:ENCODE_STRATEGIES"), ("inject", "vlmpath.paths.inject:INJECTORS"),
    ("count", "vlmpath.paths.count:COUNTERS"), ("hash", "vlmpath.paths.hashing:HASH_PATHS")])
def test_the_strategy_table_lists_every_registered_strategy(stage, registry):
    import importlib

    module, name = registry.split(":")
    names = set(getattr(importlib.import_module(module), name))
    row = next(line for line in MEASURES.read_text(encoding="utf-8").splitlines()
               if line.startswith(f"| {stage} |"))
    listed = set(re.findall(r"`(\w+)`", row.split("|")[2]))
    assert names - listed == set(), f"docs/measures.md's {stage} row lacks {sorted(names - listed)}"
