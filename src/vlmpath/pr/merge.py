"""How do every machine's ``vlmpath ci pr`` artifacts become one PR comparison?

``merge_artifacts`` is the comment workflow's half of the PR check (``vlmpath ci merge``;
``pr.flow.run_pr`` is the benchmark half, one per machine): it stages and validates every
machine's artifact (``pr.artifact``: each manifest checked, every file read within one
budget, ``core.budget.RunBudget``: bytes of all artifacts together, time) and hands them to
the one judge (``pr.judge.judge``), the same one ``ci pr`` used on each artifact alone. It
writes the same output files ``run_pr`` writes. Artifact contents come from untrusted PR
code; what accepts a regression (``--accepted``, ``--base-accepted``, ``--grant``) comes
from the privileged workflow, never from an artifact.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from vlmpath.pr.artifact import (
    PR_NUMBER_FILE,
    RUN_FILE,
    RESULTS_SUBDIR,
    SHA40,
    artifact_dirs,
    dir_of,
    load_artifacts,
    read_pr_number,
    read_small,
)
from vlmpath.compare.withheld import trusted_selection, yardstick_required
from vlmpath.pr.judge import Acceptance, judge, write_verdict
from vlmpath.pr.outputs import COMMENT_FILE, SUMMARY_FILE, FlowResult
from vlmpath.core.budget import RunBudget
from vlmpath.core.errors import VlmpathError
from vlmpath.render.escape import log_text

_LINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # an artifact name fit for a link target


def artifacts_pr(artifacts: str | os.PathLike[str]) -> int:
    """The one pull request number the artifacts name (each ``pr-number``, validated as
    ``ci merge`` reads it); ``vlmpath ci label-grant`` asks the API about that PR."""
    root = Path(artifacts)
    prs = {read_pr_number(a / PR_NUMBER_FILE) for a in artifact_dirs(root) if (a / PR_NUMBER_FILE).exists()}
    if len(prs) != 1:
        raise VlmpathError(f"artifacts under {root} name {len(prs)} pull request numbers {sorted(prs)[:5]}, "
                           f"not one: each machine's artifact holds {PR_NUMBER_FILE}")
    return prs.pop()


def _read_profiles(root: Path, names: Sequence[str]) -> list:
    """Each artifact's profiles of regressed cases (``vlmpath.pr.profile``), for the
    merged comment; trace links point into that artifact, and only when its directory name
    is a plain one (a link target is built from validated parts only). Malformed: left
    out, said so."""
    from vlmpath.pr.profile import PROFILES_FILE
    from vlmpath.compare.profile_diff import CaseProfile, profiles_from_json

    profiles: list[CaseProfile] = []
    for name in names:
        path = dir_of(root, name) / PROFILES_FILE
        if path.is_file() and not path.is_symlink():
            try:
                got = profiles_from_json(read_small(path), prefix=f"{name}/")
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
        path = dir_of(root, name) / GREW_FILE
        if path.is_file() and not path.is_symlink():
            try:
                growths.extend(growths_from_json(read_small(path)))
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
    from vlmpath.compare import accepted as accepted_mod
    from vlmpath.compare.thresholds import load_thresholds
    from vlmpath.github.label_grant import load_grant

    root = Path(artifacts)
    out = Path(out_dir)
    if head_sha is not None and not SHA40.match(head_sha.lower()):
        raise VlmpathError(f"--head-sha {head_sha!r} is not a 40-digit sha")
    cfg = load_thresholds(thresholds)
    # The trusted workflow's selection comes from its environment, never from an artifact.
    acceptance = Acceptance(accepted_mod.load(accepted), accepted_mod.load(base_accepted),
                            load_grant(grant) if grant is not None else None,
                            trusted_bench=trusted_selection(os.environ),
                            yardstick_required=yardstick_required(os.environ))
    # Everything is merged and compared in a staging directory first: a corrupt artifact
    # fails the merge with --out left as it was (no half-merged results/, no pr-number).
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        return _merge(root, out, staging, cfg, acceptance, head_sha=head_sha, fail=fail_on_regression)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, out: Path) -> None:
    """Move the staged results into ``out`` (after the comparison succeeded)."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / RESULTS_SUBDIR).exists():
        shutil.rmtree(out / RESULTS_SUBDIR)
    (staging / RESULTS_SUBDIR).mkdir(exist_ok=True)
    os.replace(staging / RESULTS_SUBDIR, out / RESULTS_SUBDIR)


def _no_runs(root: Path, out: Path, staging: Path, errors: Sequence[str], pr: int | None, fail: bool) -> FlowResult:
    """Every machine's run failed: a comment naming each, never a green check."""
    from vlmpath.core.atomic import write_text as write_text_atomic
    from vlmpath.render.comment import render_failures

    if not errors:
        raise VlmpathError(f"no benchmark artifacts under {root}: expected one directory per machine "
                           f"with {RUN_FILE} and {RESULTS_SUBDIR}/")
    _publish(staging, out)
    if pr is not None:
        write_text_atomic(out / PR_NUMBER_FILE, f"{pr}\n")
    write_text_atomic(out / COMMENT_FILE, render_failures("Benchmarks did not run on any machine", errors))
    write_text_atomic(out / SUMMARY_FILE, log_text("\n".join(["no machine produced results:", *errors])) + "\n")
    return FlowResult("", "", (), out, None, 1 if fail else 0, notes=tuple(errors))


def _merge(root: Path, out: Path, staging: Path, cfg, acceptance: Acceptance, *, head_sha: str | None,
           fail: bool) -> FlowResult:
    from vlmpath.core.atomic import write_text as write_text_atomic

    spent = RunBudget()
    loaded = load_artifacts(root, spent)
    if not loaded.artifacts:
        return _no_runs(root, out, staging, loaded.errors, loaded.pr, fail)
    judged = judge(loaded.artifacts, cfg, replace(acceptance, pr=loaded.pr), staging=staging, spent=spent,
                   head_sha=head_sha, notes=loaded.errors)
    names = [a.name for a in loaded.artifacts]
    header = [f"merged artifacts: {', '.join(names)}", f"base (merge-base): {judged.base_sha}",
              f"head: {judged.head_sha}", f"pull request: {loaded.pr if loaded.pr is not None else 'unknown'}"]
    _publish(staging, out)
    if loaded.pr is not None:
        write_text_atomic(out / PR_NUMBER_FILE, f"{loaded.pr}\n")
    profiles = _read_profiles(root, names)  # inside the comment's size fit
    code = write_verdict(out, judged, header=header, fail=fail, profiles=profiles)
    _append_ir_grew(root, out, names)
    return FlowResult(judged.base_sha, judged.head_sha, judged.machines, out, judged.report, code,
                      notes=judged.notes)
