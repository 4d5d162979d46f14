"""Which recorded results and comparisons do the charts draw, and how are they grouped?

The reading half of ``vlmpath report`` (``report.py`` draws): ``load_history`` (every
commit with asv results, in commit-date order, behind ``check_results_dir``'s clear
errors), ``load_comparison`` (a ``vlmpath compare --json`` file), the regressions between
consecutive commits, and how a benchmark name or parameter list maps onto what a chart
shows (path, metric leaf, workload vs strategy, headline throughput benchmarks, the
accuracy record that goes with a throughput). Nothing here imports matplotlib.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.asv_results import existing_commits, load_asv
from vlmpath.compare.results_store import files_named
from vlmpath.compare.comparison import Comparison, ComparisonReport, loads_report
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.asv_names import strip_kind
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import headline_units

THROUGHPUT_UNITS = headline_units()  # the metric table's headline rows: tok/s, GB/s
DEFAULT_PATHS = ("encode", "inject", "hash", "embed")
WORKLOAD_PARAMS = ("workload", "preset")  # the parameter that names the workload


# --- naming -------------------------------------------------------------------------------


def path_of(benchmark: str) -> str:
    """``bench_embed.Embed.track_tok_per_s`` -> ``embed``."""
    head = benchmark.split(".", 1)[0]
    return head[len("bench_"):] if head.startswith("bench_") else head


def leaf_of(benchmark: str) -> str:
    return strip_kind(benchmark.rsplit(".", 1)[-1])


def split_params(params: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(workload, strategy) labels: the workload/preset parameter groups, the rest is the strategy."""
    d = dict(params)
    key = next((k for k in WORKLOAD_PARAMS if k in d), None)
    if key is not None:
        wl = d.pop(key)
    elif len(params) >= 2:
        wl = d.pop(params[-1][0])
    else:
        wl = ""
    return wl, " / ".join(d.values()) or "(default)"


def headline_benchmarks(metrics: Iterable[Metric]) -> list[str]:
    """Benchmarks whose unit is a throughput, sorted."""
    return sorted({m.benchmark for m in metrics if m.unit in THROUGHPUT_UNITS})


def primary_benchmarks(metrics: Iterable[Metric]) -> list[str]:
    """Per benchmark class its throughput benchmarks, else its timings (``time_*``), sorted."""
    by_class: dict[str, dict[str, set[str]]] = {}
    for m in metrics:
        by_class.setdefault(m.benchmark.rsplit(".", 1)[0], {}).setdefault(m.unit, set()).add(m.benchmark)
    out: set[str] = set()
    for units in by_class.values():
        fast = set().union(*(units.get(u, set()) for u in THROUGHPUT_UNITS))
        out |= fast or units.get("seconds", set())
    return sorted(out)


def accuracy_of(machine: MachineRun, benchmark: str) -> dict[tuple, Metric]:
    """Accuracy metrics of the same benchmark class, keyed by params."""
    cls = benchmark.rsplit(".", 1)[0]
    return {m.params: m for m in machine.metrics
            if m.unit == "fraction" and m.benchmark.rsplit(".", 1)[0] == cls
            and "accuracy" in m.benchmark.rsplit(".", 1)[-1]}


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of the positive values; None when there are none."""
    vals = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


# --- loading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    """Every recorded commit's results, oldest first, with the commit dates (ms since epoch)."""

    runs: tuple[RunResults, ...]
    dates: tuple[int, ...]
    results_dir: str = ""

    @property
    def latest(self) -> RunResults | None:
        return self.runs[-1] if self.runs else None

    def find(self, commit: str) -> RunResults | None:
        return next((r for r in self.runs if r.commit.startswith(commit.lower())), None)


def check_results_dir(results_dir: str | os.PathLike[str]) -> Path:
    """The results dir as a Path; a clear error if it is missing or cannot be read."""
    root = Path(results_dir)
    if not root.exists():
        raise VlmpathError(f"results directory {root} does not exist: run `vlmpath run` first "
                           "or pass --results DIR")
    if not root.is_dir():
        raise VlmpathError(f"results path {root} is not a directory: pass the asv results dir "
                           "(the one holding <machine>/machine.json)")
    try:
        os.listdir(root)
    except OSError as exc:
        raise VlmpathError(f"cannot read results directory {root}: {exc.strerror}; "
                           "fix its permissions or pass another --results DIR") from None
    return root


def _commit_date(root: Path, sha8: str) -> int:
    for f in files_named(root, sha8):
        try:
            date = json.loads(f.read_text(encoding="utf-8")).get("date")
        except (OSError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            raise VlmpathError(f"corrupted results file {f} ({type(exc).__name__}): "
                               "delete it or re-run") from None
        if isinstance(date, (int, float)):
            return int(date)
    return 0


def _started_ms(data) -> list[int]:
    """The ``started_at`` stamps (ms) of an asv 0.6 results file's benchmarks."""
    try:
        col = list(data["result_columns"]).index("started_at")
        return [int(row[col]) for row in data["results"].values()
                if isinstance(row, list) and len(row) > col and isinstance(row[col], (int, float))]
    except (KeyError, ValueError, TypeError, AttributeError):
        return []


def measured_at(results_dir: str | os.PathLike[str], commit: str, machine: str | None = None) -> int | None:
    """When ``commit`` was measured (ms since epoch): the latest benchmark start asv wrote
    into its results files (of ``machine``, else any); None if none says."""
    root = Path(results_dir)
    latest: int | None = None
    for f in files_named(root, commit[:8], machine):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue  # load_asv names a corrupted file; the date is only shown
        latest = max([latest or 0, *_started_ms(data)]) or latest
    return latest


def load_history(results_dir: str | os.PathLike[str], limit: int | None = 50) -> History:
    """The last ``limit`` commits with results, in commit-date order (empty if none yet)."""
    root = check_results_dir(results_dir)
    dated = sorted((_commit_date(root, sha8), sha8) for sha8 in existing_commits(root))
    if limit is not None:
        dated = dated[-limit:]
    runs = tuple(load_asv(root, sha8) for _, sha8 in dated)
    return History(runs=runs, dates=tuple(d for d, _ in dated), results_dir=str(root))


def consecutive_regressions(history: History, config: Thresholds, *,
                            judged: ComparisonReport | None = None,
                            ) -> dict[tuple[str, str, str], list[Comparison]]:
    """(head commit, machine, benchmark) -> failing comparisons vs the previous commit,
    judged with ``config`` (the caller's: no default, so marks agree with its comment).
    ``judged``: a comparison the caller already made; its pair is taken from it as it is
    (a paired or ``--bench``-filtered report is not judged again), the rest are compared."""
    out: dict[tuple[str, str, str], list[Comparison]] = {}
    done = (judged.base_commit, judged.head_commit) if judged is not None else None
    for prev, cur in zip(history.runs, history.runs[1:]):
        if (prev.commit, cur.commit) != done:
            add_regressions(out, compare(prev, cur, config))
    if judged is not None:
        add_regressions(out, judged)
    return out


def add_regressions(into: dict[tuple[str, str, str], list[Comparison]],
                    report: ComparisonReport) -> None:
    for c in report.regressions:
        into.setdefault((report.head_commit, c.machine, c.benchmark), []).append(c)


def load_comparison(source: str | os.PathLike[str] | ComparisonReport) -> ComparisonReport:
    """A comparison as given, or read from the file ``vlmpath compare --json`` wrote."""
    if isinstance(source, ComparisonReport):
        return source
    p = Path(source)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise VlmpathError(f"cannot read comparison {p}: {why}; pass the file "
                           "`vlmpath compare --json` wrote") from None
    return loads_report(text, str(p))
