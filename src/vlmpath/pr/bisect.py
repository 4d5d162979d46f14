"""Which commit between a good and a bad one first regressed a benchmark?

``bisect(good, bad, bench)`` lists ``good..bad`` along the first-parent line (the commits
main actually had), makes sure ``bad`` regressed against ``good`` for the cases ``bench``
selects, then halves the range: a commit is *bad* when, compared with ``good`` by the PR
rules (``vlmpath.compare.verdict``), a selected case regressed or newly fails. Each commit
is measured like a side of ``vlmpath ci pr`` (a temporary ``git worktree``, its ``src/``
first on ``ASV_PYTHONPATH``, the existing environment, ``bad``'s suite for every commit so
the measuring code is the same), unless the results directory already holds results for
it that measured every selected case with the same options; those are reused (asv's own
``find`` builds an environment per commit, which our images cannot do). With both ends
already measured, 2^k commits need k measurements.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vlmpath.core.scales import DEFAULT_SCALE
from vlmpath.pr.base_reuse import stored_cases
from vlmpath.runner.run_files import read_run_info
from vlmpath.compare.selection import asv_selects as _selected
from vlmpath.pr.outputs import RESULTS_ENV
from vlmpath.pr.side import RunSuite, SuiteRequest, log, run_side, run_suite_subprocess, side_env
from vlmpath.compare.results_store import commit_files
from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.comparison import FAILING_VERDICTS, Comparison
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError
from vlmpath.core.git import git_out, repo_root, resolve_commit, worktree


@dataclass
class BisectResult:
    first_bad: str
    last_good: str
    subject: str
    regressions: list[Comparison]  # first_bad against last_good, selected cases only
    measured: list[str] = field(default_factory=list)  # commits measured by this run, in order
    reused: list[str] = field(default_factory=list)
    steps: int = 0


def _has_results(results_dir: Path, machine: str, sha: str, bench: str, quick: bool, scale: str | None) -> bool:
    files = commit_files(results_dir, machine, sha)
    if not files:
        return False
    info = read_run_info(results_dir, machine, sha)
    if info is not None and (bool(info.get("quick")) != quick
                             or (info.get("scale") or DEFAULT_SCALE) != (scale or DEFAULT_SCALE)):
        return False
    cases = [(k, measured) for k, (_, measured) in stored_cases(files).items() if _selected_key(bench, k)]
    return bool(cases) and all(measured for _, measured in cases)


def _selected_key(bench: str, key: tuple[str, tuple[str, ...]]) -> bool:
    return _selected(bench, key[0], tuple((f"p{i}", v) for i, v in enumerate(key[1])))


@dataclass(frozen=True)
class BisectOptions:
    """What ``vlmpath bisect`` takes besides the two commits and the selection."""

    repo: str | os.PathLike[str] = "."
    machine: str | None = None
    results_dir: str | os.PathLike[str] | None = None
    quick: bool = False
    scale: str | None = None
    thresholds: Thresholds | None = None


def bisect(good: str, bad: str, bench: str, opts: BisectOptions = BisectOptions(), *,
           run_suite: RunSuite | None = None, env: Mapping[str, str] | None = None) -> BisectResult:
    """Find the first commit in ``good..bad`` whose selected cases regressed against ``good``;
    ``run_suite``, ``env``: what a test puts in place of the real world."""
    try:
        re.compile(bench)
    except re.error as exc:
        raise VlmpathError(f"--bench {bench!r} is not a regular expression: {exc}") from None
    root = repo_root(opts.repo)
    quick, scale, machine = opts.quick, opts.scale, opts.machine
    good_sha, bad_sha = resolve_commit(root, good), resolve_commit(root, bad)
    line = git_out(root, "rev-list", "--first-parent", "--reverse", f"{good_sha}..{bad_sha}").split()
    if not line or line[-1] != bad_sha:
        raise VlmpathError(f"--bad {bad} is not a descendant of --good {good} along the first parent: "
                           "pass an older good commit")
    commits = [good_sha, *line]
    if machine is None:
        from vlmpath.measure.platform import probe

        machine = probe().machine  # given: a MachineName the CLI parsed; probed: made usable
    rdir = Path(opts.results_dir or (env or os.environ).get(RESULTS_ENV) or root / ".asv" / "results").resolve()
    cfg = opts.thresholds or Thresholds.default()
    runner = run_suite or run_suite_subprocess
    res = BisectResult(first_bad="", last_good="", subject="", regressions=[])
    tmp = Path(tempfile.mkdtemp(prefix="vlmpath-bisect-"))
    try:
        with worktree(root, bad_sha, tmp / "suite") as suite_root:
            def ensure(sha: str) -> None:
                if _has_results(rdir, machine, sha, bench, quick, scale):
                    if sha not in res.reused and sha not in res.measured:
                        res.reused.append(sha)
                    return
                with worktree(root, sha, tmp / sha[:12]) as wt:
                    run_side(runner, SuiteRequest(commit=sha, source=wt, bench_root=suite_root, results_dir=rdir,
                                                  machine=machine, bench=bench, quick=quick,
                                                  env=side_env(wt, env), scale=scale))
                res.measured.append(sha)

            def regressions(sha: str, against: str) -> list[Comparison]:
                ensure(against)
                ensure(sha)
                rep = compare(load_asv(rdir, against), load_asv(rdir, sha), cfg)
                return [c for c in rep.all() if c.machine == machine and c.verdict in FAILING_VERDICTS
                        and _selected(bench, c.benchmark, c.params)]

            if not regressions(bad_sha, good_sha):
                raise VlmpathError(f"no selected case ({bench}) regressed from {good_sha[:8]} to {bad_sha[:8]} on "
                                   f"{machine}: nothing to bisect (check --bench, or a wider range)")
            lo, hi = 0, len(commits) - 1  # commits[lo] good, commits[hi] bad
            while hi - lo > 1:
                mid = (lo + hi) // 2
                res.steps += 1
                bad_mid = bool(regressions(commits[mid], good_sha))
                log(f"bisect: {commits[mid][:8]} is {'bad' if bad_mid else 'good'}")
                lo, hi = (lo, mid) if bad_mid else (mid, hi)
            res.first_bad, res.last_good = commits[hi], commits[lo]
            res.regressions = regressions(commits[hi], commits[lo]) or regressions(commits[hi], good_sha)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.subject = git_out(root, "log", "-1", "--format=%s", res.first_bad).strip()
    return res


def render(res: BisectResult) -> str:
    """What ``vlmpath bisect`` prints: the commit and the numbers on both sides."""
    from vlmpath.render.fmt import fmt_pair
    from vlmpath.render.headline import case_text

    lines = [f"first bad commit: {res.first_bad} {res.subject}", f"last good commit: {res.last_good}"]
    for c in res.regressions:
        before, after = fmt_pair(c.base, c.head, c.unit)
        pct = f" ({(c.head / c.base - 1) * 100:+.1f}%)" if c.base and c.head is not None else ""
        lines.append(f"  {case_text(c.benchmark, c.params)} on {c.machine}: {before} -> "
                     f"{after if c.head is not None else 'failed'} {c.unit}{pct}")
    lines.append(f"{len(res.measured)} commit(s) measured, {len(res.reused)} reused from earlier results, "
                 f"{res.steps} bisection step(s)")
    return "\n".join(lines) + "\n"
