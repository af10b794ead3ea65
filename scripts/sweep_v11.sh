#!/usr/bin/env bash
# ResNet-50 conv1 after the strided footprints (4 input rows a step, not 7): steps
# and stages again, in f16, f32 and tf32 (GPU machine; log under $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
PY=scripts/gpu_python.sh
sweep() { $PY benchmarks/sweep.py "$@" 2>&1 | tee -a "$OUT/sweep-v11.log" | grep -E "^conv|^resnet|refused|rror" ; }
sweep resnet50-conv1 f16 '{}' '{"stages": 3}' '{"reduction_tile_sizes": [7, 7, 4], "stages": 1}'
sweep resnet50-conv1 f32 '{}'
sweep resnet50-conv1 tf32 '{}'
