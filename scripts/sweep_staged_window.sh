#!/usr/bin/env bash
# Window steps with the output staged: the tuner's pick for the 3x3-64 (four warps
# along the channels, one stage) on the three 3x3 convolutions (GPU machine; log
# under $OUT).
source "$(dirname "$0")/sweep_common.sh"
for conv in conv3x3-64-relu conv3x3-256-512 conv3x3-128; do
  sweep sweep-staged-window.log "$conv" f16 '{}' \
    '{"warp_grid": [1, 4], "stage_output": true, "stages": 1}' \
    '{"warp_grid": [1, 4], "stage_output": true}' \
    '{"warp_grid": [1, 4], "stage_output": false, "stages": 1}' \
    '{"stage_output": true, "stages": 1}'
done
