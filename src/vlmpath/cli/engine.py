"""What do ``vlmpath measure`` and ``vlmpath engine install|list`` do with parsed arguments?

The handlers behind the CLI's ``measure`` and ``engine`` subcommands (``vlmpath.cli``
declares the arguments): ``measure`` plans the cases, measures them with the chosen engine through
``vlmpath.suite.engine_run.measure_cases`` (in this process for ``reference``, in the
engine environment's python otherwise) and prints one table row per case; ``engine``
installs and lists cached engine environments (``vlmpath.engines.envs``), complete or not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def run_measure(a: argparse.Namespace) -> int:
    from vlmpath.core.validate import check_choices
    from vlmpath.engines.base import EngineSpec
    from vlmpath.suite.inputs import check_measure_inputs

    # Every input is checked (the --json file's directory included) before any work, and
    # before torch is imported (seconds): a misspelt name is refused at once.
    stages = {"encode": a.encode, "inject": a.inject, "count": a.count, "hash": a.hash}
    check_measure_inputs(json_path=a.json, repeat=a.repeat, seed=a.seed, pipelines=a.pipeline,
                         weights=a.weights, stages=stages)
    check_choices(stages, a.workload)
    labels = list(dict.fromkeys(a.engine or [None]))  # --engine A --engine B: side by side
    if a.engine_src and len(labels) > 1:
        raise VlmpathError("--engine-src measures one engine tree: give one --engine with it (which engine "
                           "the tree is), or drop --engine-src to compare releases")
    specs = [EngineSpec.parse(e, src=a.engine_src) for e in labels]  # once, here
    if a.chart and Path(a.chart).suffix.lower() not in (".png", ".svg"):
        raise VlmpathError(f"--chart {a.chart}: name a .png or .svg file")

    from tqdm import tqdm

    from vlmpath.measure.pinning import cpu_threads, load_warning
    from vlmpath.render.tables import measure_table
    from vlmpath.suite.engine_run import measure_cases
    from vlmpath.suite.inputs import check_scale_device, resolve_device
    from vlmpath.suite.measure import plan_cases

    chosen = [f"--{k}" for k in ("encode", "inject", "count", "hash", "pipeline") if getattr(a, k)]
    for spec in specs:
        if chosen and not spec.in_process:
            raise VlmpathError(f"{', '.join(chosen)} choose the reference routine's strategies; with --engine "
                               f"{spec.label} the engine's own code runs every stage: drop {', '.join(chosen)}")
    device = resolve_device(a.device)
    check_scale_device(a.scale, device, allow_cpu=a.allow_cpu)
    # Threads as ``vlmpath run`` sets them for its benchmark processes; recorded per case.
    threads = cpu_threads(a.threads, device)
    if a.tower == "engine" and any(s.in_process for s in specs):
        raise VlmpathError("--tower engine runs an engine's own vision tower: every --engine must name an engine "
                           "(NAME==X), not the reference")
    kw = dict(repeat=a.repeat, count=not a.no_syncs, device=device, weights=a.weights,
              python=a.engine_python, home=a.engine_home, threads=threads, tower=a.tower)
    records = []
    for spec in specs:
        # An engine has one path per stage (its seams are recorded): one case per workload.
        cases = plan_cases(workloads=a.workload, encode=a.encode, inject=a.inject, count=a.count, hash=a.hash,
                           pipelines=a.pipeline if spec.in_process else ["default"], scale=a.scale, seed=a.seed)
        if spec.in_process:  # one case at a time, with a progress bar
            bar = tqdm(cases, desc="measure", unit="case", disable=len(cases) < 2, file=sys.stderr)
            for case in bar:
                bar.set_postfix_str(case.label)
                records += measure_cases([case], spec, **kw)
        else:  # one engine process for every case (importing the engine takes seconds)
            records += measure_cases(cases, spec, **kw)
    busy = [r for r in records if load_warning(r.load_avg)]
    if busy:  # once per command, naming the worst case, not once per case
        worst = max(busy, key=lambda r: r.load_avg or 0.0)
        print(f"vlmpath measure: WARNING ({len(busy)} of {len(records)} cases measured on a busy machine; "
              f"worst {worst.workload}): {load_warning(worst.load_avg)}", file=sys.stderr)
    print(measure_table(records))
    if a.json:
        from vlmpath.suite.record import write_records

        write_records(a.json, records)
    if a.chart and records:
        from vlmpath.render.engines_chart import engines_chart

        print(f"chart: {engines_chart(records, a.chart)}", file=sys.stderr)
    if records and all(r.error for r in records):
        print(f"vlmpath measure: every case failed ({len(records)}); see the errors above", file=sys.stderr)
        return 1
    return 0


def run_engine(a: argparse.Namespace) -> int:
    from vlmpath.engines import envs
    from vlmpath.engines.base import EngineSpec

    if a.engine_command == "install":
        env = envs.install(EngineSpec.parse(a.spec), a.home)
        print(env.python)
        return 0
    rows = envs.list_envs(a.home)
    if not rows:
        print(f"no engine environments under {envs.engine_home(a.home)} (vlmpath engine install NAME==X)")
    for env in rows:
        m = env.manifest
        if not env.complete:  # interrupted, failed or still installing: never used, says how to repair
            why = ("installing now" if envs.installing(env)
                   else f"repair: vlmpath engine install {env.spec.label}")
            print(f"{env.spec.label}\t{env.path}\tincomplete\t({why})")
            continue
        size = f"{m['disk_bytes'] / 2**30:.2f} GiB" if "disk_bytes" in m else "?"
        secs = f"{m['install_seconds']:.0f} s" if "install_seconds" in m else "?"
        print(f"{env.spec.label}\t{env.path}\t{size}\t{secs}\tcomplete")
    return 0
