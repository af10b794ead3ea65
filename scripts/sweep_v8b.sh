#!/usr/bin/env bash
# The window route's warps and taps after the paired epilogue stores: four warps
# over twice the pixels, the taps unrolled (GPU machine; log under $OUT).
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-v8b.log conv3x3-256-512 f16 '{}' \
  '{"tile_sizes": [2, 7, 14, 64], "warp_grid": [2, 2], "unroll_taps": true}' \
  '{"tile_sizes": [1, 14, 14, 64], "warp_grid": [2, 2]}'
sweep sweep-v8b.log conv3x3-128 f16 '{}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2], "unroll_taps": true}'
sweep sweep-v8b.log conv3x3-64-relu f16 '{}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 2], "unroll_taps": true}'
