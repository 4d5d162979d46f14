"""Did the pull request change what a real server of each side's tree serves, and how fast?

``ci pr --serve MODEL_DIR`` (``ServeOptions``): after the suite ran, ``serve_rounds`` runs
``vlmpath serve-pair`` as a child process, the very command a developer runs on their own
box (it is logged, whole, so the run can be repeated by hand): one server per side, each
with that side's worktree ``src/`` first on its ``PYTHONPATH`` (the side's tree served,
never an edit of the installed packages), both kept up and measured in interleaved rounds
(``serving.pairs.interleaved``; base-head, head-base, ...), each round's run files, the
servers' logs and the throughput chart under ``OUT/serve/``. A child, as the suite's sides
are (``vlmpath run``): the client's threads and memory end with it, and there is one way to
serve a pair, not two that drift. The judge (``pr.sources.serve``, the same for ``ci merge``)
turns them into each side's ``RunResults`` under the flow's machine and commits
(``compare.from_serve``: one row per ``serve_*`` row of the metric table per workload and
concurrency; across-side agreement computed from both sides'
texts), so the rows join the suite's comparison, the comment and the exit code; with two
or more rounds their timings are judged on the pairs (``compare.paired``). The notes name
every level whose texts differ (first differing character) and the chart
(``OUT/serve/serve-chart.png``, output tok/s vs concurrency base against head, drawn by the
child).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.serving.launch import check_model_dir, kinds
from vlmpath.suite.cases import SERVE_CONCURRENCY, SERVE_PRESETS

SERVE_SUBDIR = "serve"
CHART_FILE = "serve-chart.png"
LOG_FILE = "serve-pair.log"
#: ``vlmpath serve-pair`` exits 0 (unchanged), 1 (a regression) or 3 (not all judged) once
#: every round is written; 2 is a refusal or a failure. The rows are judged again here.
_MEASURED = (0, 1, 3)


@dataclass(frozen=True)
class ServeOptions:
    model: str
    launch: str = "transformers"
    rounds: int = 6                 # interleaved rounds per side: 6 give a full paired verdict
    python: str | None = None       # the server's interpreter (an engine env's, for an engine server)
    device: str = "cpu"
    workloads: tuple[str, ...] = SERVE_PRESETS
    concurrency: tuple[int, ...] = SERVE_CONCURRENCY
    max_tokens: int = 8
    startup_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        """A record that exists is a checked one: a bad option is refused in one line when it
        is built (by the CLI, before anything is measured), never after a measured suite."""
        object.__setattr__(self, "model", str(check_model_dir(self.model)))  # resolved: the child runs elsewhere
        if self.launch not in kinds():
            raise VlmpathError(f"--serve-launch {self.launch!r}: use one of {', '.join(kinds())}")
        if not 1 <= self.rounds <= 50:
            raise VlmpathError(f"--serve-rounds {self.rounds}: give 1 to 50 (6 or more for a full paired verdict)")


def serve_pair_argv(opts: ServeOptions, base_tree: Path, head_tree: Path, out: Path) -> list[str]:
    """``vlmpath serve-pair``'s arguments for serving both trees (module doc)."""
    argv = ["serve-pair", "--launch", opts.launch, "--model", opts.model,
            "--rounds", str(opts.rounds), "--base-pythonpath", str(base_tree / "src"),
            "--head-pythonpath", str(head_tree / "src"), "--out", str(out / SERVE_SUBDIR),
            "--device", opts.device, "--startup-timeout", f"{opts.startup_timeout_s:g}",
            "--max-tokens", str(opts.max_tokens)]
    argv += [a for w in opts.workloads for a in ("--workload", w)]
    argv += [a for c in opts.concurrency for a in ("--concurrency", str(c))]
    return argv + (["--python", opts.python] if opts.python else [])


def serve_rounds(opts: ServeOptions, base_tree: Path, head_tree: Path, out: Path, log: Callable[[str], None], *,
                 env: Mapping[str, str] | None = None,
                 command: Sequence[str] | None = None) -> tuple[list[Path], list[Path]]:
    """Base's and head's run files, round by round, from a child ``vlmpath serve-pair``
    (module doc); both servers are stopped when it ends. ``command``: what runs the child's
    ``vlmpath`` (default this interpreter's; a test's stand-in takes the same arguments).
    A child that measured nothing, or left a round out, is one error naming its log."""
    argv = [*(command or (sys.executable, "-m", "vlmpath.cli")), *serve_pair_argv(opts, base_tree, head_tree, out)]
    dest = out / SERVE_SUBDIR
    dest.mkdir(parents=True, exist_ok=True)
    log_path = dest / LOG_FILE
    log("serving both trees: " + " ".join(argv))
    with open(log_path, "wb") as fh:
        code = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=None if env is None else dict(env),
                              check=False).returncode
    files = {side: [dest / f"{side}-{i}.json" for i in range(opts.rounds)] for side in ("base", "head")}
    missing = [p.name for ps in files.values() for p in ps if not p.is_file()]
    if code not in _MEASURED or missing:
        tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        why = f"exited {code}" if code not in _MEASURED else f"wrote no {missing[0]}"
        raise VlmpathError(f"--serve: vlmpath serve-pair {why}; its last line: {tail[0][:200]!r} "
                           f"(whole log: {log_path})")
    return files["base"], files["head"]


def chart_note(out: Path) -> str:
    """The note naming the throughput chart the child drew (or saying it drew none)."""
    target = out / SERVE_SUBDIR / CHART_FILE
    if not target.is_file():
        return f"serve chart not drawn: see {out / SERVE_SUBDIR / LOG_FILE}"
    return f"served throughput vs concurrency, base against head: {target}"
