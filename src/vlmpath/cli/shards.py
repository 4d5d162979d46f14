"""The ``vlmpath plan`` and ``vlmpath shards merge`` commands: how long the suite takes split
into N shards, and the shards' results put back into one store (``runner.plan``,
``runner.shard_store``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="expected wall time of the suite per shard, from the history's costs",
                       description="Costs each case from MACHINE's last trusted run in --results and splits "
                       "the selection as `vlmpath run --shard K/N` will.")
    p.add_argument("--machine", required=True, help="the machine whose history costs the cases")
    p.add_argument("--shards", type=int, default=1, metavar="N", help="number of shards (default 1)")
    p.add_argument("--results", default=".asv/results", help="asv results store (default .asv/results)")
    p.add_argument("--bench", "-b", default=None, metavar="REGEX", help="only benchmarks matching REGEX")
    p.add_argument("--repo", default=".", help="checkout whose benchmarks/ is planned (default .)")
    p.add_argument("--from", dest="estimate_from", default=None, metavar="MACHINE",
                   help="estimate from another machine's history (with --factor)")
    p.add_argument("--factor", type=float, default=None, help="with --from: multiply its costs by this")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.runner.discovery import discover, select
        from vlmpath.runner.plan import make_plan
        from vlmpath.runner.shards import MAX_SHARDS

        if not 1 <= a.shards <= MAX_SHARDS:
            raise VlmpathError(f"--shards {a.shards}: must be from 1 to {MAX_SHARDS}")
        repo = Path(a.repo).resolve()
        env = {**os.environ, "ASV_PYTHONPATH": str(repo / "src")}
        chosen = select(discover(repo / "benchmarks", sys.executable, env), a.bench)
        plan = make_plan(a.results, a.machine, a.shards, chosen, estimate_from=a.estimate_from, factor=a.factor)
        print(plan.render(), end="")
        return 0

    p.set_defaults(func=run)


def add_shards(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shards", help="put sharded results back together")
    s = p.add_subparsers(dest="shards_command", required=True)
    m = s.add_parser("merge", help="add results dirs to one store, merging each machine's shards into one file",
                     description="Every SRC is one runner's asv results directory; files of `vlmpath run "
                     "--shard K/N` runs of one machine and commit become one asv results file in --into.")
    m.add_argument("sources", nargs="+", metavar="SRC", help="asv results directories (one per runner)")
    m.add_argument("--into", required=True, metavar="STORE", help="the results store to add them to")

    def run(a: argparse.Namespace) -> int:
        from vlmpath.runner.shard_store import add_to_store

        report = add_to_store(a.into, a.sources)
        for line in report.lines():
            print(f"vlmpath shards: {line}")
        return 3 if report.missing else 0

    m.set_defaults(func=run)
