"""Which CI workflow files does an engine repository get, and how are they made from one source?

``ci/templates/source/*.yml.in`` hold each workflow once, for any engine; ``engines()`` reads
what differs per engine from the engine registry (its name, the release whose dependency set its environment
takes, the files of its multimodal path that start the CPU check). ``render_all`` fills
every source for every engine into ``<engine>-<source name>.yml``; the rendered files are
checked in under ``ci/templates/`` (an engine's maintainers copy them) and
``tests/test_engine_templates.py`` fails when they differ from a fresh render. An engine added
as a plug-in renders its own the same way (``vlmpath ci templates --engine NAME --out DIR``),
into its own repository rather than vlmpath's.

Regenerate after editing a source or the table, from the repository root:
``vlmpath ci templates --write`` (``--check``: exit 1 if stale).

Placeholders are ``@NAME@`` (GitHub's own ``${{ }}`` stays literal): ``@ENGINE@``,
``@ENGINE_UPPER@`` (variable names), ``@RELEASE@`` (the default release), ``@PATHS@`` (the
``paths:`` list, indented for its place).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SOURCE_DIR = Path("ci/templates/source")
OUT_DIR = Path("ci/templates")


@dataclass(frozen=True)
class TemplateEngine:
    name: str                 # ``vlmpath engine install NAME==X``; the engine registry's name
    release: str              # default of the <NAME>_ENV_RELEASE repository variable
    paths: tuple[str, ...]    # files of the engine's embedding path: a PR touching one is measured


def engines(names: Sequence[str] | None = None) -> tuple[TemplateEngine, ...]:
    """One row per engine of the registry (built in or a plug-in) that names its ``ci_paths``:
    its example release and its embedding path's files. ``names``: only those engines, each
    refused in one line when the registry does not know it or its entry names no ``ci_paths``."""
    from vlmpath.core.errors import VlmpathError
    from vlmpath.engines import registry

    if names is None:
        return tuple(TemplateEngine(e.name, e.example_version, tuple(e.ci_paths))
                     for e in registry.entries().values() if e.ci_paths)
    out = []
    for name in dict.fromkeys(names):
        e = registry.get(name)  # an unknown name: one line naming the known
        if not e.ci_paths:
            raise VlmpathError(f"--engine {name}: its registry entry names no ci_paths (the files of its "
                               "embedding path a PR must touch to be measured): add them to the entry")
        out.append(TemplateEngine(e.name, e.example_version, tuple(e.ci_paths)))
    return tuple(out)


_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


def render(source: str, engine: TemplateEngine, out_name: str) -> str:
    """One source filled in for one engine; an unknown placeholder is an error."""
    values = {"ENGINE": engine.name, "ENGINE_UPPER": engine.name.upper(), "RELEASE": engine.release}

    def paths(indent: str) -> str:
        # The workflow file itself, as the engine's repository will name it.
        lines = [*engine.paths, f".github/workflows/{out_name}"]
        return "\n".join(f'{indent}- "{p}"' for p in lines)

    text = re.sub(r"^([ \t]*)@PATHS@$", lambda m: paths(m.group(1)), source, flags=re.M)

    def fill(m: re.Match) -> str:
        if m.group(1) not in values:
            raise KeyError(f"unknown placeholder @{m.group(1)}@")
        return values[m.group(1)]

    return _PLACEHOLDER.sub(fill, text)


def out_name(engine: TemplateEngine, source: Path) -> str:
    return f"{engine.name}-{source.name.removesuffix('.yml.in')}.yml"


def render_all(root: Path, names: Sequence[str] | None = None) -> dict[str, str]:
    """``{file name under ci/templates/: text}`` for every source and engine (``names``: those)."""
    sources = sorted((root / SOURCE_DIR).glob("*.yml.in"))
    if not sources:
        raise FileNotFoundError(f"no *.yml.in under {root / SOURCE_DIR}")
    return {out_name(e, s): render(s.read_text(encoding="utf-8"), e, out_name(e, s))
            for e in engines(names) for s in sources}


def stale(root: Path, names: Sequence[str] | None = None, out_dir: Path | None = None) -> list[str]:
    """Rendered files that differ from (or are missing in) ``out_dir`` (default
    ``ci/templates/``), and strays there (with ``names``: strays of those engines only)."""
    want = render_all(root, names)
    where = out_dir if out_dir is not None else root / OUT_DIR
    have = {p.name for p in where.glob("*.yml")
            if names is None or any(p.name.startswith(f"{n}-") for n in names)}
    out = [n for n, t in want.items() if not (where / n).is_file() or (where / n).read_text(encoding="utf-8") != t]
    return sorted(out + [n for n in have - set(want)])
