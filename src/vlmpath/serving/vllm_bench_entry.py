"""How is ``vllm bench serve`` run inside a light vLLM engine environment?

Run as ``ENV_PYTHON -m vlmpath.serving.vllm_bench_entry PLAN.json`` (``serving.engine_client``
builds the plan). Why not the ``vllm`` console script: its ``main`` imports every
subcommand, and the light CPU env has no ``uvicorn`` (``ModuleNotFoundError`` before
``bench`` is reached); and transformers' ``image_utils`` imports torchvision, whose
CUDA-built wheel fails next to the CPU torch (``operator torchvision::nms does not exist``)
unless ``engines.torchvision_shim`` defines its two schemas first. So this imports only
``vllm.benchmarks.serve`` (vLLM's own client code, unchanged), parses each run's argument
list with vLLM's own parser and calls its ``main``: one interpreter start and one vLLM
import for every run of the plan. A run that raises writes ``{"error": ...}`` as its result
and the next run goes on. Imports nothing of vlmpath but the shim (the engine env has none
of vlmpath's dependencies).
"""

from __future__ import annotations

import json
import os
import sys


def main(plan_path: str) -> int:
    from vlmpath.engines.torchvision_shim import ensure_torchvision_importable

    ensure_torchvision_importable()
    import torch

    if not torch.cuda.is_available():  # vLLM 0.33 picks its platform at import
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.benchmarks.serve import add_cli_args, main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    for run in plan["runs"]:
        parser = FlexibleArgumentParser()
        add_cli_args(parser)
        try:
            bench_main(parser.parse_args(run["argv"]))
        except BaseException as exc:  # noqa: BLE001 - one run's failure is its row, not the plan's end
            with open(run["result"] + ".error", "w", encoding="utf-8") as f:
                f.write(f"{exc.__class__.__name__}: {exc}"[:400])
            if isinstance(exc, KeyboardInterrupt):
                raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
