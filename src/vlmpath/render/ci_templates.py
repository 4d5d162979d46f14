"""Which CI workflow files does an engine repository get, and how are they made from one source?

``ci/templates/source/*.yml.in`` hold each workflow once, for any engine; ``engines()`` reads
what differs per engine from the engine registry (its name, the release whose dependency set its environment
takes, the files of its multimodal path that start the CPU check). ``render_all`` fills
every source for every engine into ``<engine>-<source name>.yml``; the rendered files are
checked in under ``ci/templates/`` (an engine's maintainers copy them) and
``tests/test_engine_templates.py`` fails when they differ from a fresh render.

Regenerate after editing a source or the table, from the repository root:
``vlmpath ci templates --write`` (``--check``: exit 1 if stale).

Placeholders are ``@NAME@`` (GitHub's own ``${{ }}`` stays literal): ``@ENGINE@``,
``@ENGINE_UPPER@`` (variable names), ``@RELEASE@`` (the default release), ``@PATHS@`` (the
``paths:`` list, indented for its place).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SOURCE_DIR = Path("ci/templates/source")
OUT_DIR = Path("ci/templates")


@dataclass(frozen=True)
class TemplateEngine:
    name: str                 # ``vlmpath engine install NAME==X``; the engine registry's name
    release: str              # default of the <NAME>_ENV_RELEASE repository variable
    paths: tuple[str, ...]    # files of the engine's embedding path: a PR touching one is measured


def engines() -> tuple[TemplateEngine, ...]:
    """One row per engine of the registry: its example release and its embedding path's files."""
    from vlmpath.engines import registry

    return tuple(TemplateEngine(e.name, e.example_version, tuple(e.ci_paths))
                 for e in registry.entries().values() if e.ci_paths)


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


def render_all(root: Path) -> dict[str, str]:
    """``{file name under ci/templates/: text}`` for every source and engine."""
    sources = sorted((root / SOURCE_DIR).glob("*.yml.in"))
    if not sources:
        raise FileNotFoundError(f"no *.yml.in under {root / SOURCE_DIR}")
    return {out_name(e, s): render(s.read_text(encoding="utf-8"), e, out_name(e, s))
            for e in engines() for s in sources}


def stale(root: Path) -> list[str]:
    """Rendered files that differ from (or are missing in) ``ci/templates/``, and strays there."""
    want = render_all(root)
    have = {p.name for p in (root / OUT_DIR).glob("*.yml")}
    out = [n for n, t in want.items() if not (root / OUT_DIR / n).is_file()
           or (root / OUT_DIR / n).read_text(encoding="utf-8") != t]
    return sorted(out + [n for n in have - set(want)])
