#!/usr/bin/env bash
# One prepared check for a CUDA or ROCm box (finishes within 8 minutes), CPU-runnable with
# scale "tiny":  ci/gpu-smoke.sh OUTDIR [full|tiny]
# Writes into OUTDIR: fingerprint.json (vlmpath info), syncs.json + timing.json + smoke.json
# (vlmpath smoke: our sync count vs set_sync_debug_mode, events vs wall time),
# measure-encode.jsonl and measure-pipelines.jsonl (vlmpath measure on the headline cases).
# SMOKE_PRESETS (space separated) overrides the headline presets.
set -euo pipefail
OUT=${1:?usage: ci/gpu-smoke.sh OUTDIR [full|tiny]}
SCALE=${2:-full}
PY=${PYTHON:-python}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
PRESETS=${SMOKE_PRESETS:-many_small_images few_large_images multi_region}
mkdir -p "$OUT"
WL=(); P=()
for p in $PRESETS; do WL+=(--workload "$p"); P+=(--preset "$p"); done

timeout 120 "$PY" -m vlmpath.cli info --json > "$OUT/fingerprint.json"
cat "$OUT/fingerprint.json"
timeout 150 "$PY" -m vlmpath.cli smoke "$OUT" --scale "$SCALE" "${P[@]}"
timeout 120 "$PY" -m vlmpath.cli measure --scale "$SCALE" "${WL[@]}" --encode batched --encode per_request \
    --repeat 3 --json "$OUT/measure-encode.jsonl"
timeout 120 "$PY" -m vlmpath.cli measure --scale "$SCALE" "${WL[@]}" --pipeline default --pipeline legacy \
    --repeat 3 --json "$OUT/measure-pipelines.jsonl"
echo "gpu-smoke: done; JSON results are in $OUT"
