#!/usr/bin/env bash
# A prepared serving check for a CUDA or ROCm box (docs/serving.md), unproven until a device
# is lent:  ci/gpu-serve.sh OUTDIR MODEL_DIR [sglang|vllm|transformers] [PYTHON]
# PYTHON is the server's interpreter (an engine environment's). For vllm without PYTHON the
# regular vLLM wheel (VLMPATH_GPU_VLLM, default vllm==0.33.0, with its own CUDA torch) is
# installed whole into OUTDIR/../vllm-gpu-env (reused when there), the GPU counterpart of
# the CPU server env vllm==0.32.0+cpu. MODEL_DIR: a local checkpoint (full scale: a real
# Qwen2.5-VL; or one written by `vlmpath serve-bench --write-tiny-model`).
# Writes OUTDIR/serve.json (one run: 3 presets x concurrency 1 and 8, full-size media),
# OUTDIR/aa/ (an A/A pair of the same server, 6 interleaved rounds: the bf16 tolerance of the
# agreement gate and the timing noise band) and, for vllm, OUTDIR/shift/ and OUTDIR/split/:
# the same pair as the CPU e2e test, head planted in vLLM's own multimodal code (an overlay,
# serving/engine_plants.py; expected red on agreement), and OUTDIR/delay/ (a 30 ms sleep per
# encoder batch; expected red on TTFT).
# VLMPATH_SERVE_TREE: the tree whose src/ goes first on PYTHONPATH (default this checkout;
# bench-gpu.yml's serve step: the PR head mounted at /workspace, this script main's copy).
set -euo pipefail
OUT=${1:?usage: ci/gpu-serve.sh OUTDIR MODEL_DIR [sglang|vllm|transformers] [PYTHON]}
MODEL=${2:?usage: ci/gpu-serve.sh OUTDIR MODEL_DIR [sglang|vllm|transformers] [PYTHON]}
KIND=${3:-sglang}
SERVER_PY=${4:-}
PY=${PYTHON:-python}
REPO=${VLMPATH_SERVE_TREE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
if [ -z "$SERVER_PY" ] && [ "$KIND" = vllm ]; then
  ENV="$(dirname "$OUT")/vllm-gpu-env"
  if [ ! -x "$ENV/bin/python" ] || ! "$ENV/bin/python" -c 'import vllm' 2>/dev/null; then
    "$PY" -m venv "$ENV"
    timeout 900 "$ENV/bin/python" -m pip install -q -c "$REPO/ci/constraints.txt" "${VLMPATH_GPU_VLLM:-vllm==0.33.0}"
  fi
  SERVER_PY="$ENV/bin/python"
fi
SERVER_PY=${SERVER_PY:-python}
WL=(--workload many_small_images --workload video --workload multi_region)
COMMON=(--launch "$KIND" --model "$MODEL" --python "$SERVER_PY" --device cuda --scale full --max-tokens 32
        --startup-timeout 300)

timeout 400 "$PY" -m vlmpath.cli serve-bench "${COMMON[@]}" "${WL[@]}" --concurrency 1 --concurrency 8 \
    --out "$OUT/serve.json"
timeout 400 "$PY" -m vlmpath.cli serve-pair "${COMMON[@]}" --workload many_small_images --concurrency 4 \
    --rounds 6 --out "$OUT/aa" || echo "gpu-serve: the A/A pair was not green (exit $?): see $OUT/aa/comparison.json"
if [ "$KIND" = vllm ]; then
  for plant in shift split delay:0.03; do
    dir=$OUT/${plant%%:*}
    # split bites only when one encoder batch holds items of different sizes (docs/serving.md:
    # on many_small_images, all one size, the pair stays green): multi_region for it.
    wl=many_small_images
    [ "$plant" = split ] && wl=multi_region
    rc=0
    timeout 400 "$PY" -m vlmpath.cli serve-pair "${COMMON[@]}" --workload "$wl" --concurrency 4 \
        --rounds 6 --head-plant "$plant" --out "$dir" || rc=$?
    echo "gpu-serve: planted $plant: exit $rc (1 expected: a regression; see $dir/comparison.json)"
  done
fi
echo "gpu-serve: done; results are in $OUT"
