"""Did this pull request make the embedding path slower or less accurate than its base?

``run_pr`` is the whole PR check on one machine (``vlmpath ci pr``):

1. resolve ``--base`` and ``--head`` to commits and take their **merge-base** as the
   baseline (comparing against the live base tip would blame the PR for whatever landed on
   the base branch meanwhile);
2. check head and the merge-base out into temporary ``git worktree``\\ s (the merge-base's
   benchmarks/ measure both sides), removed again afterwards, also when anything fails;
3. run the asv suite once per side with ``--set-commit-hash <sha>``, the same ``--machine``
   and the same results directory, so both runs land in one asv results tree;
4. copy just those two runs into ``OUT/results``, write ``run.json`` (the artifact's
   manifest, ``pr.artifact.RunManifest``) and hand the artifact to the one judge
   (``pr.judge.judge``, the same ``ci merge`` uses), writing ``comment.md`` (the PR
   comment body), ``comparison.json`` and ``summary.txt``.

How each side's code is put under test: the benchmarks run in the one existing
environment (the docker image or the CI venv; asv ``-E existing``), and each side's
worktree ``src/`` is put **first on ``ASV_PYTHONPATH``** (``vlmpath run --package-src``). asv 0.6.6 discards a plain
``PYTHONPATH`` in its benchmark subprocesses but turns ``ASV_PYTHONPATH`` into their
``PYTHONPATH`` (asv/environment.py ``Environment.run``), and ``PYTHONPATH`` entries come
before site-packages, so ``import vlmpath`` there resolves to that commit. We chose this
over ``pip install --no-deps <worktree>`` because it never mutates the environment: two
sides cannot leave the environment pointing at the wrong commit if a run is killed, no
write access to site-packages is needed (the images run as a non-root user), an editable
install of the checkout is left alone, and the torch of the image can never be touched.
Its limit is the same as ``--no-deps``: a commit that needs new dependencies must bring
them in the image first. Before each run the flow checks, in a subprocess with exactly
that path, that ``vlmpath`` imports from the worktree, so a shadowing install cannot
silently benchmark the wrong code.

Which benchmark files run: **base's** ``asv.conf.json`` and ``benchmarks/`` for both
sides, and base's packaged ``thresholds.yaml`` judges (``vlmpath.pr.yardstick``): head's
package code is what is under test, base's definitions are the yardstick, so a PR that
rewrites a benchmark to read less decides nothing. Head's new or changed definitions are
run too (head's suite, head's package, a results directory of their own) and shown as
"new definition, not judged". When head changes the yardstick (benchmarks, thresholds,
instruments: ``core.yardstick``), the comment says so at its top and lists the files. The
runner (``vlmpath run``) is this process's own vlmpath.

Runs are exclusive and leave nothing behind: the results directory is locked for the
whole flow (``core.run_lock``; a second run refuses, naming the first), every temporary
file of the flow, its runs and asv lives under one temporary directory, and an
interrupted flow (``core.interrupt``, in the CLI) ends its children, removes its worktrees
and that directory on the way out.

Base results for the merge-base on this machine are reused only when they are valid for
this comparison (``vlmpath.pr.base_reuse``): written by a trusted run (the main/nightly
workflow, ``vlmpath run --trusted``), with the same ``--quick``/``--scale``, the same
toolchain fingerprint, and a measured value with the same asv benchmark version for every
case head measured in the selection. They are looked up in ``--trusted-results`` (the
trusted store, read-only to PR jobs) or else the results directory; otherwise the base is
measured again and the comment says why (``--rerun-base`` always measures). Sides this
flow measures are stamped untrusted, so a PR's results never become anyone's baseline.
Head is always measured afresh, and a head run that wrote nothing new is an error.

The comment workflow's half (``vlmpath ci merge``, merging every machine's artifact into
one comparison) is ``vlmpath.pr.merge``; both judge with ``vlmpath.pr.judge`` and write with ``vlmpath.pr.outputs``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from vlmpath.pr.artifact import RESULTS_SUBDIR, Outcome, RunManifest, ShardClaim, write_manifest
from vlmpath.pr.judge import Acceptance, judge_own
from vlmpath.pr.options import PrOptions
from vlmpath.pr.outputs import COMMENT_FILE, RESULTS_ENV, FlowResult, draw_charts
from vlmpath.pr.yardstick import (
    DEFINITIONS_SUBDIR,
    changed_definitions,
    names_pattern,
    yardstick_of,
)
from vlmpath.pr.side import (
    RunSuite,
    SuiteRequest,
    base_reuse_problem,
    log,
    run_side,
    run_suite_subprocess,
    side_env,
)
from vlmpath.compare import accepted as accepted_mod
from vlmpath.compare.results_store import copy_comparison
from vlmpath.core.errors import VlmpathError
from vlmpath.core.git import git, merge_base, repo_root, resolve_commit, worktree
from vlmpath.core.interrupt import scratch_env
from vlmpath.core.run_lock import results_lock
from vlmpath.runner.discovery_cache import DISCOVERY_CACHE_ENV


def _default_machine() -> str:
    from vlmpath.measure.platform import probe

    return probe().machine


def _profile(root, m: RunManifest, report, out, cfg, env, profiler) -> list[str]:
    """Profiles of the regressed cases, appended to comment.md; returns notes."""
    from vlmpath.pr.profile import PROFILES_FILE, profile_regressions
    from vlmpath.compare.profile_diff import profiles_to_json
    from vlmpath.core.atomic import write_text as write_text_atomic
    from vlmpath.render.comment import render_markdown

    profiles = profile_regressions(root, report, out, cfg=cfg, scale=m.scale, env=env, runner=profiler)
    if not profiles:
        return []
    write_text_atomic(out / PROFILES_FILE, profiles_to_json(profiles))  # `ci merge` shows them too
    write_text_atomic(out / COMMENT_FILE, render_markdown(report, profiles=profiles))  # within the size fit
    return [f"profiled {len(profiles)} regressed case(s) on base and head: {out / 'profiles'}"]


def _head_definitions(runner, request, base_wt: Path, head_wt: Path, head_sha: str, env, out: Path,
                      bench: str | None = None) -> list[str]:
    """Head's new or changed benchmark definitions, run with head's suite into
    ``OUT/head-definitions`` (``pr.yardstick``; the judge shows them as not judged,
    ``pr.sources.definitions``); returns the names base lacks. A failure here is a note:
    the verdict never depends on these rows. ``bench``: the run's selection (asv's regex,
    searched in the name as ``asv run -b`` does): only the changed definitions it selects
    run (a one-line helper edit re-ran every benchmark of the module, selected or not)."""
    names, base_names = changed_definitions(base_wt, head_wt, sys.executable, side_env(head_wt, env))
    if bench:
        names = [n for n in names if re.search(bench, n)]
    if not names:
        return []
    defs = out / DEFINITIONS_SUBDIR
    defs.mkdir(parents=True)
    try:
        run_side(runner, request(head_sha, head_wt, head_wt, results=defs, sel=names_pattern(names),
                                 reports=DEFINITIONS_SUBDIR))
    except VlmpathError as exc:
        log(f"head's new or changed benchmark definitions not measured: {exc}")
        shutil.rmtree(defs, ignore_errors=True)
    return [n for n in names if n not in base_names]


def run_pr(opts: PrOptions, *, run_suite: RunSuite | None = None, env: Mapping[str, str] | None = None,
           profile: bool | None = None, profiler=None, serve_command: Sequence[str] | None = None) -> FlowResult:
    """Benchmark merge-base(opts.base, opts.head) and head on one machine and compare them.

    ``opts`` is ``vlmpath ci pr``'s options record (``pr.options.PrOptions``); the keywords
    are what a test puts in place of the real world (the suite runner, the environment,
    the profiler, what runs the serving child's ``vlmpath``: ``pr.serve.serve_rounds``). Of
    the options:
    ``shard`` (a ``runner.shards.Shard``): only that shard's cases, the same on both sides
    (``pr.shard``); its artifact joins the other shards' in ``ci merge``.
    ``trusted_results``: the trusted store a base may be reused from (default: the results
    directory). ``profile``: re-run each regressed routine case on both sides under
    torch.profiler (``vlmpath.pr.profile``); default: with the real suite runner only (a
    fake runner's numbers belong to no code), or whenever a ``profiler`` runner is given.
    ``interleave`` N >= 2: N alternating rounds, judged on pairs (``pr.interleave``).
    ``instructions``: also count each routine case's instructions on both sides (CPU only;
    ``pr.instructions``), merged into the same comparison; ``instructions_bench``: only the
    routine cases it matches (default: ``bench``'s); ``counter``: ``ops`` (native bytecodes and
    aten elements, seconds) or ``callgrind`` (instructions, minutes; ``selfcheck.ir_cases``).
    ``accepted``: the PR's accepted-regressions file (default: head's committed one); only
    its entries also in the base tip's committed file accept, and ``pr``-scoped ones only
    for ``pr`` (``compare.accepted``: the PR's own entries show as awaiting review and fail)."""
    from vlmpath.pr import interleave as pr_interleave

    for flag, pattern in (("--bench", opts.bench), ("--instructions-bench", opts.instructions_bench)):
        try:  # asv compiles it; the judge reads it as literal names (compare.selection)
            re.compile(pattern or "")
        except re.error as exc:
            raise VlmpathError(f"{flag} {pattern!r} is not a regular expression: {exc}") from None
    if opts.interleave:
        pr_interleave.check_rounds(opts.interleave)
    counting = opts.instructions
    if counting:  # before any measuring: a GPU backend or a missing valgrind is one clear error
        from vlmpath.pr import instructions as pr_instructions
        from vlmpath.selfcheck import callgrind

        pr_instructions.refuse_gpu()
        if opts.counter == "callgrind":
            callgrind.valgrind("or count with --counter ops")
    root = repo_root(opts.repo)
    base_tip = resolve_commit(root, opts.base)
    head_sha = resolve_commit(root, opts.head)
    base_sha = merge_base(root, base_tip, head_sha)
    machine = opts.machine or _default_machine()  # given: a MachineName the CLI parsed; probed: made usable
    rdir = Path(opts.results_dir or (env or os.environ).get(RESULTS_ENV) or root / ".asv" / "results").resolve()
    out = Path(opts.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # Base's packaged thresholds, never head's, and the yardstick files head moved (pr.yardstick).
    yardstick = yardstick_of(root, base_sha, head_sha, opts.thresholds)
    cfg = yardstick.thresholds
    # The PR's benchmarks/accepted.yaml is its proposal: an entry accepts only when the base
    # branch (its tip, committed) already holds it; the PR's own entries await review, failing.
    # Read before measuring: a malformed file costs seconds, not a measured suite.
    acceptance = Acceptance(accepted_mod.load(opts.accepted) if opts.accepted else accepted_mod.load_at(root, head_sha),
                            accepted_mod.load_at(root, base_tip), pr=opts.pr)
    runner = run_suite or run_suite_subprocess
    serve = opts.serve  # checked when it was built (pr.serve.ServeOptions)
    notes: list[str] = []
    log(f"base {opts.base} -> merge-base {base_sha[:8]} (tip {base_tip[:8]}); head {opts.head} -> {head_sha[:8]}; "
        f"machine {machine}; results {rdir}")

    top_notice = yardstick.notice
    if top_notice:  # the comment's top notice (core.yardstick), in run.json's notes for every judge
        notes.append(top_notice)
    shard = opts.shard
    side_bench, shard_entry = opts.bench, None
    if shard is not None and shard.k != 1 and serve is not None:
        serve = None  # served once, in shard 1 (ci merge refuses two artifacts of a machine with serve rows)
        notes.append(f"shard {shard}: serve rows are in shard 1/{shard.n}")
    child_env: dict[str, str] = {}

    def request(sha: str, source: Path, bench_root: Path, results: Path = rdir, sel: str | None = None,
                reports: str | None = None) -> SuiteRequest:
        return SuiteRequest(commit=sha, source=source, bench_root=bench_root, results_dir=results,
                            machine=machine, bench=sel or side_bench, quick=opts.quick, env=side_env(source, child_env),
                            scale=opts.scale, reports_dir=out / "runs" / (reports or sha[:8]))

    reused, new_definitions = False, []
    store = Path(opts.trusted_results).resolve() if opts.trusted_results else rdir
    # Left in reverse: the worktrees, then the temporary directory, then the results lock.
    with ExitStack() as stack:
        lock_env = stack.enter_context(results_lock(rdir, "vlmpath ci pr " + " ".join(sys.argv[1:])))
        # Only once the lock is held: a run refused by it never wipes the running one's outputs.
        _clear_stale(out)  # a stale copy would be judged as if new
        # After tmp is gone: a worktree interrupted while git was still adding it is pruned.
        stack.callback(git, root, "worktree", "prune", check=False)
        tmp = Path(tempfile.mkdtemp(prefix="vlmpath-ci-"))
        stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        (tmp / "t").mkdir()
        # asv's and the runs' own temporary files land in tmp too: an interrupted run's go with it.
        child_env.update({**(os.environ if env is None else env), **lock_env, **scratch_env(tmp / "t")})
        # Each side's suite is discovered once, not once per round and twice per run
        # (runner.discovery_cache: keyed by the files' content, gone with tmp).
        child_env[DISCOVERY_CACHE_ENV] = str(tmp / "discovered")
        head_wt = stack.enter_context(worktree(root, head_sha, tmp / "head"))
        # The yardstick is base's: its asv.conf.json and benchmarks/ measure both sides.
        base_wt = head_wt if base_sha == head_sha else stack.enter_context(worktree(root, base_sha, tmp / "base"))
        if shard is not None:  # chosen once, before either side runs, from the suite that judges (pr.shard)
            from vlmpath.pr.shard import pick as pick_shard

            picked = pick_shard(base_wt, head_wt, opts.bench, shard, store, machine, child_env)
            side_bench, shard_entry = picked.regex, picked.info
            notes.append(picked.line)
            if counting and picked.counts != shard.k:  # counted once, in the lightest shard (pr.shard)
                counting = False
                notes.append(f"shard {shard}: instruction counts are in shard {picked.counts}/{shard.n}")
        if opts.interleave:  # ABAB...: never reuses base (see pr.interleave)
            pr_interleave.run_rounds(
                opts.interleave, out, rdir, machine, base_sha, head_sha,
                lambda: run_side(runner, request(base_sha, base_wt, base_wt)),
                lambda: run_side(runner, request(head_sha, head_wt, base_wt)))
        else:
            run_side(runner, request(head_sha, head_wt, base_wt))
        if opts.interleave:  # the base was measured in the rounds: nothing reused
            notes.append(f"{opts.interleave} interleaved rounds (base, head, base, ...); timings judged on pairs")
        elif base_sha == head_sha:
            reused = True
            notes.append(f"base and head are the same commit {head_sha[:8]}: one run compared with itself")
        else:
            why = "--rerun-base" if opts.rerun_base else base_reuse_problem(
                store, rdir, machine, base_sha, head_sha, bench=side_bench, quick=opts.quick, scale=opts.scale)
            reused = why is None
            if not reused:
                notes.append(f"base {base_sha[:8]} measured: {why}")
                run_side(runner, request(base_sha, base_wt, base_wt))
            else:
                notes.append(f"base results for {base_sha[:8]} on {machine} reused from a trusted run in "
                             f"{store} (same options, toolchain and benchmark versions; --rerun-base "
                             "measures it again)")
        # Head's new or changed definitions: shown once (in shard 1 of a split check).
        if yardstick.moves_definitions and (shard is None or shard.k == 1):
            new_definitions = _head_definitions(runner, request, base_wt, head_wt, head_sha, child_env, out,
                                                opts.bench)
        copy_comparison(rdir, out / RESULTS_SUBDIR, machine, (base_sha, head_sha),
                        sources={base_sha: store} if reused and base_sha != head_sha else None)
        if serve is not None:  # while the worktrees exist: each side's tree is served
            from vlmpath.pr import serve as pr_serve

            pr_serve.serve_rounds(serve, base_wt, head_wt, out, log, env=child_env, command=serve_command)
            notes.append(pr_serve.chart_note(out))

    if counting:  # the counts join the artifact (OUT/instructions.json): judged with the rest
        pr_instructions.count_pr(root, base_sha, head_sha, out, machine=machine,
                                 bench=opts.instructions_bench or opts.bench, scale=opts.scale, counter=opts.counter)
    manifest = RunManifest(
        machine=machine, base_sha=base_sha, head_sha=head_sha, base_ref=opts.base, head_ref=opts.head,
        base_tip=base_tip, bench=opts.bench, quick=opts.quick, scale=opts.scale, reused_base=reused,
        notes=tuple(notes), interleave=opts.interleave, instructions=counting,
        counter=str(opts.counter) if counting else None, instructions_bench=opts.instructions_bench,
        shard=_claim(shard_entry), serve=serve.model if serve is not None else None,
        serve_rounds=serve.rounds if serve is not None else None, new_definitions=tuple(new_definitions))
    write_manifest(out, manifest)  # the artifact is whole: what ci merge reads, and what is judged now
    header = [f"base: {opts.base} -> merge-base {base_sha} (base tip {base_tip})",
              f"head: {opts.head} -> {head_sha}", f"machine: {machine}", f"results: {rdir}",
              *(f"note: {n}" for n in notes)]
    judged, code = judge_own(out, manifest, cfg, acceptance, header=header, fail=opts.fail_on_regression)
    report = judged.report
    if counting:  # each count that grew, explained by function (pr.instructions.what_grew)
        notes.extend(pr_instructions.what_grew(out, report))
    if profile if profile is not None else (run_suite is None or profiler is not None):
        notes.extend(_profile(root, manifest, report, out, cfg, env, profiler))
    chart_notes = draw_charts(out, report, cfg, judged.head_run) if opts.charts else []
    for n in chart_notes:
        log(n)
    write_manifest(out, replace(manifest, notes=tuple(notes), outcome=Outcome(
        len(report.regressions), len(report.not_judged), report.incomplete, code, tuple(chart_notes))))
    for n in (*notes, *judged.found):
        log(n)
    return FlowResult(base_sha, head_sha, (machine,), out, report, code, reused, (*notes, *judged.found))


def _claim(entry) -> ShardClaim | None:
    """The shard entry ``runner.shard_costs`` picked, as the manifest's typed claim."""
    if entry is None:
        return None
    return ShardClaim(int(entry["k"]), int(entry["n"]), tuple(sorted(entry["units"])), entry.get("costs_from"))


def _clear_stale(out: Path) -> None:
    """Everything a judge reads from OUT, from an earlier run into the same directory."""
    from vlmpath.pr.instructions import OUT_FILE
    from vlmpath.pr.interleave import ROUNDS_SUBDIR
    from vlmpath.pr.serve import SERVE_SUBDIR

    for sub in (RESULTS_SUBDIR, ROUNDS_SUBDIR, DEFINITIONS_SUBDIR, SERVE_SUBDIR):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / OUT_FILE).unlink(missing_ok=True)

