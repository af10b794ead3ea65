#!/usr/bin/env bash
# The tensor cores' output staged through shared memory (16-byte stores a thread)
# against the paired 4-byte stores, on the five convolutions (GPU machine; log
# under $OUT).
source "$(dirname "$0")/sweep_common.sh"
for conv in resnet50-conv1 conv3x3-64-relu conv3x3-256-512 conv3x3-128 conv1x1-256-64; do
  sweep sweep-staged.log "$conv" f16 '{}' '{"stage_output": true}'
done
sweep sweep-staged.log conv1x1-256-64 f16 '{"stage_output": true, "stages": 2}'
sweep sweep-staged.log resnet50-conv1 tf32 '{}' '{"stage_output": true}'
