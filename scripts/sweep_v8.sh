#!/usr/bin/env bash
# After the coalesced conv1 and the paired epilogue stores: taps unrolled (ptxas
# overlapping the next tap's fragment loads with this tap's MMAs), blocks of four
# warps over 256 pixels or 128 channels, and conv1's block tiles (GPU machine; log
# under $OUT).
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-v8.log conv3x3-64-relu f16 '{}' '{"unroll_taps": true}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 32, 128], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 2], "unroll_taps": true}'
sweep sweep-v8.log conv3x3-256-512 f16 '{}' '{"unroll_taps": true}' \
  '{"tile_sizes": [1, 7, 14, 128], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [2, 7, 14, 64], "warp_grid": [2, 2]}'
sweep sweep-v8.log conv3x3-128 f16 '{}' '{"unroll_taps": true}' \
  '{"tile_sizes": [1, 4, 28, 128], "warp_grid": [2, 2]}'
sweep sweep-v8.log conv1x1-256-64 f16 '{}' '{"stages": 2}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}'
sweep sweep-v8.log resnet50-conv1 f16 '{}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 56, 64], "warp_grid": [2, 2]}' \
  '{"warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 28, 32], "warp_grid": [2, 1]}'
