"""Did the pull request change what a real server of each side's tree serves, and how fast?

``ci pr --serve MODEL_DIR`` (``ServeOptions``): after the suite ran, ``serve_rounds`` starts
one server per side, each with that side's worktree ``src/`` first on its ``PYTHONPATH``
(the side's tree served, never an edit of the installed packages), keeps both up and
measures them in interleaved rounds (``serving.pairs.interleaved``: the same rounds as
``vlmpath serve-pair``; base-head, head-base, ...), writing each round's run files under
``OUT/serve/``. ``serve_sides`` turns them into each side's ``RunResults`` under the flow's
machine and commits (``compare.from_serve``: one row per ``serve_*`` row of the metric
table per workload and concurrency; across-side agreement computed from both sides'
texts), so the rows join the suite's comparison, the comment and the exit code; with two
or more rounds their timings are judged on the pairs (``compare.paired``). The notes name
every level whose texts differ (first differing character) and the chart
(``OUT/serve/serve-chart.png``, output tok/s vs concurrency base against head).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.from_serve import first_differences, run_from_serve
from vlmpath.compare.paired import paired_report
from vlmpath.compare.records import RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.core.errors import VlmpathError
from vlmpath.serving.bench import BenchSettings
from vlmpath.serving.launch import check_model_dir, kinds
from vlmpath.serving.pairs import LaunchSpec, interleaved
from vlmpath.serving.run_file import load_run
from vlmpath.suite.cases import SERVE_CONCURRENCY, SERVE_PRESETS

SERVE_SUBDIR = "serve"
CHART_FILE = "serve-chart.png"


@dataclass(frozen=True)
class ServeOptions:
    model: str
    launch: str = "transformers"
    rounds: int = 6                 # interleaved rounds per side: 6 give a full paired verdict
    python: str | None = None       # the server's interpreter (an engine env's for sglang/vLLM)
    device: str = "cpu"
    workloads: tuple[str, ...] = SERVE_PRESETS
    concurrency: tuple[int, ...] = SERVE_CONCURRENCY
    max_tokens: int = 8
    startup_timeout_s: float = 120.0

    def check(self) -> ServeOptions:
        """Refuse a bad option in one line, before anything is measured."""
        check_model_dir(self.model)
        if self.launch not in kinds():
            raise VlmpathError(f"--serve-launch {self.launch!r}: use one of {', '.join(kinds())}")
        if not 1 <= self.rounds <= 50:
            raise VlmpathError(f"--serve-rounds {self.rounds}: give 1 to 50 (6 or more for a full paired verdict)")
        return self


def serve_rounds(opts: ServeOptions, base_tree: Path, head_tree: Path, out: Path,
                 log: Callable[[str], None]) -> tuple[list[Path], list[Path]]:
    """Base's and head's run files, round by round (module doc); both servers stopped after."""
    model = str(check_model_dir(opts.model))
    spec = lambda tree: LaunchSpec(opts.launch, model, opts.python, opts.device,  # noqa: E731
                                   (str(tree / "src"),), None, opts.startup_timeout_s)
    settings = BenchSettings(tuple(opts.workloads), tuple(opts.concurrency), max_tokens=opts.max_tokens)
    files = interleaved({"base": spec(base_tree), "head": spec(head_tree)}, settings, opts.rounds,
                        out / SERVE_SUBDIR, log)
    return files["base"], files["head"]


def serve_sides(base_files: list[Path], head_files: list[Path], machine: str, base_sha: str,
                head_sha: str) -> tuple[list[RunResults], list[RunResults], list[str]]:
    """Each side's rounds as ``RunResults`` of the flow's machine and commits, and the notes
    naming every level whose greedy texts differ between the sides (last round)."""
    base_docs = [load_run(p) for p in base_files]
    head_docs = [load_run(p) for p in head_files]
    base = [run_from_serve(b, machine=machine, commit=base_sha) for b in base_docs]
    head = [run_from_serve(h, machine=machine, commit=head_sha, base=b) for b, h in zip(base_docs, head_docs)]
    notes = [f"served outputs differ: {w} c={c}, first at character {pos}"
             for w, c, pos in first_differences(base_docs[-1], head_docs[-1])]
    return base, head, notes


def judge_pairs(report: ComparisonReport, base: list[RunResults], head: list[RunResults],
                cfg: Thresholds) -> ComparisonReport:
    """The serve timings re-judged on the interleaved pairs (one round: left as judged)."""
    return paired_report(base, head, report, cfg) if len(base) > 1 else report


def draw(out: Path, base_files: list[Path], head_files: list[Path]) -> str:
    """The throughput chart; returns the note naming it (a drawing failure is a note too)."""
    from vlmpath.render.serve_chart import serve_chart

    target = out / SERVE_SUBDIR / CHART_FILE
    try:
        serve_chart([load_run(p) for p in base_files], [load_run(p) for p in head_files], target)
    except (ValueError, OSError) as exc:
        return f"serve chart not drawn: {exc}"
    return f"served throughput vs concurrency, base against head: {target}"
