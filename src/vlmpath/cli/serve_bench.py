"""Which arguments do ``vlmpath serve-bench``, ``serve-pair`` and ``serve-compare`` take?

``serve-bench``: one real OpenAI-compatible server (``--server URL``, or one launched and
stopped here: ``--launch KIND --model DIR``, transformers or any engine whose registry entry
names a server) driven with the presets'
image requests at fixed concurrency levels; prints the table, writes the run (``--out``).
``serve-pair``: base's and head's servers launched side by side, measured in interleaved
rounds, then compared (exit 1 on a regression). ``serve-compare``: two sides' run files
compared by the metric table's rules (exit 1 on a regression, 3 when nothing was judged).
The measuring is ``vlmpath.serving``, the judging ``compare.from_serve``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlmpath.cli.options import launch_kinds
from vlmpath.core.errors import VlmpathError
from vlmpath.serving import bench_clients

DEFAULT_WORKLOADS = ("many_small_images", "video", "multi_region")
DEFAULT_CONCURRENCY = (1, 4)


def _bench_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", action="append", metavar="NAME",
                   help=f"preset (repeatable; default {', '.join(DEFAULT_WORKLOADS)})")
    p.add_argument("--concurrency", action="append", type=int, metavar="N",
                   help="concurrent requests in flight (repeatable; default 1 and 4)")
    p.add_argument("--max-tokens", type=int, default=8, help="completion tokens per request, no early stop (default 8)")
    p.add_argument("--prompts", type=int, default=None, metavar="N",
                   help="requests per level (default: max(2 x concurrency, the preset's requests))")
    p.add_argument("--repeats", type=int, default=1, help="times each level is sent (each a sample; default 1)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds one request may take before it is a failure (default 60)")
    p.add_argument("--seed", type=int, default=0, help="preset seed (default 0)")
    p.add_argument("--scale", default="tiny", choices=["tiny", "full"],
                   help="the presets' media sizes (default tiny; full: real-size images for a real model on a GPU)")


def _launch_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--python", default=None, metavar="PY",
                   help="interpreter of the server (default this one; an engine env's for an engine's server)")
    p.add_argument("--engine", default=None, metavar="NAME==X",
                   help="serve from this engine env's interpreter (`vlmpath engine install NAME==X`), instead "
                   "of --python")
    p.add_argument("--device", default="cpu", help="server device (default cpu)")
    p.add_argument("--startup-timeout", type=float, default=120.0, metavar="S",
                   help="seconds the server gets to answer /health (default 120)")


def server_python(a: argparse.Namespace) -> str | None:
    """``--python``, or the interpreter of ``--engine``'s complete env (refused in one line otherwise)."""
    if a.engine is None:
        return a.python
    from vlmpath.cli.options import engine_spec
    from vlmpath.engines.envs import require_env

    if a.python:
        raise VlmpathError("--engine and --python both name the server's interpreter: pass one")
    spec = engine_spec(argparse.Namespace(engine=a.engine, engine_src=None))  # the one parse (cli.options)
    if spec.kind != "release":
        raise VlmpathError(f"--engine {a.engine!r}: give an installed release NAME==X (`vlmpath engine list`)")
    return str(require_env(spec, getattr(a, "engine_home", None)).python)


def log_dir(a: argparse.Namespace) -> str:
    return a.log_dir or (str(Path(a.out).parent) if a.out else "serve-logs")


def _settings(a: argparse.Namespace):
    from vlmpath.measure.presets import PRESETS
    from vlmpath.serving.bench import BenchSettings

    workloads = tuple(a.workload or DEFAULT_WORKLOADS)
    bad = [w for w in workloads if w not in PRESETS]
    if bad:
        raise VlmpathError(f"--workload {bad[0]!r}: not a preset; use one of {', '.join(PRESETS)}")
    conc = tuple(a.concurrency or DEFAULT_CONCURRENCY)
    if any(not 1 <= c <= 256 for c in conc) or len(set(conc)) != len(conc):
        raise VlmpathError(f"--concurrency {list(conc)}: give distinct levels from 1 to 256")
    for flag, v, lo, hi in (("--max-tokens", a.max_tokens, 1, 4096), ("--repeats", a.repeats, 1, 100),
                            ("--prompts", a.prompts or 1, 1, 4096)):
        if not lo <= v <= hi:
            raise VlmpathError(f"{flag} {v}: give a whole number from {lo} to {hi}")
    if not 0 < a.timeout <= 3600:
        raise VlmpathError(f"--timeout {a.timeout:g}: give seconds from 0 to 3600")
    return BenchSettings(workloads, conc, a.max_tokens, a.prompts, a.repeats, a.timeout, a.scale, a.seed)


def add_serve_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-bench", help="drive a real OpenAI-compatible server with the presets' image requests: "
                       "throughput, TTFT/ITL, output agreement")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", metavar="URL", help="a running server, http://HOST:PORT")
    where.add_argument("--launch", choices=launch_kinds(),
                       help="launch this server for --model, and stop it at the end")
    where.add_argument("--write-tiny-model", metavar="DIR",
                       help="write the tiny seeded Qwen2.5-VL checkpoint (offline) into DIR and exit")
    p.add_argument("--model", metavar="DIR", help="model directory (with --launch; the model name with --server)")
    p.add_argument("--server-kind", default="transformers", choices=launch_kinds(),
                   help="with --server: how to ask it for exactly --max-tokens (default transformers)")
    p.add_argument("--port", type=int, default=None, help="with --launch: the port (default: a free one)")
    p.add_argument("--server-pythonpath", action="append", default=[], metavar="DIR",
                   help="with --launch: put DIR first on the server's PYTHONPATH (a side's tree; repeatable)")
    p.add_argument("--plant", default=None, metavar="FAULT",
                   help="with --launch, self-check: shift (image rows shifted by one) or delay:S; with "
                   "--launch NAME of an engine whose entry plants in its own code (server_plants): that "
                   "engine's faults (docs/serving.md)")
    p.add_argument("--out", metavar="FILE", help="write the run here (JSON, atomic)")
    p.add_argument("--labelled", default=None, metavar="FILE.jsonl",
                   help='also score a small labelled set: one {"image": path beside the file, "question", "answer"} '
                   "per line, each asked alone, greedily; exact match after normalisation (docs/serving.md)")
    p.add_argument("--labelled-max-tokens", type=int, default=32, metavar="N",
                   help="completion tokens at most per labelled question (the server may stop early; default 32)")
    p.add_argument("--log-dir", default=None, metavar="DIR", help="server log folder (default: beside --out)")
    p.add_argument("--engine-client", default="auto", choices=bench_clients.choices(),
                   help="also run an engine's own bench client (its registry entry names it) on the same server "
                   "and requests, both clients' throughput side by side (auto: every one whose engine env is "
                   "installed)")
    p.add_argument("--engine-home", default=None, metavar="DIR", help="engine envs' home (for --engine-client)")
    p.add_argument("--config", default=None, help="thresholds YAML (its req/s noise factor is the engine "
                   "client's spread)")
    _bench_options(p)
    _launch_options(p)
    p.set_defaults(func=_run_bench)


def _client_env(a: argparse.Namespace):
    """The engine clients to run and the rows of those never run (``serving.bench_clients``);
    refused in one line before any measuring when ``--engine-client NAME`` is not installed."""
    return bench_clients.chosen(a.engine_client, a.engine_home)


def _engine_client(a: argparse.Namespace, client, srv, settings, doc: dict, work: Path) -> list[dict]:
    """The engine clients' side-by-side rows (each entry's ``bench_client``); [] when not asked for."""
    from vlmpath.compare.from_serve import SERVE_BENCH
    from vlmpath.compare.thresholds import load_thresholds

    clients, rows = client
    rows = list(rows)
    if not clients:
        return rows
    factor = load_thresholds(a.config).factor_for(f"{SERVE_BENCH}.track_serve_request_per_s", "req/s",
                                                  "cpu" if a.device == "cpu" else "gpu")
    for c in clients:
        if c.python is None:
            rows.append({"client": c.name, "not_run": c.label})
            continue
        print(f"running {c.label} on the same server and requests", file=sys.stderr, flush=True)
        rows += c.run(srv, settings, doc, python=c.python, client=c.label, work=work / c.engine, factor=factor)
    return rows


def _run_bench(a: argparse.Namespace) -> int:
    from vlmpath.core.validate import check_output_files
    from vlmpath.render.serve_table import engine_client_table, serve_table
    from vlmpath.serving.bench import run_bench
    from vlmpath.serving.launch import attached, launched
    from vlmpath.serving.run_file import write_run

    if a.write_tiny_model:
        from vlmpath.serving.tiny_model import write_tiny_qwen

        print(f"wrote {write_tiny_qwen(a.write_tiny_model)}")
        return 0
    check_output_files(("--out", a.out))
    settings = _settings(a)
    client = _client_env(a)
    labelled = _labelled_set(a)  # refused in one line before any server starts
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if a.server:
        if a.plant or a.server_pythonpath:
            raise VlmpathError("--plant and --server-pythonpath need --launch (a server started here)")
        srv = attached(a.server, a.server_kind, a.model)
        if a.model and Path(a.model, "config.json").is_file():
            srv.model_dir = a.model  # the engine client's tokenizer
        doc = run_bench(srv, settings, say)
        doc["engine_client"] = _engine_client(a, client, srv, settings, doc, Path(log_dir(a)) / "engine-client")
        _ask(a, labelled, srv, doc, say)
    else:
        if not a.model:
            raise VlmpathError("--launch needs --model DIR (write a tiny one with --write-tiny-model DIR)")
        with launched(a.launch, a.model, log_dir=log_dir(a), python=server_python(a), port=a.port, device=a.device,
                      pythonpath=a.server_pythonpath, startup_timeout_s=a.startup_timeout, plant=a.plant) as srv:
            say(f"{a.launch} server up at {srv.url} (log {srv.log})")
            doc = run_bench(srv, settings, say)
            doc["engine_client"] = _engine_client(a, client, srv, settings, doc, Path(log_dir(a)) / "engine-client")
            _ask(a, labelled, srv, doc, say)
    print(serve_table(doc), end="")
    print(engine_client_table(doc.get("engine_client", [])), end="")
    if a.out:
        write_run(a.out, doc)
        print(f"wrote {a.out}")
    if a.plant:  # one server agrees with itself: a plant shows only against an unplanted side
        print(f"--plant {a.plant} alone judges nothing (the planted server agrees with itself): run "
              f"`vlmpath serve-pair --launch {a.launch} --head-plant {a.plant} ...` for base against a planted head")
    return 1 if any(c["errors"] for c in doc["cases"]) or (doc.get("labelled") or {}).get("errors") else 0


def _labelled_set(a: argparse.Namespace):
    from vlmpath.serving.labelled import load_labelled

    if a.labelled is None:
        return None
    if not 1 <= a.labelled_max_tokens <= 4096:
        raise VlmpathError(f"--labelled-max-tokens {a.labelled_max_tokens}: give a whole number from 1 to 4096")
    return load_labelled(a.labelled)


def _ask(a: argparse.Namespace, items, srv, doc: dict, say) -> None:
    """The labelled-set part of the run, and its score line (``serving.labelled``)."""
    from vlmpath.render.escape import log_line
    from vlmpath.serving.labelled import ask_labelled, score, set_name

    if items is None:
        return
    doc["labelled"] = ask_labelled(srv, items, set_name(a.labelled), max_tokens=a.labelled_max_tokens,
                                   timeout_s=a.timeout)
    correct, n = score(doc["labelled"])
    failed = f", {doc['labelled']['errors']} failed: {doc['labelled']['error']}" if doc["labelled"]["errors"] else ""
    say(log_line(f"labelled-set score {doc['labelled']['set']}: {correct}/{n} = {correct / n:.3f} "
                 f"(exact match after normalisation){failed}"))


def add_serve_pair(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-pair", help="launch base's and head's servers, measure them in interleaved rounds, "
                       "compare (exit 1 on a regression)")
    p.add_argument("--launch", default="transformers", choices=launch_kinds())
    p.add_argument("--model", required=True, metavar="DIR", help="the model directory both sides serve")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds per side (default 6: a full paired verdict)")
    for side in ("base", "head"):
        p.add_argument(f"--{side}-pythonpath", action="append", default=[], metavar="DIR",
                       help=f"put DIR first on {side}'s server PYTHONPATH (its tree; repeatable)")
        p.add_argument(f"--{side}-plant", default=None, metavar="FAULT", help=f"self-check: a planted fault in {side}")
    p.add_argument("--out", required=True, metavar="DIR", help="run files, server logs and comparison.json here")
    p.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    p.add_argument("--engine-client", default="none", choices=bench_clients.choices(),
                   help="also run an engine's own bench client on each side's server and requests in the last "
                   "round (rows in the run files' engine_client; default none)")
    p.add_argument("--engine-home", default=None, metavar="DIR", help="engine envs' home (for --engine and "
                   "--engine-client)")
    _bench_options(p)
    _launch_options(p)
    p.set_defaults(func=_run_pair)


def _run_pair(a: argparse.Namespace) -> int:
    from vlmpath.serving.pairs import LaunchSpec, interleaved

    if not 1 <= a.rounds <= 50:
        raise VlmpathError(f"--rounds {a.rounds}: give 1 to 50 (6 or more for a full paired verdict)")
    settings = _settings(a)
    python = server_python(a)
    spec = lambda pp, plant: LaunchSpec(a.launch, a.model, python, a.device, tuple(pp), plant,  # noqa: E731
                                        a.startup_timeout)
    client = _client_env(a)

    def last_round(side, srv, settings, doc):
        doc["engine_client"] = _engine_client(a, client, srv, settings, doc, Path(a.out) / f"engine-client-{side}")

    files = interleaved({"base": spec(a.base_pythonpath, a.base_plant), "head": spec(a.head_pythonpath, a.head_plant)},
                        settings, a.rounds, a.out, lambda m: print(m, file=sys.stderr, flush=True),
                        last_round=None if a.engine_client == "none" else last_round)
    return _compare([str(p) for p in files["base"]], [str(p) for p in files["head"]], a.config,
                    str(Path(a.out) / "comparison.json"), str(Path(a.out) / "serve-chart.png"))


def add_serve_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-compare", help="compare base's and head's serve runs; exit 1 on a regression")
    p.add_argument("--base", nargs="+", required=True, metavar="RUN", help="base's run files (one per round)")
    p.add_argument("--head", nargs="+", required=True, metavar="RUN", help="head's run files, round for round")
    p.add_argument("--config", default=None, help="thresholds YAML overriding the defaults")
    p.add_argument("--json", default=None, metavar="FILE", help="write the comparison as JSON here")
    p.add_argument("--chart", default=None, metavar="FILE",
                   help="draw output tok/s vs concurrency, base against head (PNG or SVG by the suffix)")
    p.set_defaults(func=lambda a: _compare(a.base, a.head, a.config, a.json, a.chart))


def _compare(base: list[str], head: list[str], config: str | None, json_out: str | None,
             chart: str | None = None) -> int:
    from vlmpath.compare.from_serve import compare_serve_runs
    from vlmpath.compare.thresholds import load_thresholds
    from vlmpath.core.atomic import write_text
    from vlmpath.render import comment as render
    from vlmpath.render.escape import log_line

    if chart:
        from vlmpath.core.validate import check_output_files

        check_output_files(("--chart", chart))
    report, diffs = compare_serve_runs(base, head, load_thresholds(config))
    print(render.render_terminal(report), end="")
    for workload, conc, pos in diffs:
        print(log_line(f"outputs differ: {workload} c={conc}, first at character {pos}"))
    if json_out:
        write_text(json_out, render.render_json(report))
    if chart:
        from vlmpath.render.serve_chart import serve_chart
        from vlmpath.serving.run_file import load_run

        print(f"wrote {serve_chart([load_run(p) for p in base], [load_run(p) for p in head], chart)}")
    return report.exit_code()
