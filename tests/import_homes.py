"""Which ``from vlmpath.<module> import name`` lines take a name from a module that only re-exports it?

After a module is split to stay under the size limit, the old module tends to keep
importing the moved names "so callers keep working": a re-export shim. A reader then
finds a name in a module that does not define it. ``re_exports`` finds every such import
(library, tests and asv suite) and the module that defines the name; ``tests/test_one_home.py``
fails on any. ``python tests/import_homes.py --fix [ROOT]`` rewrites them in place (one
import line per home, names and aliases kept), e.g. after merging a branch written
against a shim.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _foreign(root: Path) -> tuple[dict[str, dict[str, tuple[str, str]]], set[str]]:
    """module -> {name bound by a top-level ``from vlmpath... import``: (module, name)}."""
    src = root / "src"
    mods: dict[str, dict[str, tuple[str, str]]] = {}
    for p in (src / "vlmpath").rglob("*.py"):
        f: dict[str, tuple[str, str]] = {}
        for node in ast.parse(p.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vlmpath"):
                for a in node.names:
                    f[a.asname or a.name] = (node.module, a.name)
        mods[_module_name(p, src)] = f
    return mods, set(mods)


def _home(mods, names: set[str], module: str, name: str) -> tuple[str, str]:
    """(defining module, the name it defines it under): a re-export may rename."""
    for _ in range(10):  # follow a chain of re-exports to the definer
        src = mods.get(module, {}).get(name)
        if src is None or f"{src[0]}.{src[1]}" in names:  # defined here, or a submodule
            return module, name
        module, name = src
    return module, name


def _files(root: Path) -> Iterable[Path]:
    for d in ("src", "tests", "benchmarks"):
        yield from sorted((root / d).rglob("*.py"))


def re_exports(root: Path = ROOT) -> list[tuple[Path, ast.ImportFrom, dict[str, tuple[str, str]]]]:
    """(file, import node, {name: (its home, its name there)}) for every import of a
    re-exported name."""
    mods, names = _foreign(root)
    out = []
    for p in _files(root):
        try:
            tree = ast.parse(p.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in mods:
                moved = {a.name: _home(mods, names, node.module, a.name) for a in node.names}
                moved = {n: h for n, h in moved.items() if h[0] != node.module}
                if moved:
                    out.append((p, node, moved))
    return out


def _statement(indent: str, module: str, aliases: list[ast.alias], comment: str) -> str:
    parts = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in aliases]
    one = f"{indent}from {module} import {', '.join(parts)}{comment}"
    if len(one) <= 110:
        return one
    body = "".join(f"{indent}    {x},\n" for x in parts)
    return f"{indent}from {module} import ({comment}\n{body}{indent})"


def fix(root: Path = ROOT) -> list[str]:
    """Rewrite every re-export import in place; returns the files changed."""
    by_file: dict[Path, list[tuple[ast.ImportFrom, dict[str, tuple[str, str]]]]] = {}
    for p, node, moved in re_exports(root):
        by_file.setdefault(p, []).append((node, moved))
    for p, items in by_file.items():
        lines = p.read_text(encoding="utf-8").split("\n")
        for node, moved in sorted(items, key=lambda x: -x[0].lineno):
            first, last = node.lineno - 1, node.end_lineno - 1
            indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
            tail = lines[last].split(")", 1)[-1] if "(" in lines[first] else lines[last][node.end_col_offset:]
            comment = "  " + tail.strip() if tail.strip().startswith("#") else ""
            groups: dict[str, list[ast.alias]] = {}
            for a in node.names:
                home, real = moved.get(a.name, (node.module, a.name))
                local = a.asname or a.name  # the name the importer uses stays
                groups.setdefault(home, []).append(ast.alias(real, None if local == real else local))
            new = [_statement(indent, m, als, comment if i == 0 else "") + _MARK for i, (m, als) in
                   enumerate(sorted(groups.items()))]
            lines[first:last + 1] = "\n".join(new).split("\n")
        p.write_text("\n".join(lines), encoding="utf-8")
        _tidy(p)
    return sorted(str(p) for p in by_file)


#: Marks the statements ``fix`` wrote, so that ``_tidy`` touches only their runs.
_MARK = "  #<import_homes>"


def _tidy(p: Path) -> None:
    """Merge and sort each run of adjacent ``from vlmpath... import`` lines that ``fix``
    changed (isort's order; a run holding another comment is left alone)."""
    text = p.read_text(encoding="utf-8")
    lines = text.split("\n")
    runs: list[list[ast.ImportFrom]] = []
    for node in ast.walk(ast.parse(text)):
        run: list[ast.ImportFrom] = []
        for stmt in getattr(node, "body", []) if isinstance(getattr(node, "body", None), list) else []:
            adjacent = run and stmt.lineno == run[-1].end_lineno + 1
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("vlmpath") and (adjacent or not run):
                run.append(stmt)
                continue
            if len(run) > 1:
                runs.append(run)
            run = [stmt] if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("vlmpath") else []
        if len(run) > 1:
            runs.append(run)
    for run in sorted(runs, key=lambda r: -r[0].lineno):
        first, last = run[0].lineno - 1, run[-1].end_lineno - 1
        block = [ln.replace(_MARK, "") for ln in lines[first:last + 1]]
        if not any(_MARK in ln for ln in lines[first:last + 1]) or any("#" in ln for ln in block):
            continue
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        groups: dict[str, list[ast.alias]] = {}
        for stmt in run:
            for a in stmt.names:
                if all((a.name, a.asname) != (b.name, b.asname) for b in groups.get(stmt.module, [])):
                    groups.setdefault(stmt.module, []).append(a)
        new = [_statement(indent, m, sorted(als, key=lambda a: (not a.name.isupper(), not a.name[:1].isupper(),
                                                                 a.name.lower())), "")
               for m, als in sorted(groups.items())]
        lines[first:last + 1] = "\n".join(new).split("\n")
    p.write_text("\n".join(ln.replace(_MARK, "") for ln in lines), encoding="utf-8")


if __name__ == "__main__":
    root = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT
    if sys.argv[1:2] == ["--fix"]:
        for f in fix(root):
            print("rewrote", f)
    else:
        for p, node, moved in re_exports(root):
            print(f"{p}:{node.lineno}: from {node.module} import {', '.join(sorted(moved))} -> "
                  + ", ".join(f"{m}.{n}" for m, n in moved.values()))
