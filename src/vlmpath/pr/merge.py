"""How do every machine's ``vlmpath ci pr`` artifacts become one PR comparison?

``merge_artifacts`` is the comment workflow's half of the PR check (``vlmpath ci merge``;
``ci_flow.run_pr`` is the benchmark half, one per machine): it merges the per-machine
artifacts of one PR run into one results tree and one comparison, and writes the same
output files ``run_pr`` writes. Artifact contents come from untrusted PR code, so every
name, sha, file and PR number is validated before it is used, and the whole merge reads
within one budget (``core.budget.RunBudget``: bytes of all artifacts together, time).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from vlmpath.pr.outputs import (
    COMMENT_FILE,
    ERROR_FILE,
    PR_NUMBER_FILE,
    RESULTS_SUBDIR,
    RUN_FILE,
    RUN_SCHEMA_VERSION,
    SUMMARY_FILE,
    FlowResult,
    write_json,
    write_outputs,
)
from vlmpath.pr.merge_engine import is_engine_run, load_engine_artifact
from vlmpath.pr.merge_rounds import judge_rounds
from vlmpath.pr.merge_serve import collect as collect_serve, judge_serve
from vlmpath.pr.instructions import counted_ids, load_artifact
from vlmpath.compare.records import FINGERPRINT_PREFIX, RUN_INFO_PREFIX
from vlmpath.compare.selection import keep_selected
from vlmpath.compare.withheld import selection_withheld, trusted_selection, withhold
from vlmpath.core.yardstick import yardstick_withheld
from vlmpath.core import safe_json
from vlmpath.core.budget import RunBudget
from vlmpath.core.errors import VlmpathError
from vlmpath.core.machine_names import MACHINE_NAME  # an artifact's machine: hostile input, checked here
from vlmpath.render.escape import log_text
from vlmpath.core.failures import FAILURES_PREFIX

_SHA40 = re.compile(r"^[0-9a-f]{40}$")
_RUN_FILE = re.compile(r"^[0-9a-f]{8}-[A-Za-z0-9._+-]{1,200}\.json$")
_FINGERPRINT_FILE = re.compile(  # the fingerprint, and why cases failed
    rf"^({re.escape(FINGERPRINT_PREFIX)}|{re.escape(FAILURES_PREFIX)})[0-9a-f]{{8}}\.json$")
_RUN_INFO_FILE = re.compile(rf"^{re.escape(RUN_INFO_PREFIX)}[0-9a-f]{{8}}\.json$")
_PR_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")
_LINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # an artifact name fit for a link target


def _read_small(path: Path, limit: int = 1 << 20) -> str:
    # Regular file checked on the open descriptor, read with the cap (safe_json.read_capped).
    return safe_json.read_capped(path, "artifact file", limit).decode("utf-8", errors="replace")


def read_pr_number(path: Path) -> int:
    text = _read_small(path, 64).strip()
    if not _PR_NUMBER.match(text):
        raise VlmpathError(f"{path} holds {text[:20]!r}, not a pull request number (digits only)")
    return int(text)


def artifacts_pr(artifacts: str | os.PathLike[str]) -> int:
    """The one pull request number the artifacts name (each ``pr-number``, validated as
    ``ci merge`` reads it); ``vlmpath ci label-grant`` asks the API about that PR."""
    root = Path(artifacts)
    prs = {read_pr_number(a / PR_NUMBER_FILE) for a in _artifact_dirs(root) if (a / PR_NUMBER_FILE).exists()}
    if len(prs) != 1:
        raise VlmpathError(f"artifacts under {root} name {len(prs)} pull request numbers {sorted(prs)[:5]}, "
                           f"not one: each machine's artifact holds {PR_NUMBER_FILE}")
    return prs.pop()


def _artifact_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise VlmpathError(f"artifacts directory {root} does not exist: download the artifacts first")
    if (root / RUN_FILE).exists() or (root / ERROR_FILE).exists():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def _dir_of(root: Path, name: str) -> Path:
    """Artifact ``name``'s directory: ``root`` itself when ``root`` is the one artifact."""
    return root if _artifact_dirs(root) == [root] else root / name


def _load_run_json(path: Path) -> dict[str, Any]:
    data = safe_json.loads(_read_small(path), f"corrupted {path}", strict=True)
    if not isinstance(data, dict) or data.get("schema_version") != RUN_SCHEMA_VERSION:
        raise VlmpathError(f"{path} is not a vlmpath ci run record (schema_version {RUN_SCHEMA_VERSION})")
    for key in ("base_sha", "head_sha"):
        if not isinstance(data.get(key), str) or not _SHA40.match(data[key]):
            raise VlmpathError(f"{path}: {key} is not a 40-digit lowercase sha")
    if not isinstance(data.get("machine"), str) or not MACHINE_NAME.match(data["machine"]):
        raise VlmpathError(f"{path}: machine name {data.get('machine')!r} is not valid")
    return data


def _merge_results(src: Path, dest: Path, owner: dict[str, str], artifact: str, spent: RunBudget, *,
                   drop_run_info: bool = False) -> None:
    """Copy one artifact's asv results into ``dest``, every name and file checked and
    charged; ``drop_run_info``: leave out the run-info files (``vlmpath-run-*.json``) of a
    directory whose rows are never judged (head's definitions), instead of refusing them."""
    if not src.is_dir() or src.is_symlink():
        raise VlmpathError(f"artifact {artifact} has no {RESULTS_SUBDIR}/ directory")
    bench_src = src / "benchmarks.json"
    if bench_src.exists():
        spent.charge(bench_src.stat().st_size, f"artifact {artifact}: {RESULTS_SUBDIR}/benchmarks.json")
        incoming = safe_json.loads(_read_small(bench_src, 64 << 20), f"corrupted {bench_src}")
        if not isinstance(incoming, dict):
            raise VlmpathError(f"corrupted {bench_src}: not a JSON object")
        target = dest / "benchmarks.json"
        merged = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
        for k, v in incoming.items():
            merged.setdefault(k, v)
        write_json(target, merged)
    for mdir in sorted(src.iterdir()):
        if mdir.name == "benchmarks.json":
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
            if drop_run_info and _RUN_INFO_FILE.match(f.name):
                continue
            ok = f.name == "machine.json" or _RUN_FILE.match(f.name) or _FINGERPRINT_FILE.match(f.name)
            if not ok or f.is_symlink() or not f.is_file():
                raise VlmpathError(f"artifact {artifact}: unexpected file {mdir.name}/{f.name!r}")
            if f.stat().st_size > (64 << 20):
                raise VlmpathError(f"artifact {artifact}: {mdir.name}/{f.name} is larger than 64 MiB")
            spent.charge(f.stat().st_size, f"artifact {artifact}: {mdir.name}/{f.name}")
            if _RUN_FILE.match(f.name):  # bounded JSON, named by its artifact path (asv reads it next)
                safe_json.check_file(f, f"artifact {artifact}: results file")
            shutil.copyfile(f, dest / mdir.name / f.name)


def _read_profiles(root: Path, names: Sequence[str]) -> list:
    """Each artifact's profiles of regressed cases (``vlmpath.pr.profile``), for the
    merged comment; trace links point into that artifact, and only when its directory name
    is a plain one (a link target is built from validated parts only). Malformed: left
    out, said so."""
    from vlmpath.pr.profile import PROFILES_FILE
    from vlmpath.compare.profile_diff import CaseProfile, profiles_from_json

    profiles: list[CaseProfile] = []
    for name in names:
        path = _dir_of(root, name) / PROFILES_FILE
        if path.is_file() and not path.is_symlink():
            try:
                got = profiles_from_json(_read_small(path), prefix=f"{name}/")
            except VlmpathError as exc:
                profiles.append(CaseProfile(name, "(profiles)", (), (), None, None, f"{name}: {exc}"))
                continue
            if not _LINK_NAME.match(name):
                got = [replace(p, base_trace=None, head_trace=None,
                               note=(p.note + "; " if p.note else "") + "trace links left out: the artifact's "
                               "name is not a plain name") for p in got]
            profiles.extend(got)
    return profiles


def _append_ir_grew(root: Path, out: Path, names: Sequence[str]) -> None:
    """Each artifact's "what grew" in its moved instruction counts (``pr.instructions``),
    added to the merged comment within GitHub's size limit (``render.ir_grew``)."""
    from vlmpath.pr.instructions import GREW_FILE
    from vlmpath.compare.ir_grew import CaseGrowth, growths_from_json
    from vlmpath.render.ir_grew import append_to_comment

    growths: list[CaseGrowth] = []
    for name in names:
        path = _dir_of(root, name) / GREW_FILE
        if path.is_file() and not path.is_symlink():
            try:
                growths.extend(growths_from_json(_read_small(path)))
            except (VlmpathError, ValueError) as exc:
                growths.append(CaseGrowth(f"{name} (what grew)", None, None, notes=(str(exc),)))
    append_to_comment(out / COMMENT_FILE, growths)


def merge_artifacts(artifacts: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                    head_sha: str | None = None, fail_on_regression: bool = False,
                    thresholds: str | os.PathLike[str] | None = None,
                    accepted: str | os.PathLike[str] | None = None,
                    base_accepted: str | os.PathLike[str] | None = None,
                    grant: str | os.PathLike[str] | None = None) -> FlowResult:
    """One comparison and one comment from every machine's ``vlmpath ci pr`` artifact.

    ``accepted``: the PR head's accepted.yaml (its proposal); ``base_accepted``: the base
    branch's (trusted: its entries accept); ``grant``: ``vlmpath ci label-grant``'s file (a
    maintainer's label accepts the PR's own entries). All three come from the privileged
    workflow, never from an artifact."""
    from vlmpath.compare.thresholds import load_thresholds

    root = Path(artifacts)
    out = Path(out_dir)
    if head_sha is not None and not _SHA40.match(head_sha.lower()):
        raise VlmpathError(f"--head-sha {head_sha!r} is not a 40-digit sha")
    cfg = load_thresholds(thresholds)
    # Everything is merged and compared in a staging directory first: a corrupt artifact
    # fails the merge with --out left as it was (no half-merged results/, no pr-number).
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        return _merge(root, out, staging, cfg, head_sha=head_sha, fail_on_regression=fail_on_regression,
                      accepted=(accepted, base_accepted, grant))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _apply_accepted(report, accepted, base_accepted, grant, *, pr: int | None, head: str):
    """The PR head's entries (``--accepted``), trusted where the base branch's file holds
    them or a maintainer's label (``--grant``) covers this PR at this head; never read from
    an artifact (PR code wrote those). Returns the report and notes on the label."""
    from vlmpath.compare import accepted as accepted_mod
    from vlmpath.github.label_grant import load_grant

    g = None
    if grant is not None:
        g = load_grant(grant)
        if (g.pr, g.head_sha) != (pr, head):
            raise VlmpathError(f"--grant {grant} is for PR {g.pr} at {g.head_sha[:12]}, but the artifacts are "
                               f"PR {pr} at {head[:12]}: read the label for this run")
        report = withhold(report, yardstick_withheld(g.yardstick, g.files_truncated))  # verdict (issue 39)
    proposed = accepted_mod.load(accepted)
    report = accepted_mod.apply(report, proposed, pr=pr, base=accepted_mod.load(base_accepted),
                                grant=g.accepted_text() if g is not None else None)
    # Why the label did not count, where it would have mattered.
    return report, [g.why] if g is not None and report.awaiting_review else []


def _load_merged(dest: Path, sha: str, owner: dict[str, str]):
    """One side of the merged results; a refusal names the artifact's own path, not the
    staging directory (deleted by then)."""
    from vlmpath.compare import asv_results

    try:
        return asv_results.load_asv(dest, sha)
    except VlmpathError as exc:
        text = str(exc)
        for machine, artifact in owner.items():
            text = text.replace(str(dest / machine), f"artifact {artifact}: {RESULTS_SUBDIR}/{machine}")
        raise VlmpathError(text.replace(str(dest), f"the merged {RESULTS_SUBDIR}")) from None


def _with_head_definitions(report, staging: Path, runs, root: Path, head: str, base_side, spent: RunBudget):
    """Each machine's "new definition, not judged" rows (``pr.yardstick.definition_rows``:
    head's new or changed benchmarks, run by ``ci pr`` into its artifact's
    ``head-definitions/``), read with the same checks and budget as its results and cut to
    that machine's selection. Shown, never judged: they cannot change the verdict."""
    from vlmpath.pr.yardstick import DEFINITIONS_SUBDIR, definition_rows, with_definitions

    base_names: dict[str, set[str]] = {}
    for run in base_side:
        for mr in run.machines:
            base_names.setdefault(mr.machine, set()).update(m.benchmark for m in mr.metrics)
    for name, d in runs:
        src = _dir_of(root, name) / DEFINITIONS_SUBDIR
        if not src.is_dir() or src.is_symlink():
            continue
        defs = staging / DEFINITIONS_SUBDIR / name
        defs.mkdir(parents=True)
        owner: dict[str, str] = {}
        _merge_results(src, defs, owner, f"{name} ({DEFINITIONS_SUBDIR}/)", spent, drop_run_info=True)
        if set(owner) - {d["machine"]}:
            raise VlmpathError(f"artifact {name}: {DEFINITIONS_SUBDIR}/ holds machines {sorted(owner)[:3]}, "
                               f"not only its own {d['machine']}")
        block = definition_rows(defs, head, d["machine"], base_names.get(d["machine"], set()))
        if block is not None and d.get("bench"):
            block = keep_selected(replace(report, machines=(block,)), {block.machine: d["bench"]}).machines[0]
        if block is not None and block.comparisons:
            report = with_definitions(report, block)
    return report


def _publish(staging: Path, out: Path) -> None:
    """Move the staged results into ``out`` (after the comparison succeeded)."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / RESULTS_SUBDIR).exists():
        shutil.rmtree(out / RESULTS_SUBDIR)
    os.replace(staging / RESULTS_SUBDIR, out / RESULTS_SUBDIR)


def _merge(root: Path, out: Path, staging: Path, cfg, *, head_sha: str | None,
           fail_on_regression: bool, accepted=(None, None, None)) -> FlowResult:
    from vlmpath.compare import records, verdict as compare
    from vlmpath.core.atomic import write_text as write_text_atomic
    from vlmpath.render.comment import render_failures

    dest = staging / RESULTS_SUBDIR
    dest.mkdir()
    errors: list[str] = []
    runs: list[tuple[str, dict[str, Any]]] = []
    prs: dict[int, list[str]] = {}
    owner: dict[str, str] = {}
    spent = RunBudget()
    engine_runs: list[tuple[records.RunResults, records.RunResults]] = []
    counts: list[tuple[records.RunResults, records.RunResults]] = []
    shard_arts: dict[str, list] = {}  # machine -> its shard artifacts (pr.shard), merged below
    served: list[tuple[str, Path, dict[str, Any]]] = []  # artifacts that claim serve rows (pr.merge_serve)
    for art in _artifact_dirs(root):
        name = art.name
        spent.check_time(f"artifact {name}")
        if (art / PR_NUMBER_FILE).exists():
            prs.setdefault(read_pr_number(art / PR_NUMBER_FILE), []).append(name)
        if (art / ERROR_FILE).exists():
            first = _read_small(art / ERROR_FILE, 1 << 16).strip().splitlines() or ["(empty error file)"]
            errors.append(f"{name}: benchmark run failed: {first[0][:300]}")
        if not (art / RUN_FILE).exists():
            if not (art / ERROR_FILE).exists():
                errors.append(f"{name}: no {RUN_FILE} (the benchmark job stopped before comparing)")
            continue
        data = _load_run_json(art / RUN_FILE)
        if is_engine_run(data):  # records of an engine PR (pr/merge_engine.py), not asv results
            if data["machine"] in owner:
                raise VlmpathError(f"machine {data['machine']} appears in artifacts {owner[data['machine']]} and {name}")
            owner[data["machine"]] = name
            engine_runs.append(load_engine_artifact(art, data))
        else:
            if data.get("shard") is not None:
                shard_arts.setdefault(data["machine"], []).append((name, art, data))
            else:
                _merge_results(art / RESULTS_SUBDIR, dest, owner, name, spent)
            counted = load_artifact(art, data["machine"], data["base_sha"], data["head_sha"])
            if counted is not None:  # instruction counts (``ci pr --instructions``) join the asv rows
                counts.append(counted)
            served.append((name, art, data))
        runs.append((name, data))
    for machine in shard_arts:
        if machine in owner:
            raise VlmpathError(f"machine {machine} appears as a shard and as a whole run (artifact {owner[machine]})")
    from vlmpath.pr.shard import merge_shard_artifacts, with_missing_shards

    gaps = merge_shard_artifacts(staging, dest, shard_arts, functools.partial(_merge_results, spent=spent))
    if len(prs) > 1:
        raise VlmpathError(f"artifacts disagree on the pull request number: {dict(sorted(prs.items()))}")
    pr = next(iter(prs), None)
    if not runs:
        if not errors:
            raise VlmpathError(f"no benchmark artifacts under {root}: expected one directory per machine "
                               f"with {RUN_FILE} and {RESULTS_SUBDIR}/")
        _publish(staging, out)
        if pr is not None:
            write_text_atomic(out / PR_NUMBER_FILE, f"{pr}\n")
        write_text_atomic(out / COMMENT_FILE, render_failures("Benchmarks did not run on any machine", errors))
        write_text_atomic(out / SUMMARY_FILE, log_text("\n".join(["no machine produced results:", *errors])) + "\n")
        return FlowResult("", "", (), out, None, 1 if fail_on_regression else 0, notes=tuple(errors))
    pairs = {(d["base_sha"], d["head_sha"]) for _, d in runs}
    if len(pairs) > 1:
        listing = "; ".join(f"{n}: {d['base_sha'][:8]}..{d['head_sha'][:8]}" for n, d in runs)
        raise VlmpathError(f"artifacts compared different commits ({listing}): re-run the benchmark workflow")
    base_sha, head = pairs.pop()
    if head_sha is not None and head != head_sha.lower():
        raise VlmpathError(f"artifacts measured head {head[:12]}, but the workflow run is for {head_sha[:12]}")
    sides = [[_load_merged(dest, sha, owner)] if len(engine_runs) < len(runs) else [] for sha in (base_sha, head)]
    # Serve rows from each artifact's own run files, never its comparison (pr.merge_serve).
    serve_got, serve_notes, no_serve = collect_serve(served, spent)
    for b, h in engine_runs + counts + [(s.base[-1], s.head[-1]) for s in serve_got]:
        sides[0].append(b)
        sides[1].append(h)
    # A quick run on any machine makes its banded rows indicative (run.json says so; a PR
    # could only make timings non-gating this way, which it can do anyway by its numbers).
    quick = any(d.get("quick") is True for _, d in runs)
    report = compare.compare(*(functools.reduce(records.merge_runs, side) for side in sides), cfg, quick=quick)
    report, paired_serve = judge_serve(report, serve_got, cfg)
    # Interleaved artifacts: timings judged on their own paired rounds, as ``ci pr`` did.
    report, round_notes, no_rounds = judge_rounds(report, staging, {a.name: a for a in _artifact_dirs(root)}, runs,
                                                  cfg, functools.partial(_merge_results, spent=spent))
    # Each machine's --bench, read as literal names (compare.selection): a pattern from an
    # artifact is never compiled (one could backtrack for minutes in this privileged job).
    chosen = {d["machine"]: d.get("bench") for _, d in runs if d.get("bench")}  # verdict (issue 39): withheld
    report = withhold(report, selection_withheld(report, chosen, trusted_selection(os.environ)))
    report = keep_selected(report, chosen,
                           counted_ids([run for pair in counts for run in pair]))
    report, grant_notes = _apply_accepted(report, *accepted, pr=pr, head=head)
    report = _with_head_definitions(report, staging, runs, root, head, sides[0], spent)
    if any(missing for _, missing, _ in gaps.values()):  # a shard that never arrived: named, never green
        report = replace(report, machines=tuple(
            with_missing_shards(m, *gaps[m.machine]) if m.machine in gaps and gaps[m.machine][1] else m
            for m in report.machines))
    notes = list(errors) + grant_notes + round_notes + serve_notes + paired_serve
    for name, d in runs:
        # A run's own notes may already name their machine (flow.py prefixes some): once.
        notes.extend(n if n.startswith(f"{d['machine']}: ") else f"{d['machine']}: {n}"
                     for n in d.get("notes", ()) if isinstance(n, str))
    if notes:
        report = replace(report, notes=tuple(dict.fromkeys(report.notes + tuple(n[:500] for n in notes))))
    header = [f"merged artifacts: {', '.join(n for n, _ in runs)}", f"base (merge-base): {base_sha}",
              f"head: {head}", f"pull request: {pr if pr is not None else 'unknown'}"]
    _publish(staging, out)
    if pr is not None:
        write_text_atomic(out / PR_NUMBER_FILE, f"{pr}\n")
    profiles = _read_profiles(root, [name for name, _ in runs])  # inside the comment's size fit
    absent = [f"{m}: shard {k}/{n}" for m, (n, ks, _) in sorted(gaps.items()) for k in ks]
    absent += no_rounds + no_serve
    code = write_outputs(out, report, header=header, fail=fail_on_regression, profiles=profiles,
                         incomplete_because=f"missing {', '.join(absent)}" if absent else None)
    _append_ir_grew(root, out, [name for name, _ in runs])
    machines = tuple(d["machine"] for _, d in runs)
    return FlowResult(base_sha, head, machines, out, report, code, notes=tuple(notes))
