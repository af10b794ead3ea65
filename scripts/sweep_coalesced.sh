#!/usr/bin/env bash
# ResNet-50 conv1 on the tensor cores with its filter rows' columns x channels as
# the MMA's k (affinec-coalesce-reduction): reduction steps, stages, block tiles and
# warps (GPU machine; log under $OUT).
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-coalesced.log resnet50-conv1 f16 '{}' \
  '{"reduction_tile_sizes": [1, 7, 4], "stages": 2}' \
  '{"reduction_tile_sizes": [1, 7, 4], "stages": 3}' \
  '{"warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 8, 14, 64]}' \
  '{"tile_sizes": [1, 2, 56, 64]}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 56, 64], "warp_grid": [2, 2]}' \
  '{"tile_sizes": [1, 4, 28, 32], "warp_grid": [2, 1]}' \
  '{"tile_sizes": [1, 8, 28, 64], "warp_grid": [4, 1]}'
sweep sweep-coalesced.log resnet50-conv1 tf32 '{}' '{"reduction_tile_sizes": [1, 7, 4], "stages": 2}'
