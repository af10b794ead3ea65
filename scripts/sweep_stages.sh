#!/usr/bin/env bash
# Stages against blocks per multiprocessor on the per-tap tensor-core route (GPU
# machine; log under $OUT): the sweep behind config_for's shared-memory budget.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
PY=scripts/gpu_python.sh
sweep() { $PY benchmarks/sweep.py "$@" 2>&1 | tee -a "$OUT/sweep-stages.log" | grep -E "^conv|^resnet|refused|rror" ; }
sweep conv1x1-256-64 f16 '{"stages": 2}' '{"stages": 3}' '{"stages": 4}'
sweep conv1x1-256-64 tf32 '{"reduction_tile_sizes": [1, 1, 32], "stages": 1}' \
  '{"reduction_tile_sizes": [1, 1, 32], "stages": 2}' '{"reduction_tile_sizes": [1, 1, 32], "stages": 3}'
sweep resnet50-conv1 tf32 '{"stages": 1}' '{"stages": 2}' '{"stages": 3}'
