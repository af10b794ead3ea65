#!/usr/bin/env bash
# The window route's warps and taps after the paired epilogue stores: four warps
# over twice the pixels, the taps unrolled (GPU machine; log under $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
PY=scripts/gpu_python.sh
sweep() { $PY benchmarks/sweep.py "$@" 2>&1 | tee -a "$OUT/sweep-v8b.log" | grep -E "^conv|^resnet|refused|rror" ; }
sweep conv3x3-256-512 f16 '{}' \
  '{"tile_sizes": [2, 7, 14, 64], "warp_grid": [2, 2], "unroll_taps": true}' \
  '{"tile_sizes": [1, 14, 14, 64], "warp_grid": [2, 2]}'
sweep conv3x3-128 f16 '{}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2], "unroll_taps": true}'
sweep conv3x3-64-relu f16 '{}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 2], "unroll_taps": true}'
