"""How are the results of several runners added to one results store, shards merged?

``add_to_store(store, sources)`` is the history step (``ci/history.sh append``, ``vlmpath
shards merge``) and the comment job's staging step: every source is one runner's asv
results directory (an artifact's ``results/``). A results file of an unsharded run is
copied (as asv would have written it); the files of one machine and commit that come from
shards (``--shard K/N``, told by the run-info beside them or by the caller) are merged into
**one** asv results file through asv's own ``Results`` (``runner.shard_merge`` decides who
owns each case, ``compare.results_store`` writes and saves it), so the
dashboard and ``vlmpath compare`` see one machine with every case. Beside it: the
failures of all shards (one list), the first shard's fingerprint, and a run-info that
says which shards were merged and which are missing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vlmpath.compare import results_store as results_store
from vlmpath.core.atomic import write_text
from vlmpath.core.errors import VlmpathError
from vlmpath.core.failures import failures_path, merge_failures, read_failures
from vlmpath.runner.run_files import read_run_info
from vlmpath.runner.shard_merge import ShardFile, merge_shard_files, missing_shards, shard_info


@dataclass
class StoreReport:
    """What ``add_to_store`` did: files copied, shard groups merged, shards missing."""

    copied: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    missing: dict[str, list[int]] = field(default_factory=dict)  # "machine@sha8" -> absent shards

    def lines(self) -> list[str]:
        out = [f"merged {m}" for m in self.merged] + [f"copied {c}" for c in self.copied]
        out += [f"{key}: shard(s) {', '.join(map(str, ks))} missing: their cases are not in the store"
                for key, ks in sorted(self.missing.items())]
        return out


def _add_benchmarks_json(src: Path, dest: Path) -> None:
    from vlmpath.core import safe_json

    if not (src / results_store.BENCHMARKS_JSON).is_file():
        return
    incoming = safe_json.load_file(src / results_store.BENCHMARKS_JSON, "corrupted benchmarks.json", "re-run the shard")
    results_store.add_benchmarks(dest, incoming if isinstance(incoming, dict) else {})


def add_to_store(store: str | Path, sources: Sequence[str | Path], *,
                 shards: Mapping[str, Mapping] | None = None) -> StoreReport:
    """Add every source results directory to ``store`` (see the module docstring).
    ``shards``: source path -> its shard entry, for sources that carry no run-info (a PR
    artifact: the entry is in its ``run.json``)."""
    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    report = StoreReport()
    groups: dict[tuple[str, str], list[tuple[Path, ShardFile]]] = {}
    for src in map(Path, sources):
        if not src.is_dir():
            raise VlmpathError(f"results directory {src} does not exist")
        _add_benchmarks_json(src, store)
        for mdir in results_store.machine_dirs(src):
            (store / mdir.name).mkdir(exist_ok=True)
            results_store.copy_machine(src, store, mdir.name)
            for f in results_store.run_files(mdir):
                sha8 = f.name.split("-", 1)[0]
                entry = (shards or {}).get(str(src)) or read_run_info(src, mdir.name, sha8)
                got = shard_info(entry)
                if got is None:
                    results_store.copy_run(src, store, mdir.name, f)
                    report.copied.append(f"{mdir.name}/{f.name}")
                    continue
                k, n, units = got
                groups.setdefault((mdir.name, f.name), []).append((src, ShardFile(f, k, n, units)))
    for (machine, fname), members in sorted(groups.items()):
        merged = merge_shard_files([sf for _, sf in members])
        results_store.save_results(merged, store)  # asv's own writer, one file per machine and commit
        sha8 = fname.split("-", 1)[0]
        n = members[0][1].n
        present = sorted(sf.k for _, sf in members)
        absent = missing_shards(n, present)
        _write_side_files(store, machine, sha8, [src for src, _ in members], n, present, absent,
                          members[0][0])
        report.merged.append(f"{machine}/{fname} (shards {', '.join(map(str, present))} of {n})")
        if absent:
            report.missing[f"{machine}@{sha8}"] = absent
    return report


def _write_side_files(store: Path, machine: str, sha8: str, srcs: Sequence[Path], n: int,
                      present: Sequence[int], absent: Sequence[int], first: Path) -> None:
    failures = [f for src in srcs for f in read_failures(failures_path(src / machine, sha8))]
    write_text(failures_path(store / machine, sha8),
               json.dumps(merge_failures((), failures, set()), indent=2, sort_keys=True) + "\n")
    fp = results_store.fingerprint_path(first, machine, sha8)
    if fp.is_file():
        shutil.copyfile(fp, store / machine / fp.name)
    info = dict(read_run_info(first, machine, sha8) or {"commit": sha8})
    info["shard"] = None
    info["shards"] = {"n": n, "merged": list(present), "missing": list(absent)}
    write_text(results_store.run_info_path(store, machine, sha8), json.dumps(info, indent=2, sort_keys=True) + "\n")
