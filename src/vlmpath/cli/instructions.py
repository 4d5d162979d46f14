"""Which arguments does ``vlmpath instructions`` take, and what does it do with them?

It counts this checkout's routine cases in one process (``selfcheck.ir_cases``: natively by
default, or under callgrind)
and writes the records atomically; ``vlmpath ci pr --instructions`` uses the same counter
through ``pr.instructions``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlmpath.core import atomic
from vlmpath.core.errors import VlmpathError
from vlmpath.cli.options import scale_option
from vlmpath.core.scales import DEFAULT_SCALE
from vlmpath.core.option_enums import Counter
from vlmpath.selfcheck.ir_cases import DEFAULT_COUNTER, MODES


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("instructions", help="count one pass of each routine case exactly (native ops or callgrind, CPU)",
                       description="One process counts one pass (after an uncounted warm-up) of every selected "
                       "EmbedRoutine(pipeline, preset) case, and each tower, and writes one JSON of records.")
    p.add_argument("--out", required=True, metavar="FILE", help="the records (JSON), written atomically")
    p.add_argument("--bench", default=None, metavar="REGEX",
                   help="only cases whose asv name (bench_embed.EmbedRoutine.track_instructions(...)) matches")
    p.add_argument("--src", default=None, metavar="DIR", help="the src/ folder to count (default: this package's)")
    p.add_argument("--commit", default=None, help="the commit to record (default: the checkout's HEAD, if any)")
    scale_option(p, help="workload scale (a CPU scale: callgrind runs on the CPU)")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="torch threads (default: vlmpath run's rule, 1)")
    p.add_argument("--mode", default="routine", choices=MODES,
                   help="routine: the tower replayed, and counted on its own (default); full: the pass with its tower")
    p.add_argument("--counter", default=DEFAULT_COUNTER, type=Counter.parse, choices=list(Counter),
                   help="ops (default): Python bytecodes and aten elements, natively; callgrind: instructions")
    p.add_argument("--profiles", default=None, metavar="DIR",
                   help="keep each counted pass's profile (callgrind dump or ops breakdown) in DIR/this")
    p.set_defaults(func=_command)


def _commit_of(src: Path) -> str | None:
    from vlmpath.core.git import head, repo_root

    try:
        return head(repo_root(src))
    except (VlmpathError, OSError):
        return None


def _command(a: argparse.Namespace) -> int:
    import re

    from vlmpath.pr.instructions import count_threads, refuse_gpu
    from vlmpath.selfcheck.ir_cases import Side, count_sides, own_src, to_json

    if a.bench is not None:
        try:
            re.compile(a.bench)
        except re.error as exc:
            raise VlmpathError(f"--bench {a.bench!r} is not a regular expression: {exc}") from None
    src = Path(a.src).resolve() if a.src else own_src()
    if not (src / "vlmpath").is_dir():
        raise VlmpathError(f"--src {src}: no vlmpath package in it; pass a checkout's src/ folder")
    refuse_gpu("vlmpath instructions")
    if a.scale.gpu:
        raise VlmpathError(f"--scale {a.scale} needs a GPU; instruction counts run on the CPU: "
                           f"use --scale {DEFAULT_SCALE}")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    side = count_sides([Side("this", src, a.commit or _commit_of(src))], bench=a.bench, scale=a.scale,
                       threads=count_threads(a.threads), log=log, mode=a.mode,
                       profiles=Path(a.profiles).resolve() if a.profiles else None, counter=a.counter)[0]
    atomic.write_text(a.out, to_json([side]))
    if side["not_measured"]:
        print(f"not measured: {side['not_measured']}")
        return 1
    for r in side["records"]:
        what = r["benchmark"].rsplit(".", 1)[-1]
        print(f"{r['case']:<40} {what:<28} {r['instructions'] if r['error'] is None else 'failed: ' + r['error']}")
    print(f"{len(side['records'])} record(s), {side.get('seconds')} s ({a.counter}); records in {a.out}")
    return 0
