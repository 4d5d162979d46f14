"""What do ``vlmpath measure`` and ``vlmpath engine install|list|sweep`` do with parsed arguments?

The handlers behind the CLI's ``measure`` and ``engine`` subcommands (``vlmpath.cli``
declares the arguments): ``measure`` plans the cases, measures them with the chosen engine through
``vlmpath.suite.engine_run.measure_cases`` (in this process for ``reference``, in the
engine environment's python otherwise) and prints one table row per case; ``engine``
installs and lists cached engine environments (``vlmpath.engines.envs``), complete or not;
``engine sweep`` measures a range of releases into one asv store and timeline chart
(``vlmpath.suite.sweep``, ``vlmpath.runner.sweep_asv``, ``vlmpath.render.sweep_chart``).
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
    if a.vllm_runner != "server" and any(s.name != "vllm" for s in specs):
        raise VlmpathError(f"--vllm-runner {a.vllm_runner} chooses vLLM's model runner: every --engine must be "
                           "vLLM (vllm==X), or leave --vllm-runner out")
    kw = dict(repeat=a.repeat, count=not a.no_syncs, device=device, weights=a.weights,
              python=a.engine_python, home=a.engine_home, threads=threads, tower=a.tower,
              vllm_runner=a.vllm_runner)
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


def install_spec(text: str):
    """``engine install``'s SPEC as an ``EngineSpec``; an error names what was typed
    (``engine install sglang``), never the ``--engine`` option it was not given as."""
    from vlmpath.core.errors import VlmpathError
    from vlmpath.engines import registry
    from vlmpath.engines.base import EngineSpec

    if text.strip() in registry.names():  # a name alone: which release?
        entry = registry.get(text.strip())
        raise VlmpathError(f"engine install {text!r}: which release? write {text.strip()}==X.Y.Z, e.g. "
                           f"`vlmpath engine install {entry.example}`")
    try:
        spec = EngineSpec.parse(text)
    except VlmpathError as exc:
        import re  # this command is the install: no "(after `vlmpath engine install ...`)" hint here

        said = re.sub(r" \(after `vlmpath engine install [^`]*`\)", "", str(exc))
        raise VlmpathError(said.replace(f"--engine {text.strip()!r}", f"engine install {text!r}")) from None
    if spec.kind != "release":
        raise VlmpathError(f"engine install {text!r}: give a release, e.g. "
                           f"`vlmpath engine install {registry.get(registry.names()[0]).example}`")
    return spec


def run_engine(a: argparse.Namespace) -> int:
    from vlmpath.engines import envs

    if a.engine_command == "sweep":
        return run_sweep_cmd(a)
    if a.engine_command == "install":
        spec = install_spec(a.spec)
        if not envs.env_for(spec, a.home).complete:  # before anything is created (engines.index_check)
            from vlmpath.engines.index_check import check_release

            check_release(spec)
        env = envs.install(spec, a.home)
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


SWEEP_HOME = "~/.cache/vlmpath/sweep"


def add_sweep_args(esub, names) -> None:
    """``vlmpath engine sweep NAME RELEASES``'s arguments (docs/engine-sweep.md)."""
    sw = esub.add_parser("sweep", help="measure every release of an engine into one asv dashboard and timeline")
    sw.add_argument("engine", choices=names)
    sw.add_argument("releases", help="A..B (the final releases in that range, e.g. 0.5.11..0.5.23) or a "
                    "comma-separated list (0.5.12,0.5.14)")
    sw.add_argument("--store", default=f"{SWEEP_HOME}/store", metavar="DIR",
                    help=f"the sweep's results, asv site and chart (default {SWEEP_HOME}/store)")
    sw.add_argument("--home", default=f"{SWEEP_HOME}/envs", metavar="DIR",
                    help=f"where the releases' envs go (default {SWEEP_HOME}/envs)")
    sw.add_argument("--cache", default=f"{SWEEP_HOME}/uv-cache", metavar="DIR",
                    help="the one uv cache every env hard-links from")
    sw.add_argument("--no-shared-cache", action="store_true", help="install each env with pip, as engine install")
    sw.add_argument("--workload", action="append", default=None, metavar="NAME",
                    help="preset (repeatable; default multi_region, mixed, interleaved_modalities, split_order, "
                         "cache_oversize, cache_dup_chunked, multi_span_chunks, cache_dup_pressure)")
    from vlmpath.cli.options import scale_option

    scale_option(sw)  # a Scale, parsed once here (the sweep state records its name)
    sw.add_argument("--repeat", type=int, default=1, help="timed passes per case (default 1)")
    sw.add_argument("--limit", type=int, default=None, metavar="N", help="measure at most N new releases now "
                    "(the rest stay to do: the sweep is recorded as partial)")
    sw.add_argument("--retry-failed", action="store_true", help="measure failed releases again")
    sw.add_argument("--remove-envs", action="store_true", help="delete each release's env once it is measured")
    sw.add_argument("--no-publish", action="store_true", help="skip `asv publish`")
    sw.add_argument("--engine-src", default=None, metavar="DIR", help="measure every release from this source "
                    "tree in this python (no installs: tests, offline tries)")
    sw.add_argument("--offline-dates", default=None, metavar="FILE", help="a PyPI-style JSON file to read the "
                    "releases and dates from instead of the package index")


def run_sweep_cmd(a: argparse.Namespace) -> int:
    import json

    from vlmpath.engines import releases as rel
    from vlmpath.engines.env_recipe import uv_command
    from vlmpath.suite import sweep

    selection = rel.parse_selection(a.releases)
    if a.repeat < 1 or (a.limit is not None and a.limit < 0):
        raise VlmpathError("--repeat must be at least 1 and --limit at least 0")
    workloads = a.workload or list(sweep.DEFAULT_WORKLOADS)
    from vlmpath.engines import registry

    package = registry.get(a.engine).package
    if a.offline_dates:
        from vlmpath.core import safe_json

        index = rel.parse_index(safe_json.load_file(Path(a.offline_dates), "not a package index JSON",
                                                    "give a file of PyPI's /pypi/NAME/json"))
    else:
        index = rel.index_releases(package)
    chosen = rel.select(a.engine, selection, index)
    store, home = Path(a.store).expanduser(), Path(a.home).expanduser()
    cache = None if a.no_shared_cache or a.engine_src else Path(a.cache).expanduser()
    if cache is not None:
        uv_command()  # no uv: say so before any work
    print(f"engine sweep {a.engine}: {len(chosen)} releases ({', '.join(r.version for r in chosen)})", file=sys.stderr)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    if a.engine_src:
        prepare = sweep.fake_prepare(a.engine_src)
    else:
        def prepare(r):
            return sweep.install_release(r, home=home, shared_cache=cache, log=log)

    def measure(p, cases):
        out = sweep.measure_release(p, cases, repeat=a.repeat)
        if a.remove_envs and not a.engine_src:  # disk for a long sweep: one env at a time
            from vlmpath.engines import envs

            envs.remove(p.spec, home)
        return out

    state = sweep.run_sweep(a.engine, chosen, store, prepare=prepare, measure=measure, workloads=workloads,
                            scale=a.scale, retry_failed=a.retry_failed, limit=a.limit, log=log)
    from vlmpath.render.sweep_chart import sweep_chart
    from vlmpath.runner.sweep_asv import publish, write_asv

    states = [sweep.load_state(store, p.name[len("sweep-"):-len(".json")]) for p in sorted(store.glob("sweep-*.json"))]
    write_asv(store, states)
    chart = sweep_chart(state, {p.version: sweep.point_records(store, a.engine, p) for p in state.ordered()},
                        store / f"timeline-{a.engine}.png")
    site = None if a.no_publish else publish(store)
    for p in state.ordered():
        print(f"{a.engine}\t{p.version}\t{p.date[:10]}\t{p.state}\t{p.reason or ''}")
    # Where an exact, gated number moved between consecutive releases (issue 38).
    steps = sweep.release_steps(state, {p.version: sweep.point_records(store, a.engine, p) for p in state.ordered()})
    for st in steps:
        print(f"{a.engine}\t{st.line}")
    print(json.dumps({"engine": a.engine, "partial": state.partial, "measured": len(state.points),
                      "requested": len(state.requested), "steps": len(steps), "chart": str(chart), "dashboard": str(site) if site else None}))
    return 0
