"""Which engines can vlmpath drive, and what does each one bring?

An ``EngineEntry`` is everything the suite needs to know about one engine project: its
name (what ``--engine NAME==X`` says), its distribution on the package index, its import
package (what a source tree holds), how its environment is installed and which import
chain that needs (a data file, one package a line with why), where its package sits in a
checkout, the seams its adapter records, the adapter class (an ``EngineAdapter``:
``vlmpath.engines.base``) that builds ``Routine``s from the engine's own code, and
everything else that varies by engine: its options (``EngineOption``: name, choices,
default; ``--engine-option NAME=VALUE``, handed to its adapter untouched), its server
recipe, its own bench client (``BenchClient``) and the files its CI templates watch.

Engines are found, never listed by hand:

- every module of ``vlmpath.engines.known`` not starting with ``_`` is one engine and
  defines ``ENGINE = EngineEntry(name=<its module name>, ...)`` (as model families do in
  ``vlmpath.measure.families``);
- an installed distribution may add engines through the entry-point group
  ``vlmpath.engines`` (``toy = "toy_vlmpath:ENGINE"``): a plug-in outside this
  repository, found by the host and by the engine worker alike when installed in both.

Adding an engine is one module plus its import-chain data file; parsing, ``engine
install/list``, the worker, ``measure/run --engine``, ``ci pr --engine-src`` and the help
texts look it up here by name (``get``, ``names``, ``engine_of_tree``). Discovery is a
function of ``sys.path`` (memoised per ``sys.path``), so a package put on the path later
is found without any registration call. Entry modules are light (no torch, no engine
import): the adapter is named as ``"module:Class"`` and imported by ``load_adapter`` only
in the process that measures.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from vlmpath.core.errors import EngineError, VlmpathError, did_you_mean

KNOWN_PACKAGE = "vlmpath.engines.known"
ENTRY_POINT_GROUP = "vlmpath.engines"
RESERVED = ("reference",)  # names an engine cannot take: they mean something else to --engine
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class EngineOption:
    """One choice an engine's adapter takes (``--engine-option NAME=VALUE``): its values,
    the one taken when none is given, and a help line. The chosen values travel as a plain
    mapping (``engines.engine_options``) and reach the adapter untouched; only the adapter
    reads them."""

    name: str
    choices: tuple[str, ...]
    default: str
    help: str
    # Also a flag of its own, ``--ENGINE-NAME VALUE`` (the same choice): for users of a flag
    # the engine had before options were generic (vLLM's ``--vllm-runner``).
    own_flag: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        where = f"engine option {self.name!r}"
        if not _NAME.match(self.name):
            raise VlmpathError(f"{where}: a name is lowercase letters, digits and '_'")
        if not self.choices or len(set(self.choices)) != len(self.choices) or \
                not all(isinstance(c, str) and c and "=" not in c for c in self.choices):
            raise VlmpathError(f"{where}: choices are distinct non-empty words (no '=')")
        if self.default not in self.choices:
            raise VlmpathError(f"{where}: default {self.default!r} is one of its choices {self.choices}")


@dataclass(frozen=True)
class BenchClient:
    """An engine's own serving bench client (``serve-bench --engine-client NAME``), run in
    the newest complete environment of the engine against the same server and requests."""

    label: str       # how its rows name it (``vllm bench serve``), the env's version appended
    # ``"module:function"``: ``function(server, settings, doc, *, python, client, work, factor)``
    # returns one side-by-side row per case (``serving.engine_client``). "": never run.
    run: str = ""
    not_run: str = ""  # with ``run`` "": why it is never run (its one ``not run`` row)

    def __post_init__(self) -> None:
        if bool(self.run) == bool(self.not_run) or (self.run and ":" not in self.run):
            raise VlmpathError(f"bench client {self.label!r}: give run='module:function' or not_run='why', one")


@dataclass(frozen=True, eq=False)
class EngineEntry:
    """One engine project (see the module docstring)."""

    name: str            # ``--engine NAME==X``; the module's name in ``vlmpath.engines.known``
    package: str         # its distribution on the index: ``pip install PACKAGE==X``
    import_name: str     # its top-level import package: a source tree holds ``IMPORT_NAME/``
    adapter: str         # ``"module:Class"`` of its ``EngineAdapter`` (``Class(label)``)
    # The packages its embedding path's import chain needs beside ``PACKAGE --no-deps``:
    # a text file (anything with ``read_text``: a Path or an ``importlib.resources`` file).
    import_chain: object = None
    # Where the import package sits in a checkout of the engine's repository, tried in
    # order ("" is the root): sglang's is under ``python/``, vLLM's at the root.
    source_dirs: tuple[str, ...] = ("",)
    seams: tuple[str, ...] = ()      # the seam names its records carry in ``engine_seams``
    # The seams shown in the tables' encode / inject / count / hash columns, in that order.
    stage_seams: tuple[str, ...] = ()
    example_version: str = "X.Y.Z"   # for help texts and error messages
    # The seam that says which of its model runners ran and why (vLLM's ``runner``, chosen by
    # its option ``runner``); shown in the tables' pipeline column. "": one runner, no choice.
    runner_seam: str = ""
    # What its adapter lets a run choose (``--engine-option NAME=VALUE``); with any, the
    # adapter is built as ``Class(label, options=MAPPING)``: every declared option's value
    # (the default where none was given), handed over untouched. None: ``Class(label)``.
    options: tuple[EngineOption, ...] = ()
    bench_client: BenchClient | None = None  # its own serving bench client, if any
    # ``(ctx: vlmpath.engines.env_recipe.InstallContext) -> dict``: builds the environment
    # and returns manifest fields; None: ``env_recipe.pip_recipe`` (torch pair, the release
    # ``--no-deps``, its import chain at the release's pins, vlmpath).
    installer: Callable | None = None
    # ``(requires: list[str]) -> list[str]``: constraint lines for the import-chain step,
    # from the release's own ``Requires-Dist`` (None: only its ``==`` pins, inline).
    constraints: Callable[[list[str]], list[str]] | None = None
    checkout_hint: str = ""          # "an sglang checkout's python/ directory"
    # Files of the engine's embedding path, as its checkout names them: a PR touching one is
    # measured by the engine's CI templates (``vlmpath ci templates``).
    ci_paths: tuple[str, ...] = ()
    extra: Mapping[str, object] = field(default_factory=dict)  # engine-specific data for its adapter
    # ``(python, model, port, device, scratch) -> (argv, env)``: the engine's own OpenAI
    # server for ``model`` (``vlmpath.serving.launch``): its command line and the variables it
    # needs on top of the caller's (``scratch``: a folder of its own for caches). None: no server.
    server: Callable[[str, str, int, str, str], tuple[list[str], dict[str, str]]] | None = None
    # ``(version) -> (distribution, version)``: what its installer fetches from the index for
    # ``NAME==version`` (``engines.index_check`` asks about exactly that), or None when it
    # fetches no release from an index (a local build). Unset: ``package`` at ``version``.
    index_release: Callable[[str], tuple[str, str] | None] | None = None
    # The module that plants faults in its own server's code for a base/head pair
    # (``--plant`` / ``--head-plant`` with ``--launch NAME``): it defines ``edits(spec)`` (refuses
    # a bad spec in one line) and ``plant_overlay(python, spec, out) -> Path`` (a folder put
    # first on the server's PYTHONPATH). "": plants go through transformers' model code.
    server_plants: str = ""

    def __post_init__(self) -> None:
        where = f"engine entry {self.name!r}"
        if not _NAME.match(self.name) or self.name in RESERVED:
            raise VlmpathError(f"{where}: a name is lowercase letters, digits and '_' (not {RESERVED})")
        if ":" not in self.adapter:
            raise VlmpathError(f"{where}: adapter {self.adapter!r} must be 'module:Class'")
        if self.runner_seam and self.runner_seam not in self.seams:
            raise VlmpathError(f"{where}: runner_seam {self.runner_seam!r} is one of its seams")
        object.__setattr__(self, "options", tuple(self.options))
        if not all(isinstance(o, EngineOption) for o in self.options) or \
                len({o.name for o in self.options}) != len(self.options):
            raise VlmpathError(f"{where}: options are EngineOptions with distinct names")
        if not set(self.stage_seams) <= set(self.seams) or len(self.stage_seams) not in (0, 4):
            raise VlmpathError(f"{where}: stage_seams are 4 of its seams (encode, inject, count, hash)")
        if any(Path(d).is_absolute() or ".." in Path(d).parts for d in self.source_dirs):
            raise VlmpathError(f"{where}: source_dirs are relative paths inside a checkout")
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def fetches(self, version: str) -> tuple[str, str] | None:
        """The distribution and version its installer takes from the index for ``version``
        (None: none from an index)."""
        return self.index_release(version) if self.index_release is not None else (self.package, version)

    def option(self, name: str) -> EngineOption | None:
        """Its declared option ``name``, or None."""
        return next((o for o in self.options if o.name == name), None)

    @property
    def example(self) -> str:
        return f"{self.name}=={self.example_version}"

    def chain(self) -> list[str]:
        """The package names of the import-chain file (comments and blank lines dropped)."""
        if self.import_chain is None:
            return []
        text = self.import_chain.read_text(encoding="utf-8")
        return [ln.split("#")[0].strip() for ln in text.splitlines() if ln.split("#")[0].strip()]

    def holds_package(self, directory: Path) -> bool:
        """Does ``directory`` hold this engine's import package (``IMPORT_NAME/``)?"""
        return (Path(directory) / self.import_name).is_dir()

    def package_root(self, checkout: Path) -> str | None:
        """The first of ``source_dirs`` under ``checkout`` that holds the import package."""
        for d in self.source_dirs:
            if self.holds_package(Path(checkout) / d):
                return d
        return None

    def load_adapter(self) -> type:
        """The adapter class (imports the adapter's module: call it where the engine runs)."""
        module, _, cls = self.adapter.partition(":")
        found = getattr(importlib.import_module(module), cls, None)
        if not isinstance(found, type):
            raise VlmpathError(f"engine {self.name!r}: adapter {self.adapter!r} is not a class")
        return found


def _from_module(module_name: str, expect: str | None) -> EngineEntry:
    module = importlib.import_module(module_name)
    entry = getattr(module, "ENGINE", None)
    if not isinstance(entry, EngineEntry) or (expect is not None and entry.name != expect):
        raise VlmpathError(f"{module_name} is in the engine package but defines no ENGINE = "
                           f"EngineEntry(name={expect!r}, ...); every module there is one engine")
    return entry


def discover(package: str = KNOWN_PACKAGE) -> dict[str, EngineEntry]:
    """Every engine module of ``package`` (see the module docstring), by name."""
    pkg = importlib.import_module(package)
    return {info.name: _from_module(f"{package}.{info.name}", info.name)
            for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name)
            if not info.name.startswith("_")}


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


_memo: dict[tuple, tuple[dict, dict]] = {}


def _found() -> tuple[dict[str, EngineEntry], dict[str, importlib.metadata.EntryPoint]]:
    """(built-in entries, plug-in entry points), memoised per ``sys.path``."""
    key = tuple(sys.path)
    if key not in _memo:
        _memo.clear()
        builtin = discover()
        plugins = {n: ep for n, ep in _entry_points().items() if n not in builtin}
        _memo[key] = (builtin, plugins)
    return _memo[key]


def names() -> list[str]:
    """Every engine's name, sorted (plug-ins are named without being imported)."""
    builtin, plugins = _found()
    return sorted({*builtin, *plugins})


def get(name: str) -> EngineEntry:
    """The entry of engine ``name``; an unknown name is an ``EngineError`` naming the known."""
    builtin, plugins = _found()
    if name in builtin:
        return builtin[name]
    if name in plugins:
        ep = plugins[name]
        try:
            entry = ep.load()
        except Exception as exc:  # a broken plug-in names itself, not a traceback
            raise EngineError(f"engine plug-in {name!r} ({ep.value}) does not load: "
                              f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(entry, EngineEntry) or entry.name != name:
            raise EngineError(f"engine plug-in {name!r} ({ep.value}) is not an EngineEntry named {name!r}")
        return entry
    raise EngineError(f"unknown engine {name!r}{did_you_mean(name, names())}: vlmpath drives {', '.join(names())} "
                      f"(plug-ins add more through the {ENTRY_POINT_GROUP!r} entry points)")


def entries() -> Mapping[str, EngineEntry]:
    """Every engine's entry by name (imports the plug-ins)."""
    return MappingProxyType({n: get(n) for n in names()})


def engine_of_tree(directory: Path, candidates: Sequence[str] | None = None) -> EngineEntry | None:
    """The one engine whose import package ``directory`` holds (``--engine-src``), else None;
    several match: an ``EngineError`` asking for ``--engine NAME``."""
    found = [e for e in map(get, candidates or names()) if e.holds_package(Path(directory))]
    if len(found) > 1:
        raise EngineError(f"{directory} holds the packages of several engines "
                          f"({', '.join(e.name for e in found)}): say which with --engine NAME")
    return found[0] if found else None


def engine_of_checkout(checkout: Path) -> tuple[EngineEntry, str] | None:
    """The engine whose package sits where its ``source_dirs`` say in a repository checkout,
    and that directory (``ci pr --engine-src REPO``); None when no engine's layout fits."""
    found = [(e, d) for e in entries().values() if (d := e.package_root(Path(checkout))) is not None]
    if len(found) > 1:
        raise EngineError(f"{checkout} fits the layout of several engines "
                          f"({', '.join(e.name for e, _ in found)}): say which with --engine NAME")
    return found[0] if found else None
