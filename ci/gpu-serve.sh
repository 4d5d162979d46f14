#!/usr/bin/env bash
# A prepared serving check for a CUDA or ROCm box (docs/serving.md), unproven until a device
# is lent:  ci/gpu-serve.sh OUTDIR MODEL_DIR [sglang|vllm|transformers] [PYTHON]
# PYTHON is the engine environment's interpreter (vlmpath engine install NAME==X prints it);
# MODEL_DIR a local checkpoint (or one written by `vlmpath serve-bench --write-tiny-model`).
# Writes OUTDIR/serve.json (one run: 3 presets x concurrency 1 and 8) and OUTDIR/aa/ (an A/A
# pair of the same server, 6 interleaved rounds: the bf16 tolerance of the agreement gate).
# VLMPATH_SERVE_TREE: the tree whose src/ goes first on PYTHONPATH (default this checkout;
# bench-gpu.yml's serve step: the PR head mounted at /workspace, this script main's copy).
set -euo pipefail
OUT=${1:?usage: ci/gpu-serve.sh OUTDIR MODEL_DIR [sglang|vllm|transformers] [PYTHON]}
MODEL=${2:?usage: ci/gpu-serve.sh OUTDIR MODEL_DIR [sglang|vllm|transformers] [PYTHON]}
KIND=${3:-sglang}
SERVER_PY=${4:-python}
PY=${PYTHON:-python}
REPO=${VLMPATH_SERVE_TREE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
WL=(--workload many_small_images --workload video --workload multi_region)

timeout 280 "$PY" -m vlmpath.cli serve-bench --launch "$KIND" --model "$MODEL" --python "$SERVER_PY" \
    --device cuda "${WL[@]}" --concurrency 1 --concurrency 8 --max-tokens 32 --startup-timeout 180 \
    --out "$OUT/serve.json"
timeout 280 "$PY" -m vlmpath.cli serve-pair --launch "$KIND" --model "$MODEL" --python "$SERVER_PY" \
    --device cuda --workload video --concurrency 4 --max-tokens 32 --rounds 6 --startup-timeout 180 \
    --out "$OUT/aa" || echo "gpu-serve: the A/A pair was not green (exit $?): see $OUT/aa/comparison.json"
echo "gpu-serve: done; results are in $OUT"
