"""sglang as an engine vlmpath drives: its package, environment, layout, seams and adapter.

The adapter (``vlmpath.engines.sglang_adapter.SglangEngine``) drives the release's own
``embed_mm_inputs`` with seams found by inspection (``vlmpath.engines.sglang_api``). Its
environment is ``sglang==X --no-deps`` beside the CPU torch pair and the import chain of
``data/sglang_import_chain.txt`` (``vlmpath.engines.env_recipe.pip_recipe``).
"""

from __future__ import annotations

from importlib import resources

from vlmpath.engines.registry import BenchClient, EngineEntry

#: Why sglang's own client is not run (``serve-bench``'s engine client): probed in the sglang
#: 0.5.23 engine env (torchvision shimmed) and read from its code (``benchmark/serving.py``).
CLIENT_NOT_RUN = ("not run: sglang.benchmark.serving does not import in the sglang engine env (its datasets "
                  "module imports HF `datasets`, not installed there), and it sends an ignore_eos field in "
                  "every request (false with --disable-ignore-eos), which transformers serve refuses (HTTP 422)")


def server(python: str, model: str, port: int, device: str, scratch: str) -> tuple[list[str], dict[str, str]]:
    """sglang's own OpenAI server (``sglang.launch_server``; documented flags, not run on a CPU here)."""
    return ([python, "-m", "sglang.launch_server", "--model-path", model, "--host", "127.0.0.1", "--port", str(port),
             "--trust-remote-code", "--disable-radix-cache"], {})


ENGINE = EngineEntry(
    name="sglang",
    package="sglang",
    import_name="sglang",
    adapter="vlmpath.engines.sglang_adapter:SglangEngine",
    import_chain=resources.files("vlmpath.engines").joinpath("data/sglang_import_chain.txt"),
    source_dirs=("python", ""),  # an sglang checkout keeps its package under python/
    seams=("cache", "chunk_encoding", "count", "scatter", "pad", "shm"),
    stage_seams=("chunk_encoding", "scatter", "count", "shm"),
    example_version="0.5.23",
    server=server,
    bench_client=BenchClient("sglang.benchmark.serving", not_run=CLIENT_NOT_RUN),
    checkout_hint="an sglang checkout's python/ directory",
    ci_paths=(
        "python/sglang/srt/managers/mm_*.py",
        "python/sglang/srt/managers/schedule_batch.py",
        "python/sglang/srt/mem_cache/multimodal_cache.py",
        "python/sglang/srt/multimodal/**",
    ),
)
