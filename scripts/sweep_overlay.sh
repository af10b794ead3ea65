#!/usr/bin/env bash
# The staged output in the tiles' bytes (affinec.overlay): window steps in one stage
# or two again, the 1x1 in two to four (GPU machine; log under $OUT).
source "$(dirname "$0")/sweep_common.sh"
for conv in conv3x3-64-relu conv3x3-256-512 conv3x3-128; do
  sweep sweep-overlay.log "$conv" f16 '{}' '{"stages": 2}' '{"stages": 3}'
done
sweep sweep-overlay.log conv1x1-256-64 f16 '{}' '{"stages": 2}' '{"stages": 4}'
sweep sweep-overlay.log resnet50-conv1 f16 '{}'
