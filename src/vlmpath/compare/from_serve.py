"""Did head's server get slower or answer differently than base's, per workload and concurrency?

A serve run (``vlmpath serve-bench --out``, checked by ``serving.run_file``) becomes one
side's ``RunResults``: one ``Metric`` per ``serve_*`` row of the metric table per case
(benchmark ``serve.Serve.track_<name>``, parameters workload and concurrency), so the
ordinary comparison judges it with the table's directions and bands: throughput and
latency banded (and, over interleaved rounds, judged on pairs: ``compare.paired``),
agreement and errors exact. The across-side agreement row is computed here: head's greedy
texts (each prompt of the level and each request alone) against base's, base's own value
being the share of its prompts that produced a text. A level with any failed request has
its throughput and latency rows failing with the first error (the comparison then names
the case once, as one failure): a server that fails fast must never read as fast. A run
with a labelled set (``serve-bench --labelled``) adds one exact row, the labelled-set score
(parameter ``set``), recomputed from its outputs and answers (``serving.labelled.score``),
failing when any of its questions failed.
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.paired import paired_report
from vlmpath.compare.records import MachineRun, Metric, RunResults
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import compare
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import METRIC_BY_NAME
from vlmpath.serving.labelled import score as labelled_score
from vlmpath.serving.run_file import load_run
from vlmpath.serving.stats import agreement

SERVE_BENCH = "serve.Serve"
SOURCE = "serve"
#: run-file field -> metric row: the timing-like rows (failed when a request failed).
TIMED = {"request_per_s": "serve_request_per_s", "output_tok_per_s": "serve_output_tok_per_s",
         "input_tok_per_s": "serve_input_tok_per_s", "ttft_p50_s": "serve_ttft_p50_s",
         "ttft_p99_s": "serve_ttft_p99_s", "itl_p50_s": "serve_itl_p50_s", "itl_p99_s": "serve_itl_p99_s"}


def _texts(doc: dict, case: dict) -> list[str | None]:
    solo = doc["solo"].get(case["workload"], [])
    return list(case["outputs"]) + list(solo)


def _metric(machine: str, commit: str, case: dict, name: str, value: float | None,
            samples: Sequence[float] = (), error: str | None = None) -> Metric:
    row = METRIC_BY_NAME[name]
    params = (("workload", case["workload"]), ("concurrency", str(case["concurrency"])))
    return Metric(machine=machine, benchmark=f"{SERVE_BENCH}.{row.track_method}", params=params, unit=row.unit,
                  value=None if error else value, samples=tuple(samples) if not error else (),
                  error=error, commit=commit, source=SOURCE)


def run_from_serve(doc: dict, *, machine: str, commit: str, base: dict | None = None) -> RunResults:
    """One side's ``RunResults``; ``base``: the other side's document (this is head), or None (base)."""
    base_cases = {(c["workload"], c["concurrency"]): c for c in base["cases"]} if base else {}
    out = []
    for case in doc["cases"]:
        failed = case["error"] or ("failed requests" if case["errors"] else None)
        if failed:
            failed = f"{case['errors']} of {case['prompts'] * max(case['repeats'], 1)} requests failed: {failed}"
        for field, name in TIMED.items():
            value = case[field]
            err = failed or (None if value is not None else "not measured (no completed request)")
            # One value is one sample: with no samples the verdict would read as a full one.
            samples = case["samples"].get(field) or ([value] if value is not None else [])
            out.append(_metric(machine, commit, case, name, value, samples, err))
        out.append(_metric(machine, commit, case, "serve_errors", float(case["errors"])))
        if case["agreement_solo"] is not None:  # None: not measured (a timing round of serve-pair)
            out.append(_metric(machine, commit, case, "serve_agreement_solo", case["agreement_solo"]))
        mine = _texts(doc, case)
        if base is None:
            across = sum(t is not None for t in mine) / len(mine) if mine else None
        else:
            other = base_cases.get((case["workload"], case["concurrency"]))
            theirs = _texts(base, other) if other is not None else None
            across = agreement(mine, theirs)[0] if theirs and len(theirs) == len(mine) else None
        if across is not None or base is None:
            out.append(_metric(machine, commit, case, "serve_agreement_base", across,
                               error=None if across is not None else "no outputs"))
    if doc.get("labelled") is not None:
        out.append(_labelled_row(machine, commit, doc["labelled"]))
    run = MachineRun(machine=machine, commit=commit, metrics=tuple(sorted(out, key=lambda m: m.case)))
    return RunResults(commit=commit, machines=(run,), source=SOURCE)


def _labelled_row(machine: str, commit: str, part: dict) -> Metric:
    row = METRIC_BY_NAME["serve_labelled_score"]
    correct, n = labelled_score(part)
    err = f"{part['errors']} of {n} labelled questions failed: {part['error']}" if part["errors"] else None
    return Metric(machine=machine, benchmark=f"{SERVE_BENCH}.{row.track_method}", params=(("set", part["set"]),),
                  unit=row.unit, value=None if err else correct / n, error=err, commit=commit, source=SOURCE)


def first_differences(base: dict, head: dict) -> list[tuple[str, int, int]]:
    """(workload, concurrency, first differing character) of every level whose texts differ."""
    base_cases = {(c["workload"], c["concurrency"]): c for c in base["cases"]}
    out = []
    for case in head["cases"]:
        other = base_cases.get((case["workload"], case["concurrency"]))
        if other is None:
            continue
        mine, theirs = _texts(head, case), _texts(base, other)
        if len(mine) == len(theirs) and mine:
            frac, first = agreement(mine, theirs)
            if first is not None:
                out.append((case["workload"], case["concurrency"], first))
    return out


def compare_serve_runs(base_paths: Sequence[str], head_paths: Sequence[str], cfg: Thresholds | None = None,
                       *, machine: str = "cpu-serve") -> tuple[ComparisonReport, list[tuple[str, int, int]]]:
    """Base's and head's serve runs compared: one pair by the ordinary comparison; N interleaved
    pairs (round i of base beside round i of head) with timings judged on the pairs. Also the
    first differing position of every level whose texts differ (last round)."""
    if not base_paths or len(base_paths) != len(head_paths):
        raise VlmpathError(f"serve compare: {len(base_paths)} base and {len(head_paths)} head runs; give one "
                           "run per side per round, the same number on each side")
    cfg = cfg if cfg is not None else Thresholds.default()
    base_docs = [load_run(p) for p in base_paths]
    head_docs = [load_run(p) for p in head_paths]
    base_runs = [run_from_serve(b, machine=machine, commit="base") for b in base_docs]
    head_runs = [run_from_serve(h, machine=machine, commit="head", base=b) for b, h in zip(base_docs, head_docs)]
    report = compare(base_runs[-1], head_runs[-1], cfg)
    if len(base_runs) > 1:
        report = paired_report(base_runs, head_runs, report, cfg)
    return report, first_differences(base_docs[-1], head_docs[-1])
