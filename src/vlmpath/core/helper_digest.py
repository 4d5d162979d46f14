"""Which helper modules does each benchmark module measure through, and did they change?

asv's benchmark ``version`` hashes a benchmark's own source only. The suite's benchmarks
measure through shared helpers (``benchmarks/_common.py``: the builders, the timers, the
routine cache and the generated ``track_`` methods; ``benchmarks/_compat.py``), so a change
there changes how every benchmark that imports it measures while asv still sees the same
definition. A benchmark's definition is therefore *its asv version plus the digest of the
helpers it imports* (``helper_digests``): the PR flow runs head's benchmarks whose
helpers differ from base's as head's definitions, shown and not judged
(``pr.yardstick.changed_definitions``), and ``vlmpath run`` records the digests in its
run-info file so that ``ci alert`` never takes a baseline from commits whose benchmarks
measured through other helpers (``github.alert``).

Why not fold the digest into asv's ``version``: asv drops stored results whose version
differs from the suite's, so every helper edit would cut the dashboard's history of the
whole suite; the digest keeps the history and still keeps the judgement honest.

The digest is of each helper's syntax tree without docstrings (``ast.dump``), so comments,
docstrings and layout do not move it; any change of code does. The package's
``__init__.py`` runs on every import and always counts. A helper that does not parse is
hashed as bytes.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

INIT = "__init__"


def _tree(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return None


def _imports(tree: ast.Module, package: str, local: set[str]) -> set[str]:
    """Suite modules (flat files of the suite's directory) that ``tree`` imports."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1 or (node.level == 0 and (mod == package or mod.startswith(package + "."))):
                rest = mod if node.level == 1 else mod[len(package) + 1:]
                if rest:
                    out.add(rest.split(".")[0])
                else:  # from . import a, b  /  from benchmarks import a
                    out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + "."):
                    out.add(a.name.split(".")[1])
    return out & local


def _code_text(path: Path, tree: ast.Module | None) -> bytes:
    if tree is None:
        return path.read_bytes() if path.is_file() else b""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False).encode()


def helper_digests(bench_dir: str | Path) -> dict[str, str]:
    """Module name (file stem) -> sha256 of the suite modules it imports, directly or not
    (itself excluded, the package's ``__init__`` included); {} when there is no suite."""
    root = Path(bench_dir)
    if not root.is_dir():
        return {}
    files = {p.stem: p for p in sorted(root.glob("*.py")) if p.is_file()}
    trees = {name: _tree(p) for name, p in files.items()}
    direct = {name: _imports(t, root.name, set(files)) if t is not None else set() for name, t in trees.items()}
    texts: dict[str, bytes] = {}
    out = {}
    for name in files:
        if name == INIT:
            continue
        seen, todo = set(), list(direct[name]) + ([INIT] if INIT in files else [])
        while todo:
            n = todo.pop()
            if n not in seen and n != name:
                seen.add(n)
                todo.extend(direct.get(n, ()))
        h = hashlib.sha256()
        for n in sorted(seen):
            if n not in texts:
                texts[n] = _code_text(files[n], _tree(files[n]))
            h.update(n.encode() + b"\0" + texts[n] + b"\0")
        out[name] = h.hexdigest()
    return out


def module_of(benchmark: str) -> str:
    """The suite module of an asv benchmark name (``bench_embed.EmbedRoutine.track_x``)."""
    return benchmark.split(".", 1)[0]


def helpers_moved(base: dict[str, str] | None, head: dict[str, str] | None) -> set[str]:
    """Modules in both whose helpers differ (unknown on either side: none moved, as before)."""
    if not base or not head:
        return set()
    return {m for m in set(base) & set(head) if base[m] != head[m]}
