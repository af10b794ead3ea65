#!/usr/bin/env bash
# Stages against blocks per multiprocessor on the per-tap tensor-core route (GPU
# machine; log under $OUT): the sweep behind config_for's shared-memory budget.
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-stages.log conv1x1-256-64 f16 '{"stages": 2}' '{"stages": 3}' '{"stages": 4}'
sweep sweep-stages.log conv1x1-256-64 tf32 '{"reduction_tile_sizes": [1, 1, 32], "stages": 1}' \
  '{"reduction_tile_sizes": [1, 1, 32], "stages": 2}' '{"reduction_tile_sizes": [1, 1, 32], "stages": 3}'
sweep sweep-stages.log resnet50-conv1 tf32 '{"stages": 1}' '{"stages": 2}' '{"stages": 3}'
