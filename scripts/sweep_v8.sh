#!/usr/bin/env bash
# After the coalesced conv1 and the paired epilogue stores: taps unrolled (ptxas
# overlapping the next tap's fragment loads with this tap's MMAs), blocks of four
# warps over 256 pixels or 128 channels, and conv1's block tiles (GPU machine; log
# under $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
PY=scripts/gpu_python.sh
sweep() { $PY benchmarks/sweep.py "$@" 2>&1 | tee -a "$OUT/sweep-v8.log" | grep -E "^conv|^resnet|refused|rror" ; }
sweep conv3x3-64-relu f16 '{}' '{"unroll_taps": true}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 32, 128], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 2], "unroll_taps": true}'
sweep conv3x3-256-512 f16 '{}' '{"unroll_taps": true}' \
  '{"tile_sizes": [1, 7, 14, 128], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [2, 7, 14, 64], "warp_grid": [2, 2]}'
sweep conv3x3-128 f16 '{}' '{"unroll_taps": true}' \
  '{"tile_sizes": [1, 4, 28, 128], "warp_grid": [2, 2]}'
sweep conv1x1-256-64 f16 '{}' '{"stages": 2}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}'
sweep resnet50-conv1 f16 '{}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 56, 64], "warp_grid": [2, 2]}' \
  '{"warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 28, 32], "warp_grid": [2, 1]}'
