#!/usr/bin/env bash
# Stages and block tiles that dynamic shared memory allows, on the tensor-core route
# (GPU machine; logs under $OUT): the sweep behind config_for's shared-memory budget.
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-dynamic.log conv3x3-64-relu f16 '{}' '{"stages": 2}' '{"stages": 3}' \
  '{"tile_sizes": [1, 4, 32, 128], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 32, 128], "warp_grid": [2, 2], "stages": 2}' \
  '{"tile_sizes": [1, 8, 32, 64], "warp_grid": [2, 1], "stages": 2}'
sweep sweep-dynamic.log conv3x3-256-512 f16 '{}' '{"stages": 2}' '{"stages": 3}' \
  '{"tile_sizes": [1, 7, 14, 128], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 7, 14, 128], "warp_grid": [2, 2], "stages": 2}'
sweep sweep-dynamic.log conv3x3-128 f16 '{}' '{"stages": 2}' \
  '{"tile_sizes": [1, 4, 28, 128], "warp_grid": [2, 2], "stages": 2}'
sweep sweep-dynamic.log conv1x1-256-64 f16 '{}' '{"stages": 4}' \
  '{"reduction_tile_sizes": [1, 1, 64], "stages": 3}'
