"""Does the engine's own bench client read the same throughput as ours, on the same server and requests?

``run_engine_client(server, settings, doc, python=...)`` runs ``vllm bench serve`` (vLLM's
own client, in the vLLM engine env's interpreter, through ``serving.vllm_bench_entry``)
against the server ``doc`` was measured on, once per case of ``doc``: the same requests
in the same order (a ``custom_image`` dataset whose lines are our chat requests' message
parts, images as the same data URLs; ``--disable-shuffle``, ``--num-prompts`` = our
prompts, so no oversampling), the same ``--max-concurrency``, the same output length, and
the same "no early stop" fields (``extra_body``: for ``transformers serve`` its
``generation_config``, never ``ignore_eos``, which it refuses with 422). Its
``random-mm`` dataset is not used: vLLM forces ``ignore_eos`` on for it.

Each case gets one row (``side_by_side``): both clients' request/s and output tok/s, the
share of vLLM's generated texts identical to ours, and a flag when vLLM's value lies
outside our repeats' range widened by the comparison's noise factor (the spread). A
client that cannot run is one ``not_run`` line saying why, never a failure of the run.
The whole client is bounded (``budget_s``) and killed with its process group past it.
vLLM's registry entry names ``run_engine_client`` as its ``bench_client`` (``serving.bench_clients``
offers it as ``serve-bench --engine-client vllm``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from vlmpath.core.safe_json import load_file
from vlmpath.serving.bench import BenchSettings
from vlmpath.serving.chat_requests import chat_requests
from vlmpath.serving.launch import Server, extra_body

MAX_TEXTS = 4096


def vllm_python(home: str | None = None) -> tuple[str | None, str]:
    """(interpreter, label) of the newest complete vLLM engine env; (None, why not) without one
    (``serving.bench_clients.interpreter`` for vLLM's entry)."""
    from vlmpath.engines import registry
    from vlmpath.serving.bench_clients import interpreter

    return interpreter(registry.get("vllm"), home)


def _argv(server: Server, settings: BenchSettings, dataset: Path, result: Path, concurrency: int,
          prompts: int) -> list[str]:
    model = server.model_dir or server.model
    argv = ["--backend", "openai-chat", "--base-url", server.url, "--endpoint", "/v1/chat/completions",
            "--model", str(model), "--tokenizer", str(server.model_dir), "--trust-remote-code",
            "--dataset-name", "custom_image", "--dataset-path", str(dataset), "--disable-shuffle",
            "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
            "--custom-output-len", str(settings.max_tokens), "--temperature", "0", "--num-warmups", "0",
            "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(result.parent),
            "--result-filename", result.name]
    extra = {k: v for k, v in extra_body(server.kind, settings.max_tokens).items()
             if k not in ("ignore_eos", "stream_options")}  # vLLM's client sends its own
    if server.kind != "transformers":
        argv.append("--ignore-eos")
    return argv + (["--extra-body", json.dumps(extra)] if extra else [])


def plan(server: Server, settings: BenchSettings, doc: dict, work: Path) -> list[dict]:
    """One run per case of ``doc``: its dataset file written, its argument list and result path."""
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for i, case in enumerate(doc["cases"]):
        reqs = chat_requests(case["workload"], settings.scale, settings.seed)
        dataset = work / f"dataset-{i}.jsonl"
        dataset.write_text("".join(json.dumps({"content": list(reqs[r].content)}) + "\n" for r in case["rids"]),
                           encoding="utf-8")
        result = work / f"result-{i}.json"
        runs.append({"workload": case["workload"], "concurrency": case["concurrency"], "result": str(result),
                     "argv": _argv(server, settings, dataset, result, case["concurrency"], len(case["rids"]))})
    return runs


def _finite(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 else None


def read_result(path: Path) -> dict:
    """vLLM's saved result, believed only in shape: numbers finite, texts capped; or its error."""
    err = Path(str(path) + ".error")
    if err.is_file():
        return {"error": err.read_text(encoding="utf-8", errors="replace")[:400]}
    if not path.is_file():
        return {"error": "no result written"}
    d = load_file(path, "vllm bench serve result")
    if not isinstance(d, dict):
        return {"error": "the result is not an object"}
    texts = d.get("generated_texts")
    texts = [t if isinstance(t, str) else None for t in texts[:MAX_TEXTS]] if isinstance(texts, list) else []
    dur = _finite(d.get("duration"))
    tin = _finite(d.get("total_input_tokens"))
    return {"request_per_s": _finite(d.get("request_throughput")),
            "output_tok_per_s": _finite(d.get("output_throughput")),
            "input_tok_per_s": tin / dur if tin is not None and dur else None,
            "completed": int(_finite(d.get("completed")) or 0), "failed": int(_finite(d.get("failed")) or 0),
            "texts": texts}


def within_spread(theirs: float | None, ours: Sequence[float], factor: float) -> bool | None:
    """Is ``theirs`` inside [min(ours) / (1 + factor), max(ours) x (1 + factor)]? None: nothing to judge."""
    if theirs is None or not ours:
        return None
    return min(ours) / (1 + factor) <= theirs <= max(ours) * (1 + factor)


def side_by_side(case: dict, res: dict, client: str, factor: float) -> dict:
    """One case's row: both clients' throughput, their texts' agreement, the flag (module doc)."""
    row = {"workload": case["workload"], "concurrency": case["concurrency"], "client": client,
           "ours_request_per_s": case["request_per_s"], "ours_output_tok_per_s": case["output_tok_per_s"],
           "ours_request_per_s_samples": list(case["samples"].get("request_per_s", [])),
           "factor": factor, "not_run": None, "flag": None}
    if "error" in res:
        return {**row, "not_run": f"not run: {client} failed: {res['error']}"[:400]}
    row.update({k: res[k] for k in ("request_per_s", "output_tok_per_s", "input_tok_per_s", "failed")})
    ours = case["outputs"]
    same = sum(1 for a, b in zip(res["texts"], ours) if a is not None and a == b)
    row["agreement_ours"] = same / len(ours) if ours and len(res["texts"]) == len(ours) else None
    flags = []
    for key in ("request_per_s", "output_tok_per_s"):
        inside = within_spread(res[key], case["samples"].get(key, []), factor)
        if inside is False:
            flags.append(f"{key.replace('_per_s', '/s').replace('_', ' ')} outside our spread x{1 + factor:g}")
    if res["failed"]:
        flags.append(f"{res['failed']} requests failed")
    row["flag"] = "; ".join(flags) or None
    return row


def run_engine_client(server: Server, settings: BenchSettings, doc: dict, *, python: str, client: str,
                      work: Path, factor: float = 0.10, budget_s: float | None = None) -> list[dict]:
    """``vllm bench serve`` over every case of ``doc`` (module doc): one row per case."""
    if not server.model_dir:
        return [{"client": client, "not_run": f"not run: {client} needs the model directory for its tokenizer "
                 "(pass --model DIR with --server)"}]
    runs = plan(server, settings, doc, work)
    plan_file = work / "plan.json"
    plan_file.write_text(json.dumps({"runs": runs}), encoding="utf-8")
    src = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": src, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    prompts = sum(len(c["rids"]) for c in doc["cases"])
    budget = budget_s if budget_s is not None else 120.0 + prompts * settings.timeout_s / 4
    log = work / "client.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([python, "-m", "vlmpath.serving.vllm_bench_entry", str(plan_file)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return [{"client": client, "not_run": f"not run: {client} took over {budget:g} s (log {log})"}]
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its stragglers (aiohttp workers)
    if proc.returncode != 0 and not any(Path(r["result"]).exists() for r in runs):
        tail = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()][-1:]
        return [{"client": client, "not_run": f"not run: {client} exited with code {proc.returncode}: "
                 f"{(tail or [''])[0][:300]} (log {log})"}]
    return [side_by_side(case, read_result(Path(r["result"])), client, factor)
            for case, r in zip(doc["cases"], runs)]
