"""How fast and how consistently does a running server answer image requests from the presets?

``run_bench(server, settings)`` measures, per preset, first each request alone (concurrency
1: the reference greedy outputs), then each concurrency level: ``prompts`` requests (the
preset's requests in turn) sent by ``concurrency`` closed-loop workers, ``repeats`` times.
(``solo=False``: no reference, no within-run agreement: the
timing rounds of ``serving.pairs`` but the last.) Each level is one case of the run: its throughput and latency (median over the repeats,
every repeat kept as a sample), errors, and agreement of every prompt's greedy output with
the same request served alone (``stats.agreement``). The returned dict is the serve-run
document (``serving.run_file``); nothing here compares two runs.

A server that dies mid-run: requests after it fail at once ("server exited with code N");
one that hangs: each request gives up after ``timeout_s``. Either way every prompt is an
outcome and the case a failure row, never a hang.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from vlmpath.serving.chat_requests import ChatRequest, chat_requests
from vlmpath.serving.client import Outcome, stream_chat
from vlmpath.serving.launch import Server, extra_body
from vlmpath.serving.run_file import SCHEMA
from vlmpath.serving.stats import agreement, summarise

#: The numbers a case takes as the median of its repeats (each repeat kept as a sample).
SAMPLED = ("request_per_s", "input_tok_per_s", "output_tok_per_s", "ttft_p50_s", "ttft_p99_s",
           "itl_p50_s", "itl_p99_s")


@dataclass(frozen=True)
class BenchSettings:
    workloads: tuple[str, ...]
    concurrency: tuple[int, ...]
    max_tokens: int = 8
    prompts: int | None = None      # per level; None: max(2 x concurrency, the preset's requests)
    repeats: int = 1
    timeout_s: float = 60.0
    scale: str = "tiny"
    seed: int = 0
    warmup: bool = True             # one untimed request first (off for a server already warm)
    solo: bool = True               # each request alone first: the within-run agreement's reference


def _send(server: Server, bodies: Sequence[dict], concurrency: int, timeout_s: float) -> tuple[list[Outcome], float]:
    """Every body sent by ``concurrency`` closed-loop workers: outcomes in body order, wall seconds."""
    out: list[Outcome | None] = [None] * len(bodies)
    nxt = iter(range(len(bodies)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            code = server.exited()
            out[i] = (Outcome(error=f"server exited with code {code}: {server.why_it_died()}"[:400])
                      if code is not None else stream_chat(server.url, bodies[i], timeout_s))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        for f in [ex.submit(worker) for _ in range(concurrency)]:
            f.result()
    return [o if o is not None else Outcome(error="not sent") for o in out], time.perf_counter() - t0


def _texts(outcomes: Sequence[Outcome]) -> list[str | None]:
    return [o.text if o.ok else None for o in outcomes]


def _case(name: str, c: int, rids: list[int], runs: list[tuple[list[Outcome], float]],
          solo: list[str | None] | None, max_tokens: int) -> dict:
    sums = [summarise(o, wall, max_tokens) for o, wall in runs]
    case = {"workload": name, "concurrency": c, "prompts": len(rids), "repeats": len(runs),
            "completed": sum(s["completed"] for s in sums), "errors": sum(s["errors"] for s in sums),
            "error": next((s["error"] for s in sums if s["error"]), None),
            "early_stops": sum(s["early_stops"] for s in sums),
            "samples": {k: [s[k] for s in sums if s[k] is not None] for k in SAMPLED}}
    for k in SAMPLED:
        vals = case["samples"][k]
        case[k] = statistics.median(vals) if vals else None
    texts = [t for o, _ in runs for t in _texts(o)]
    case["agreement_solo"], case["first_diff_solo"] = (
        agreement(texts, [solo[r] for _ in runs for r in rids]) if solo is not None else (None, None))
    case["rids"] = rids
    case["outputs"] = _texts(runs[-1][0])
    return case


def run_bench(server: Server, settings: BenchSettings,
              progress: Callable[[str], None] = lambda _m: None) -> dict:
    """The serve-run document of ``settings`` measured against ``server`` (module doc)."""
    extra = extra_body(server.kind, settings.max_tokens)
    body = lambda r: r.body(model=server.model, max_tokens=settings.max_tokens, stream=True, extra=extra)  # noqa: E731
    cases, solos = [], {}
    warmed = not settings.warmup
    for name in settings.workloads:
        reqs: tuple[ChatRequest, ...] = chat_requests(name, settings.scale, settings.seed)
        if not warmed:  # the first request loads lazily-built kernels and caches: untimed
            _send(server, [body(reqs[0])], 1, settings.timeout_s)
            warmed = True
        if settings.solo:
            solo_out, _ = _send(server, [body(r) for r in reqs], 1, settings.timeout_s)
            solos[name] = _texts(solo_out)
        for c in settings.concurrency:
            n = settings.prompts or max(2 * c, len(reqs))
            rids = [i % len(reqs) for i in range(n)]
            runs = [_send(server, [body(reqs[r]) for r in rids], c, settings.timeout_s)
                    for _ in range(settings.repeats)]
            case = _case(name, c, rids, runs, solos.get(name), settings.max_tokens)
            cases.append(case)
            agree = "-" if case["agreement_solo"] is None else f"{case['agreement_solo']:.3f}"
            progress(f"{name} c={c}: {case['output_tok_per_s'] or 0:.1f} output tok/s, "
                     f"agreement {agree}, errors {case['errors']}")
    return {"schema": SCHEMA, "server": {"kind": server.kind, "url": server.url, "model": server.model_dir
                                         or server.model, "command": list(server.command),
                                         "ready_s": server.ready_s, "rss_bytes": server.rss_bytes()},
            "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()},
            "solo": solos, "cases": cases}
