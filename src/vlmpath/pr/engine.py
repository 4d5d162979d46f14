"""Did this pull request to an *engine* (sglang, vLLM...) make its embedding path slower or wrong?

``run_engine_pr`` is ``vlmpath ci pr --engine-src REPO``: the same question as
``vlmpath.pr.flow.run_pr``, asked of an engine repository instead of vlmpath's own commits.

1. resolve ``--base`` and ``--head`` in the engine repository and take their merge-base as
   the baseline (as ``run_pr`` does: the PR is not blamed for what landed on base since);
2. find the engine (``--engine NAME``, else the one of ``vlmpath.engines.registry`` whose
   package layout the checkout fits) and its package's directory (``--engine-subdir``);
   check each side out into a temporary ``git worktree`` of the engine repository,
   removed again afterwards, also when anything fails;
3. measure each side with **this** vlmpath (``suite.engine_run.measure_cases`` with
   ``<worktree>/<subdir>`` as the engine source: a fresh engine worker process per side,
   so the engine's modules are never imported twice in one interpreter), same
   workloads, scale, seed and repeat;
4. write each side's records under ``records/`` and ``run.json`` (the artifact's manifest,
   kind ``engine``), and hand the artifact to the one judge (``pr.judge``: the records read
   as ``ci merge`` reads them, ``pr.sources.engine_records``; the same selection and
   accepted regressions), writing the usual ``comment.md``, ``comparison.json``,
   ``summary.txt`` and the PR chart. Exit 1 on a regression.

The measurer is injectable (``measure=``) so the flow is testable without an engine; the
real one is ``measure_engine``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from vlmpath.pr.artifact import Kind, Outcome, RunManifest, write_manifest
from vlmpath.pr.judge import Acceptance, judge_own
from vlmpath.pr.options import PrOptions
from vlmpath.pr.outputs import FlowResult, draw_charts
from vlmpath.pr.side import log
from vlmpath.pr.sources.engine_records import RECORDS_SUBDIR
from vlmpath.core.errors import VlmpathError
from vlmpath.core.git import merge_base, repo_root, resolve_commit, worktree
from vlmpath.core.option_enums import Tower, VllmRunner
from vlmpath.core.scales import DEFAULT_SCALE, Scale
from vlmpath.core.yardstick import ENGINE_NOTICE
from vlmpath.suite import record
from vlmpath.suite.record import CaseRecord

# split_order (issue 38): the one preset whose batched calls hold distinct row counts in an
# asymmetric order, so that a split by the right sizes in the wrong order reads red.
DEFAULT_WORKLOADS = ("multi_region", "many_small_images", "mixed", "split_order")


@dataclass(frozen=True)
class EngineSide:
    """One side of an engine comparison, as ``run_engine_pr`` asks a measurer for it."""

    commit: str
    source: Path  # <worktree>/<subdir>: put first on the measuring process's path
    json_path: Path  # where the JSON Lines of CaseRecords go (``suite.record.write_records``)
    workloads: tuple[str, ...]
    scale: Scale
    repeat: int
    engine_python: str | None  # None: VLMPATH_ENGINE_PYTHON, else the newest engine environment
    engine: str | None = None  # the registry's engine name (None: the one whose package the source holds)
    tower: Tower = Tower.OURS  # ours, or the engine's own vision tower
    vllm_runner: VllmRunner = VllmRunner.SERVER  # vLLM's model runner (the server's by default)


Measure = Callable[[EngineSide], None]


def measure_engine(side: EngineSide) -> None:
    """The real measurer: ``suite.engine_run.measure_cases`` with the side's checkout as an
    ``--engine-src``; the engine runs in a fresh worker process per side (its modules are
    never imported twice in one interpreter), which imports this vlmpath after the engine."""
    from vlmpath.engines.base import EngineSpec
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.measure import plan_cases

    # One case per workload: the engine has its own strategies, the pipeline is not a choice.
    cases = plan_cases(workloads=list(side.workloads), pipelines=["default"], scale=side.scale)
    log(f"measuring engine commit {side.commit[:8]} (code from {side.source}): "
        f"{', '.join(side.workloads)}, scale {side.scale}, repeat {side.repeat}")
    import torch

    # The GPU when there is one (CUDA or ROCm: both are torch.cuda), as `vlmpath measure` does.
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    measure_cases(cases, EngineSpec.for_tree(side.source, side.engine), repeat=side.repeat,
                  json_path=side.json_path, python=side.engine_python, device=device, tower=side.tower,
                  vllm_runner=side.vllm_runner)


def engine_subdir(root: Path, subdir: str | None, engine: str | None = None) -> str:
    """The directory inside the engine checkout that goes on the path: ``subdir`` when given,
    else where the engine's entry says its package sits (``--engine NAME``, else the engine
    whose layout the checkout fits: sglang's ``python/``, vLLM's root), else ``python``
    when the checkout has one, else the root."""
    from vlmpath.engines import registry

    if subdir is not None:
        if Path(subdir).is_absolute() or ".." in Path(subdir).parts:
            raise VlmpathError(f"--engine-subdir {subdir!r} must be a relative path inside the engine repository")
        return subdir
    if engine is not None:
        found = registry.get(engine).package_root(root)
    else:
        fit = registry.engine_of_checkout(root)
        found = fit[1] if fit else None
    if found is not None:
        return found
    return "python" if (root / "python").is_dir() else ""


def read_records(path: Path, commit: str) -> list[CaseRecord]:
    """The JSON Lines a side wrote; a missing or broken file names the side and the fix."""
    if not path.is_file():
        raise VlmpathError(f"the measuring run for engine commit {commit[:8]} wrote no records ({path}): "
                           "see its log above; does `vlmpath measure --engine-src` work on that checkout?")
    return record.read_records(path, str(path), "; re-run the measurement")


def _default_machine() -> str:
    from vlmpath.measure.platform import probe

    return probe().machine


def run_engine_pr(opts: PrOptions, *, measure: Measure | None = None) -> FlowResult:
    """Measure merge-base(opts.base, opts.head) of the engine repository ``opts.engine_src``
    and head, and judge them (module doc). Of the options: ``tower`` ``engine``: with the
    engine's own vision tower (a PR to it is measured too); ``vllm_runner``: which of vLLM's
    model runners both sides drive (a vLLM checkout); ``bench``: the rows judged (literal
    names, as ``ci merge`` reads them); ``accepted``: as for ``ci pr`` (default: the engine
    head's committed ``benchmarks/accepted.yaml``; only entries the base tip holds accept).
    ``measure``: what a test puts in place of the real measurer."""
    from vlmpath.compare import accepted as accepted_mod
    from vlmpath.compare.from_records import engines_of
    from vlmpath.compare.thresholds import load_thresholds

    if opts.repeat < 1:
        raise VlmpathError(f"--repeat must be at least 1, got {opts.repeat}")
    root = repo_root(opts.engine_src)
    base_tip = resolve_commit(root, opts.base)
    head_sha = resolve_commit(root, opts.head)
    base_sha = merge_base(root, base_tip, head_sha)
    sub = engine_subdir(root, opts.engine_subdir, opts.engine)
    machine = opts.machine or _default_machine()  # given: a MachineName the CLI parsed; probed: made usable
    wls = tuple(opts.workloads or DEFAULT_WORKLOADS)
    scale = opts.scale or DEFAULT_SCALE
    cfg = load_thresholds(opts.thresholds)
    out = Path(opts.out_dir).resolve()
    rec_dir = out / RECORDS_SUBDIR
    if rec_dir.exists():
        shutil.rmtree(rec_dir)  # a stale side would be compared as if new
    rec_dir.mkdir(parents=True)
    runner = measure or measure_engine
    notes: list[str] = []
    log(f"engine {root}: base {opts.base} -> merge-base {base_sha[:8]} (tip {base_tip[:8]}); "
        f"head {opts.head} -> {head_sha[:8]}; source dir {sub or '.'}; machine {machine}")

    def side(sha: str, wt: Path, name: str) -> list[CaseRecord]:
        src = wt / sub if sub else wt
        if not src.is_dir():
            raise VlmpathError(f"engine commit {sha[:8]} has no {sub!r} directory: pass --engine-subdir "
                               "(the directory that holds the engine's Python package)")
        path = rec_dir / f"{name}.jsonl"
        runner(EngineSide(sha, src, path, wls, scale, opts.repeat, opts.engine_python, opts.engine, opts.tower,
                          opts.vllm_runner))
        return read_records(path, sha)

    tmp = Path(tempfile.mkdtemp(prefix="vlmpath-engine-pr-"))
    try:
        with worktree(root, head_sha, tmp / "head") as head_wt:
            head_recs = side(head_sha, head_wt, "head")
        if base_sha == head_sha:
            notes.append(f"base and head are the same commit {head_sha[:8]}: one run compared with itself")
            base_recs = head_recs
            shutil.copyfile(rec_dir / "head.jsonl", rec_dir / "base.jsonl")  # the artifact has both sides
        else:
            with worktree(root, base_sha, tmp / "base") as base_wt:
                base_recs = side(base_sha, base_wt, "base")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # The yardstick is this vlmpath's (cases, thresholds, instruments), never the engine PR's;
    # the comment's notice also says what measured each side (release, and vLLM's runner).
    measured_by = (f"measured by: base {', '.join(engines_of(base_recs)) or '?'}; "
                   f"head {', '.join(engines_of(head_recs)) or '?'}")
    notes.append(f"{ENGINE_NOTICE}; {measured_by}")
    manifest = RunManifest(
        machine=machine, base_sha=base_sha, head_sha=head_sha, kind=Kind.ENGINE, base_ref=opts.base,
        head_ref=opts.head, base_tip=base_tip, bench=opts.bench, scale=scale, notes=tuple(notes),
        engine_subdir=sub, workloads=wls, repeat=opts.repeat,
        engines={"base": tuple(engines_of(base_recs)), "head": tuple(engines_of(head_recs))})
    write_manifest(out, manifest)
    acceptance = Acceptance(accepted_mod.load(opts.accepted) if opts.accepted else accepted_mod.load_at(root, head_sha),
                            accepted_mod.load_at(root, base_tip), pr=opts.pr)
    header = [f"engine: {root} ({sub or '.'})",
              f"base: {opts.base} -> merge-base {base_sha} (base tip {base_tip})",
              f"head: {opts.head} -> {head_sha}", f"machine: {machine}",
              f"workloads: {', '.join(wls)} (scale {scale}, repeat {opts.repeat})",
              *(f"note: {n}" for n in notes)]
    judged, code = judge_own(out, manifest, cfg, acceptance, header=header, fail=opts.fail_on_regression)
    report = judged.report
    from vlmpath.pr.instructions import GREW_FILE, what_grew_records

    (out / GREW_FILE).unlink(missing_ok=True)  # a stale file would explain another run
    notes.extend(what_grew_records(out, report, base_recs, head_recs))  # an engine count that moved, by function
    chart_notes = draw_charts(out, report, cfg) if opts.charts else []
    for n in chart_notes:
        log(n)
    write_manifest(out, replace(manifest, notes=tuple(notes), outcome=Outcome(
        len(report.regressions), len(report.not_judged), report.incomplete, code, tuple(chart_notes))))
    return FlowResult(base_sha, head_sha, (machine,), out, report, code, False, (*notes, *judged.found))
