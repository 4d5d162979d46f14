"""Which arguments does ``vlmpath smoke`` (the GPU smoke check, ``ci/gpu-smoke.sh``) take?

The check itself is ``selfcheck.smoke.run_smoke``: our sync counts beside the driver's
(``set_sync_debug_mode``) and device-event timings beside wall time.
"""

from __future__ import annotations

import argparse

from vlmpath.cli.options import scale_option


def add_smoke(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("smoke", help="our sync counts and device timings vs the driver's (the GPU smoke check; CPU-runnable at tiny)")
    p.add_argument("out_dir")
    scale_option(p)
    p.add_argument("--preset", action="append", help="preset (repeatable; default: the headline presets)")
    p.set_defaults(func=_run)


def _run(a: argparse.Namespace) -> int:
    from vlmpath.selfcheck.smoke import run_smoke

    res = run_smoke(a.out_dir, a.scale, a.preset)
    for row in res["syncs"]["pipelines"]:
        print(f"syncs {row['preset']}/{row['pipeline']}: ours {row['count']}, driver {row['driver_count']}")
    for name, row in res["syncs"]["inject"].items():
        print(f"syncs inject {name}: ours {row['count']}, driver {row['driver_count']}")
    t = res["timing"]
    print(f"timing {t['preset']}: events {t['event_s']:.4f} s vs wall {t['wall_s']:.4f} s ({t['method']})")
    return 0
