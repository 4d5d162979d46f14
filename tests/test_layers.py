"""Do the layers' imports only go down, with no circle, no private name taken across modules
and every name imported from its home (no re-export shim)?

The layer order is the one docs/architecture.md gives: ``core`` < ``measure`` < ``paths`` <
``engines`` < ``suite`` < ``serving`` < ``compare`` < ``render`` < ``runner`` < ``github`` <
``selfcheck`` < ``pr`` < ``cli``. A module may import
from its own layer or any layer below, never above; imports inside functions count too
(they are how cycles hide). Read from the source with ``ast``, so a broken import in one
module still lets the others be checked. A module past ``MAX_LINES`` is reported as a
warning, never a failure: a module is split where it has a seam (docs/contributing.md),
not to meet a number.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "vlmpath"
LAYERS = ["core", "measure", "paths", "engines", "suite", "serving", "compare", "render",
          "runner", "github", "selfcheck", "pr", "cli"]
MAX_LINES = 420  # "about 400": past this a module is worth a look for a seam (a warning)


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "vlmpath" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def _imports(path: Path, as_module: str | None = None) -> set[str]:
    """Every vlmpath module this file imports, at any depth of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = (as_module or _module_name(path)).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("vlmpath"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if not mod.startswith("vlmpath"):
                continue
            # "from vlmpath.x import y" may import the submodule y
            for a in node.names:
                candidate = f"{mod}.{a.name}"
                sub = SRC.parent / Path(*candidate.split("."))
                out.add(candidate if sub.with_suffix(".py").exists() or sub.is_dir() else mod)
    return out


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in SRC.rglob("*.py")}


def test_every_module_sits_in_a_layer():
    stray = [m for m in _graph() if m != "vlmpath" and _layer(m) is None]
    assert not stray, f"modules outside the layer packages {LAYERS}: {stray}"


def test_imports_only_go_down():
    upward = []
    for mod, deps in _graph().items():
        mine = _layer(mod)
        if mine is None:
            continue
        for dep in deps:
            theirs = _layer(dep)
            if theirs is not None and LAYERS.index(theirs) > LAYERS.index(mine):
                upward.append(f"{mod} ({mine}) imports {dep} ({theirs})")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    graph = _graph()
    seen: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for dep in sorted(graph.get(node, ())):
            if dep not in graph:
                continue
            if seen.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in seen:
                visit(dep, stack + [dep])
        seen[node] = 2

    for start in sorted(graph):
        if start not in seen:
            visit(start, [start])
    # a package's __init__ importing its own submodule is not a cycle worth failing on
    real = [c for c in cycles if not all(x.startswith(c[0]) or c[0].startswith(x) for x in c)]
    assert not real, "import cycles:\n" + "\n".join(" -> ".join(c) for c in real)


def over_the_cap(root: Path = SRC, limit: int = MAX_LINES) -> list[str]:
    """``path (n lines)`` for every module under ``root`` longer than ``limit``, longest first."""
    sizes = [(len(p.read_text(encoding="utf-8").splitlines()), p) for p in root.rglob("*.py")]
    return [f"{p.relative_to(root)} ({n} lines)" for n, p in sorted(sizes, key=lambda x: (-x[0], str(x[1])))
            if n > limit]


def warn_over_the_cap(root: Path = SRC) -> list[str]:
    """The modules past the cap, said in one warning (pytest's summary shows it)."""
    over = over_the_cap(root)
    if over:
        warnings.warn(f"{len(over)} module(s) past {MAX_LINES} lines (split at a seam if one shows, "
                      "docs/contributing.md): " + ", ".join(over), stacklevel=2)
    return over


def test_modules_past_the_line_cap_are_a_warning_not_a_failure():
    assert all(x.endswith(" lines)") for x in warn_over_the_cap())


def test_the_line_cap_warns_about_a_planted_long_module_and_passes(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "core" / "at_cap.py").write_text("x = 1\n" * MAX_LINES)
    with pytest.warns(UserWarning, match=rf"1 module\(s\) past {MAX_LINES} lines .*core/long.py \({MAX_LINES + 1} lines\)"):
        assert warn_over_the_cap(tmp_path) == [f"core/long.py ({MAX_LINES + 1} lines)"]


def test_layer_test_can_see_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: a planted upward import in a copy of a core module is found."""
    fake = SRC / "core" / "errors.py"
    planted = tmp_path / "errors.py"
    planted.write_text(fake.read_text() + "\nfrom vlmpath.github import comment  # planted\n")
    deps = _imports(planted, as_module="vlmpath.core.errors")
    assert "vlmpath.github.comment" in deps


# --- private names stay home (issue 37): an underscore name is its module's own --------------
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(root: Path = SRC) -> list[str]:
    """``module:line name`` for every underscore name a module under ``root`` takes from
    another vlmpath module: ``from vlmpath.x import _y``, or ``x._y`` on a vlmpath module it
    imported (``import vlmpath.x as x``, ``from vlmpath import x``). A name two modules share
    is a seam: it gets a public name, or moves to the one module that uses it."""
    mods = {_module_name_under(p, root): p for p in root.rglob("*.py")}
    out = []
    for mod, path in sorted(mods.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        bound: dict[str, str] = {}  # local name -> the vlmpath module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = (".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                       if node.level else node.module or "")
                if src.split(".")[0] != "vlmpath":
                    continue
                for a in node.names:
                    if _private(a.name) and src != mod:
                        out.append(f"{mod}:{node.lineno} {src}.{a.name}")
                    if f"{src}.{a.name}" in mods:
                        bound[a.asname or a.name] = f"{src}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "vlmpath":
                        bound[a.asname or a.name] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                chain, v = [], node.value
                while isinstance(v, ast.Attribute):
                    chain.append(v.attr)
                    v = v.value
                if isinstance(v, ast.Name) and v.id in bound:
                    target = ".".join([bound[v.id], *reversed(chain)])
                    if target in mods and target != mod:
                        out.append(f"{mod}:{node.lineno} {target}.{node.attr}")
    return out


def _module_name_under(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_takes_another_modules_private_name():
    assert private_imports() == []


def test_the_private_name_gate_sees_planted_crossings(tmp_path):
    pkg = tmp_path / "vlmpath"
    (pkg / "core").mkdir(parents=True)
    for d in (pkg, pkg / "core"):
        (d / "__init__.py").write_text("")
    (pkg / "core" / "home.py").write_text("def _helper():\n    return 1\n\n\nX = _helper()  # its own: fine\n")
    (pkg / "core" / "user.py").write_text(
        "from vlmpath.core.home import X, _helper\n"
        "from vlmpath.core import home\n"
        "import vlmpath.core.home as h\n"
        "from .home import _helper as again\n"
        "from vlmpath.core.home import X as _x  # a public name kept private here: fine\n"
        "Y = home._helper() + h._helper() + home.__name__.count('x')\n")
    assert private_imports(pkg) == ["vlmpath.core.user:1 vlmpath.core.home._helper",
                                    "vlmpath.core.user:4 vlmpath.core.home._helper",
                                    "vlmpath.core.user:6 vlmpath.core.home._helper",
                                    "vlmpath.core.user:6 vlmpath.core.home._helper"]


# --- every name imported from the module that defines it (no re-export shims) --------------
def re_exports(repo: Path = SRC.parents[1]) -> list[str]:
    """``file:line from module import name -> home.name`` for every import (library, tests,
    asv suite) of a name from a module that only imports it in turn: after a split, the old
    module keeps importing the moved names "so callers keep working", and a reader finds a
    name in a module that does not define it. Import it from its home instead."""
    src = repo / "src" / "vlmpath"
    bound: dict[str, dict[str, tuple[str, str]]] = {}  # module -> {name: (module, name) it imports}
    for path in src.rglob("*.py"):
        names = bound.setdefault(_module_name_under(path, src), {})
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vlmpath":
                names.update({a.asname or a.name: (node.module, a.name) for a in node.names})

    def home(module: str, name: str) -> tuple[str, str]:
        for _ in range(10):  # a chain of re-exports, to the definer (a re-export may rename)
            nxt = bound.get(module, {}).get(name)
            if nxt is None or ".".join(nxt) in bound:  # defined here, or a submodule
                break
            module, name = nxt
        return module, name

    out = []
    for path in sorted(p for d in ("src", "tests", "benchmarks") for p in (repo / d).rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in bound:
                for a in node.names:
                    where = home(node.module, a.name)
                    if where[0] != node.module:
                        out.append(f"{path.relative_to(repo)}:{node.lineno} from {node.module} import {a.name}"
                                   f" -> {'.'.join(where)}")
    return out


def test_names_are_imported_from_their_home():
    assert re_exports() == []


def test_a_planted_re_export_is_found(tmp_path):
    pkg = tmp_path / "src" / "vlmpath"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "home.py").write_text("X = 1\nY = 2\n")
    (pkg / "shim.py").write_text("from vlmpath.home import X, Y as Z  # noqa: F401\n\nW = 3\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_user.py").write_text("def f():\n    from vlmpath.shim import W, X, Z\n    return W, X, Z\n")
    assert re_exports(tmp_path) == ["tests/test_user.py:2 from vlmpath.shim import X -> vlmpath.home.X",
                                    "tests/test_user.py:2 from vlmpath.shim import Z -> vlmpath.home.Y"]


# --- parameter hygiene (issue 37): options travel as records, not as long argument lists ---------
MAX_PARAMS = 8
ORCHESTRATION = ("pr", "runner", "cli")


def long_signatures(root: Path, packages=ORCHESTRATION, limit: int = MAX_PARAMS) -> list[str]:
    """``path:function (n)`` for every function under ``packages`` with more than ``limit``
    parameters (``self``/``cls`` not counted)."""
    import ast

    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                    n = len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)
                    if n > limit:
                        out.append(f"{path.relative_to(root)}:{node.name} ({n})")
    return out


def test_no_function_in_pr_runner_or_cli_takes_more_than_8_parameters():
    assert long_signatures(SRC) == []


def test_the_parameter_gate_sees_a_planted_long_signature(tmp_path):
    (tmp_path / "pr").mkdir()
    (tmp_path / "pr" / "flow.py").write_text("def run(self, a, b, c, d, e, f, g, h, *, i=1):\n    pass\n")
    assert long_signatures(tmp_path) == ["pr/flow.py:run (9)"]
