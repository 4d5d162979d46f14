"""Which benchmarks does the suite have, and which does ``--bench`` select?

``--bench`` is checked against asv's own discovery of the suite (``asv_runner.discovery``,
same names and parameter strings as ``asv run -b``), run in the benchmark interpreter, so
that a regex matching nothing fails up front, naming some benchmarks. The script runs as
``python -c SCRIPT discover DIR OUT``: ``discover`` first, as asv's own discovery process
has it, so the suite can tell a listing from a run (``benchmarks/_common.preimport_tower``
skips the tower's imports there).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError


@dataclass(frozen=True)
class Discovered:
    name: str
    params: tuple[tuple[str, ...], ...]   # asv's repr strings per axis
    unit: str
    version: str = ""  # asv's hash of the benchmark's source: a changed definition has another

    def combos(self) -> list[tuple[str, ...]]:
        import itertools

        return list(itertools.product(*self.params)) if self.params else [()]

    def label(self, combo: tuple[str, ...]) -> str:
        return f"{self.name}({', '.join(combo)})" if combo else self.name


# asv's own discovery command (``asv_runner.discovery._discover``): the listing is exactly
# what ``asv run`` would discover, so a run can hand it to asv (``runner.asv_main``).
_DISCOVER_SCRIPT = r"""
import sys
from asv_runner.discovery import list_benchmarks
with open(sys.argv[3], "w") as fp:
    list_benchmarks(sys.argv[2], fp)
"""


def parse_listing(raw: list) -> list[Discovered]:
    return [Discovered(d["name"], tuple(tuple(str(p) for p in a) for a in d.get("params") or ()),
                       str(d.get("unit", "")), str(d.get("version", ""))) for d in raw]


def discover_listing(benchmark_dir: Path, python: str, env: Mapping[str, str]) -> list:
    """asv's listing of the suite (its ``discover`` output), run in the benchmark interpreter
    (a subprocess: the suite's package must not land in this process's ``sys.modules``);
    reused from the run's discovery cache when one is named (``runner.discovery_cache``)."""
    from vlmpath.runner import discovery_cache

    penv = dict(env)
    penv["PYTHONPATH"] = os.pathsep.join(x for x in (str(benchmark_dir.parent), penv.get("ASV_PYTHONPATH", "")) if x)
    kept = discovery_cache.cache_file(benchmark_dir, python, penv)
    raw = discovery_cache.load(kept)
    if raw is not None:
        return raw
    with tempfile.TemporaryDirectory(prefix="vlmpath-discover-") as tmp:
        out = Path(tmp) / "benchmarks.json"
        proc = subprocess.run([python, "-c", _DISCOVER_SCRIPT, "discover", str(benchmark_dir), str(out)],
                              capture_output=True, text=True, env=penv, cwd=tmp, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise VlmpathError(f"importing the benchmark suite in {benchmark_dir} failed with {python}:\n{tail}")
        # The listing's names come from the suite's (a PR's) code: read within the bounds.
        raw = safe_json.load_file(out, "asv's benchmark listing", f"check the suite in {benchmark_dir}")
    if not isinstance(raw, list):
        raise VlmpathError(f"asv's benchmark listing of {benchmark_dir} is not a list: check the suite")
    discovery_cache.store(kept, raw)
    return raw


def discover(benchmark_dir: Path, python: str, env: Mapping[str, str]) -> list[Discovered]:
    """asv's discovery of the suite (``discover_listing``), as ``Discovered`` records."""
    return parse_listing(discover_listing(benchmark_dir, python, env))


def select(benchmarks: Sequence[Discovered], regex: str | None) -> list[tuple[Discovered, tuple[str, ...]]]:
    """(benchmark, parameter combination) pairs that ``asv run -b regex`` runs."""
    if regex is not None:
        try:
            pat = re.compile(regex)
        except re.error as exc:
            raise VlmpathError(f"--bench {regex!r} is not a valid regular expression: {exc}") from None
    chosen = []
    for b in benchmarks:
        for combo in b.combos():
            if regex is None or pat.search(b.label(combo)):
                chosen.append((b, combo))
    if not chosen:
        names = sorted(b.name for b in benchmarks)
        sample = ", ".join(names[:6]) + (f", ... ({len(names)} in all)" if len(names) > 6 else "")
        raise VlmpathError(f"--bench {regex!r} matches no benchmark; benchmarks are e.g. {sample}. "
                           "The regex is searched in 'module.Class.method(param, ...)'")
    return chosen

