"""Is every package the code and the tests import declared in pyproject.toml?

``pip install -e ".[test]"`` then ``pytest`` must collect and run: every third-party
import of ``src/`` is a dependency, every one of ``tests/`` and ``benchmarks/`` a
dependency or in the ``test`` extra, and every validator ci/requirements-lint.txt pins
is in the ``test`` extra too (the default tests run them). Imports are read with ``ast``
(function-level ones included) and mapped to their distribution through the installed
metadata. A planted undeclared import is shown to be seen.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: Imported, never installed beside vlmpath: each runs in its own environment.
ELSEWHERE = {"sglang": "imported only inside an engine environment (vlmpath engine install)",
             "vllm": "imported only inside an engine environment (vlmpath engine install)"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = {_name(r) for r in project["dependencies"]}
    return deps, deps | {_name(r) for r in project["optional-dependencies"]["test"]}


def imports(paths: list[Path]) -> dict[str, str]:
    """Top-level module -> one file importing it, third-party only."""
    from toy_engine import WRITTEN_MODULES  # the toy engine's plug-in, written by its tests

    local = ({p.stem for d in ("tests", "benchmarks") for p in (ROOT / d).glob("*.py")}
             | {"benchmarks", "vlmpath", *WRITTEN_MODULES})
    out: dict[str, str] = {}
    for f in paths:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for n in names:
                top = n.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local and top != "__future__":
                    out.setdefault(top, str(f.relative_to(ROOT)))
    return out


@functools.cache  # every installed distribution's files read (~0.4 s): once per run, not per test
def _distributions() -> dict:
    return md.packages_distributions()


def undeclared(found: dict[str, str], allowed: set[str]) -> list[str]:
    dists = _distributions()
    out = []
    for mod, where in sorted(found.items()):
        if mod in ELSEWHERE or mod == "tomli":  # tomli: declared for python < 3.11 only
            continue
        names = {_name(d) for d in dists.get(mod, [])}
        if not names & allowed:
            out.append(f"{mod} ({where}; distribution {sorted(names) or 'not installed'})")
    return out


def _py(*dirs: str) -> list[Path]:
    return [p for d in dirs for p in (ROOT / d).rglob("*.py")]


def test_every_import_of_the_package_is_a_dependency():
    deps, _ = declared()
    assert undeclared(imports(_py("src")), deps) == []


def test_every_import_of_the_tests_and_benchmarks_is_declared():
    _, with_test = declared()
    assert undeclared(imports(_py("tests", "benchmarks")), with_test) == []


def test_the_test_extra_installs_the_validators_the_tests_run():
    _, with_test = declared()
    lint = [_name(line) for line in (ROOT / "ci" / "requirements-lint.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert lint and set(lint) <= with_test, set(lint) - with_test


def test_a_planted_undeclared_import_is_seen():
    found = {"dockerfile_parse": "tests/dockerlint.py", "yaml": "x.py", "sglang": "y.py"}
    deps, _ = declared()
    assert undeclared(found, deps) == ["dockerfile_parse (tests/dockerlint.py; distribution ['dockerfile-parse'])"]
