"""What did one machine's PR run measure, and how is its artifact read without trusting it?

``RunManifest`` is ``run.json``: the typed record of one machine's ``vlmpath ci pr`` (or
``ci pr --engine-src``) run: schema version, machine, commits, mode, selection, notes and
which row sources its artifact holds. It crosses the file boundary through ONE pair of
functions (the ``suite.record.CaseRecord`` pattern):

- ``dumps_manifest(m)``: the JSON text (sorted keys, indented);
- ``loads_manifest(text, where)``: the record back, every field checked once, here (the
  artifact came from a job that ran the PR's code: hostile input). Past this point no
  code reads run.json by string keys.

The rest is the budgeted reader of an artifact directory, moved here unchanged from
``pr.merge``: ``artifact_dirs`` (one directory per machine, or the one artifact),
``read_small`` (a regular file within a cap), ``read_pr_number`` and ``copy_results``
(an artifact's asv results copied into a staging tree, every name and file checked and
charged to the run's ``core.budget.RunBudget``, against the layout of
``compare.results_store``, which merges the checked ``benchmarks.json``).
``load_artifacts`` is what ``ci merge`` and the judge read: each artifact's name, directory
and manifest, its errors and PR number.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from vlmpath.compare import results_store
from vlmpath.compare.results_store import RUN_FILE_NAME, RUN_INFO_NAME, SIDE_FILE_NAME
from vlmpath.core import safe_json
from vlmpath.core.budget import RunBudget
from vlmpath.core.errors import VlmpathError
from vlmpath.core.machine_names import MACHINE_NAME  # an artifact's machine: hostile input, checked here

RUN_SCHEMA_VERSION = 1
RUN_FILE = "run.json"
ERROR_FILE = "error.txt"
PR_NUMBER_FILE = "pr-number"
RESULTS_SUBDIR = "results"
#: Most interleaved rounds a run may take and an artifact may claim (``ci pr --interleave N``).
MAX_ROUNDS = 50


class Kind(StrEnum):
    """What measured the rows: vlmpath's asv suite, or an engine PR's case records."""

    ASV = "asv"
    ENGINE = "engine"


SHA40 = re.compile(r"^[0-9a-f]{40}$")
_PR_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")
_MAX_TEXT = 500  # longest note, ref or name kept from a manifest


@dataclass(frozen=True)
class ShardClaim:
    """Which shard of a split check this run was, and the units it owned (checked with
    ``runner.shard_merge.shard_info``: a malformed claim would drop or double cases)."""

    k: int
    n: int
    units: tuple[str, ...]
    costs_from: str | None = None  # the trusted commit whose timings split the suite (informational)

    def entry(self) -> dict[str, Any]:
        """As the results store reads it (a run-info's or run.json's ``shard``)."""
        return {"k": self.k, "n": self.n, "units": list(self.units), "costs_from": self.costs_from}


@dataclass(frozen=True)
class Outcome:
    """What the judge decided for this run (written after judging; informational only:
    ``ci merge`` judges again and never reads it)."""

    regressions: int
    not_judged: int
    incomplete: bool
    exit_code: int
    chart_notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunManifest:
    """One machine's run: what ``run.json`` holds (module doc)."""

    machine: str
    base_sha: str
    head_sha: str
    kind: Kind = Kind.ASV
    base_ref: str | None = None
    head_ref: str | None = None
    base_tip: str | None = None
    bench: str | None = None                 # the --bench selection (literal names: compare.selection)
    quick: bool = False
    scale: str | None = None
    reused_base: bool = False
    notes: tuple[str, ...] = ()
    interleave: int = 0                      # rounds/NN/{base,head}: 0, or 2..MAX_ROUNDS
    instructions: bool = False
    counter: str | None = None
    instructions_bench: str | None = None
    shard: ShardClaim | None = None
    serve: str | None = None                 # the served model: serve/{base,head}-<i>.json
    serve_rounds: int | None = None          # as claimed; -1: claimed but not a number (pr.sources.serve)
    new_definitions: tuple[str, ...] = ()    # head's definitions base lacks (the rows' words only: never judged)
    engine_subdir: str | None = None
    workloads: tuple[str, ...] = ()
    repeat: int | None = None
    engines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    outcome: Outcome | None = None
    schema_version: int = RUN_SCHEMA_VERSION

    @property
    def is_engine(self) -> bool:
        return self.kind is Kind.ENGINE



def dumps_manifest(m: RunManifest) -> str:
    """The one writer of ``run.json``'s text."""
    d = asdict(m)
    d.pop("outcome")
    d["shard"] = m.shard.entry() if m.shard is not None else None
    d["engines"] = {k: list(v) for k, v in m.engines.items()}
    if m.outcome is not None:  # flat, as the workflows and people read it
        d.update(asdict(m.outcome))
    return json.dumps(d, indent=1, sort_keys=True, default=list) + "\n"


def _text(d: Mapping[str, Any], key: str) -> str | None:
    """An informational text field: a string, cut; anything else is left out."""
    v = d.get(key)
    return v[:_MAX_TEXT] if isinstance(v, str) else None


def _selection(v: Any) -> str | None:
    """The --bench selection as the artifact states it: never compiled (compare.selection
    reads it as literal names, and says when it cannot); not a string: its text, which
    that reader refuses to apply."""
    if v in (None, False, ""):
        return None
    return v if isinstance(v, str) else str(v)[:1000]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _interleave(v: Any, machine: str) -> int:
    """0: not interleaved; anything else that is not 2..MAX_ROUNDS is refused (exit 2)."""
    if v is None or v is False or v == 0:
        return 0
    if not _int(v) or not 2 <= v <= MAX_ROUNDS:
        raise VlmpathError(f"run.json of machine {machine[:60]!r}: interleave {str(v)[:20]!r} "
                           f"is not a round count of 2 to {MAX_ROUNDS}")
    return v


def _shard(v: Any) -> ShardClaim | None:
    from vlmpath.runner.shard_merge import shard_info

    got = shard_info({"shard": v})  # malformed: refused there, one line
    if got is None:
        return None
    costs = v.get("costs_from")
    return ShardClaim(got[0], got[1], tuple(sorted(got[2])),
                      costs if isinstance(costs, str) and SHA40.match(costs) else None)


def _strings(v: Any, limit: int = 1000) -> tuple[str, ...]:
    return tuple(x[:_MAX_TEXT] for x in v[:limit] if isinstance(x, str)) if isinstance(v, list) else ()


def _outcome(v: Mapping[str, Any]) -> Outcome | None:
    nums = [v.get(k) for k in ("regressions", "not_judged", "exit_code")]
    if not all(_int(n) for n in nums):
        return None
    return Outcome(*nums[:2], v.get("incomplete") is True, nums[2], _strings(v.get("chart_notes")))  # type: ignore[arg-type]


def loads_manifest(text: str, where: str) -> RunManifest:
    """``run.json``'s text as a ``RunManifest``, every field checked (module doc)."""
    d = safe_json.loads(text, f"corrupted {where}", strict=True)
    if not isinstance(d, dict) or d.get("schema_version") != RUN_SCHEMA_VERSION:
        raise VlmpathError(f"{where} is not a vlmpath ci run record (schema_version {RUN_SCHEMA_VERSION})")
    for key in ("base_sha", "head_sha"):
        if not isinstance(d.get(key), str) or not SHA40.match(d[key]):
            raise VlmpathError(f"{where}: {key} is not a 40-digit lowercase sha")
    machine = d.get("machine")
    if not isinstance(machine, str) or not MACHINE_NAME.match(machine):
        raise VlmpathError(f"{where}: machine name {machine!r} is not valid")
    serve = d.get("serve")
    claimed = serve not in (None, False, "")
    rounds = d.get("serve_rounds")
    engines = d.get("engines") if isinstance(d.get("engines"), Mapping) else {}
    return RunManifest(
        machine=machine, base_sha=d["base_sha"], head_sha=d["head_sha"],
        kind=Kind.ENGINE if d.get("kind") == Kind.ENGINE.value else Kind.ASV,
        base_ref=_text(d, "base_ref"), head_ref=_text(d, "head_ref"),
        base_tip=d["base_tip"] if isinstance(d.get("base_tip"), str) and SHA40.match(d["base_tip"]) else None,
        bench=_selection(d.get("bench")), quick=d.get("quick") is True, scale=_text(d, "scale"),
        reused_base=d.get("reused_base") is True, notes=_strings(d.get("notes")),
        interleave=_interleave(d.get("interleave"), machine), instructions=d.get("instructions") is True,
        counter=_text(d, "counter"), instructions_bench=_text(d, "instructions_bench"),
        shard=_shard(d.get("shard")),
        serve=(serve if isinstance(serve, str) else str(serve))[:_MAX_TEXT] if claimed else None,
        serve_rounds=(rounds if _int(rounds) else -1) if claimed else None,
        new_definitions=_strings(d.get("new_definitions"), 200),
        engine_subdir=_text(d, "engine_subdir"), workloads=_strings(d.get("workloads")),
        repeat=d["repeat"] if _int(d.get("repeat")) else None,
        engines={k: _strings(engines.get(k)) for k in ("base", "head") if k in engines},
        outcome=_outcome(d))


def write_manifest(out: Path, m: RunManifest) -> None:
    """``OUT/run.json``, atomically: the one writer both measurers use."""
    from vlmpath.core.atomic import write_text as write_text_atomic

    write_text_atomic(out / RUN_FILE, dumps_manifest(m))


# --- the budgeted reader of artifact directories (moved unchanged from pr.merge) -------------


def read_small(path: Path, limit: int = 1 << 20) -> str:
    # Regular file checked on the open descriptor, read with the cap (safe_json.read_capped).
    return safe_json.read_capped(path, "artifact file", limit).decode("utf-8", errors="replace")


def read_manifest(path: Path) -> RunManifest:
    """One artifact's ``run.json``, within its cap, as a checked ``RunManifest``."""
    return loads_manifest(read_small(path), str(path))


def read_pr_number(path: Path) -> int:
    text = read_small(path, 64).strip()
    if not _PR_NUMBER.match(text):
        raise VlmpathError(f"{path} holds {text[:20]!r}, not a pull request number (digits only)")
    return int(text)


def artifact_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise VlmpathError(f"artifacts directory {root} does not exist: download the artifacts first")
    if (root / RUN_FILE).exists() or (root / ERROR_FILE).exists():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def dir_of(root: Path, name: str) -> Path:
    """Artifact ``name``'s directory: ``root`` itself when ``root`` is the one artifact."""
    return root if artifact_dirs(root) == [root] else root / name


def copy_results(src: Path, dest: Path, owner: dict[str, str], artifact: str, spent: RunBudget, *,
                 drop_run_info: bool = False) -> None:
    """Copy one artifact's asv results into ``dest``, every name and file checked and
    charged; ``drop_run_info``: leave out the run-info files (``vlmpath-run-*.json``) of a
    directory whose rows are never judged (head's definitions), instead of refusing them."""
    if not src.is_dir() or src.is_symlink():
        raise VlmpathError(f"artifact {artifact} has no {RESULTS_SUBDIR}/ directory")
    bench_src = src / results_store.BENCHMARKS_JSON
    if bench_src.exists():
        spent.charge(bench_src.stat().st_size, f"artifact {artifact}: {RESULTS_SUBDIR}/{bench_src.name}")
        incoming = safe_json.loads(read_small(bench_src, 64 << 20), f"corrupted {bench_src}")
        if not isinstance(incoming, dict):
            raise VlmpathError(f"corrupted {bench_src}: not a JSON object")
        results_store.add_benchmarks(dest, incoming)  # checked above; the first artifact's entry stays
    for mdir in sorted(src.iterdir()):
        if mdir.name == results_store.BENCHMARKS_JSON:
            continue
        if mdir.is_symlink() or not mdir.is_dir() or not MACHINE_NAME.match(mdir.name):
            raise VlmpathError(f"artifact {artifact}: unexpected entry {mdir.name!r} in {RESULTS_SUBDIR}/")
        if mdir.name in owner:
            raise VlmpathError(
                f"machine {mdir.name} appears in artifacts {owner[mdir.name]} and {artifact}: "
                "give each runner its own --machine name"
            )
        owner[mdir.name] = artifact
        (dest / mdir.name).mkdir(parents=True, exist_ok=True)
        for f in sorted(mdir.iterdir()):
            if drop_run_info and RUN_INFO_NAME.match(f.name):
                continue
            ok = f.name == results_store.MACHINE_JSON or RUN_FILE_NAME.match(f.name) or SIDE_FILE_NAME.match(f.name)
            if not ok or f.is_symlink() or not f.is_file():
                raise VlmpathError(f"artifact {artifact}: unexpected file {mdir.name}/{f.name!r}")
            if f.stat().st_size > (64 << 20):
                raise VlmpathError(f"artifact {artifact}: {mdir.name}/{f.name} is larger than 64 MiB")
            spent.charge(f.stat().st_size, f"artifact {artifact}: {mdir.name}/{f.name}")
            if RUN_FILE_NAME.match(f.name):  # bounded JSON, named by its artifact path (asv reads it next)
                safe_json.check_file(f, f"artifact {artifact}: results file")
            shutil.copyfile(f, dest / mdir.name / f.name)


@dataclass(frozen=True)
class Artifact:
    """One machine's artifact: its name (the directory's), where it is, what it says."""

    name: str
    path: Path
    manifest: RunManifest


@dataclass(frozen=True)
class Loaded:
    """Every artifact under one root: the usable ones, the failed runs' lines, the PR number."""

    artifacts: tuple[Artifact, ...]
    errors: tuple[str, ...]
    pr: int | None


def load_artifacts(root: Path, spent: RunBudget) -> Loaded:
    """Each artifact's manifest (checked), the error lines of runs that failed, and the one
    pull request number they name (two numbers: refused)."""
    arts: list[Artifact] = []
    errors: list[str] = []
    prs: dict[int, list[str]] = {}
    for art in artifact_dirs(root):
        name = art.name
        spent.check_time(f"artifact {name}")
        if (art / PR_NUMBER_FILE).exists():
            prs.setdefault(read_pr_number(art / PR_NUMBER_FILE), []).append(name)
        if (art / ERROR_FILE).exists():
            first = read_small(art / ERROR_FILE, 1 << 16).strip().splitlines() or ["(empty error file)"]
            errors.append(f"{name}: benchmark run failed: {first[0][:300]}")
        if not (art / RUN_FILE).exists():
            if not (art / ERROR_FILE).exists():
                errors.append(f"{name}: no {RUN_FILE} (the benchmark job stopped before comparing)")
            continue
        arts.append(Artifact(name, art, read_manifest(art / RUN_FILE)))
    if len(prs) > 1:
        raise VlmpathError(f"artifacts disagree on the pull request number: {dict(sorted(prs.items()))}")
    return Loaded(tuple(arts), tuple(errors), next(iter(prs), None))


def one_pair(arts: Sequence[Artifact], head_sha: str | None) -> tuple[str, str]:
    """The (merge-base, head) every artifact compared; artifacts of different commits, or
    of another head than the workflow run's, are refused."""
    pairs = {(a.manifest.base_sha, a.manifest.head_sha) for a in arts}
    if len(pairs) > 1:
        listing = "; ".join(f"{a.name}: {a.manifest.base_sha[:8]}..{a.manifest.head_sha[:8]}" for a in arts)
        raise VlmpathError(f"artifacts compared different commits ({listing}): re-run the benchmark workflow")
    base_sha, head = pairs.pop()
    if head_sha is not None and head != head_sha.lower():
        raise VlmpathError(f"artifacts measured head {head[:12]}, but the workflow run is for {head_sha[:12]}")
    return base_sha, head
