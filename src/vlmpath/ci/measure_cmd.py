"""What does ``vlmpath measure`` do: plan the cases, pin threads as ``vlmpath run`` does,
measure, warn when the machine is busy, print the table and write the records?

Threads: ``--threads N``, else ``OMP_NUM_THREADS``, else 1 on a CPU device, the same rule
``vlmpath run`` applies to its benchmark processes (``vlmpath.measure.pinning``); the
count in effect is recorded in every record (``threads``), with the highest load average
seen (``load_avg``). A load beyond the cores is printed as a warning per case.
"""

from __future__ import annotations

import argparse
import sys

from vlmpath.core.errors import VlmpathError


def run_measure(a: argparse.Namespace, device: str) -> int:
    from tqdm import tqdm

    from vlmpath.measure.pinning import cpu_threads, load_warning
    from vlmpath.render.tables import text_table
    from vlmpath.suite.measure import Session, measure_case, plan_cases, write_records

    if a.repeat < 1:
        raise VlmpathError(f"--repeat must be at least 1, got {a.repeat}")
    cases = plan_cases(workloads=a.workload, encode=a.encode, inject=a.inject, count=a.count,
                       hash=a.hash, pipelines=a.pipeline, scale=a.scale, seed=a.seed)
    threads = cpu_threads(getattr(a, "threads", None), device)
    session = Session(device, a.weights)
    records = []
    bar = tqdm(cases, desc="measure", unit="case", disable=len(cases) < 2, file=sys.stderr)
    for case in bar:
        bar.set_postfix_str(case.label)
        rec = measure_case(case, session, repeat=a.repeat, count=not a.no_syncs, threads=threads)
        warning = load_warning(rec.load_avg)
        if warning:
            print(f"vlmpath measure: WARNING ({case.label}): {warning}", file=sys.stderr)
        records.append(rec)
    headers = ["workload", "encode", "inject", "count", "hash", "tok/s", "accuracy",
               "enc calls", "hits", "syncs", "enc syncs", "threads", "error"]
    print(text_table(headers, [[r.workload, r.pipeline["encode"], r.pipeline["inject"],
                                r.pipeline["count"], r.pipeline["hash"], r.tok_per_s, r.accuracy,
                                r.encoder_calls, r.cache_hits, r.syncs, r.encoder_syncs, r.threads,
                                (r.error or "")[:60]] for r in records]))
    if a.json:
        write_records(a.json, records)
    return 0
