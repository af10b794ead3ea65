#!/usr/bin/env bash
# ResNet-50 conv1 after the strided footprints (4 input rows a step, not 7): steps
# and stages again, in f16, f32 and tf32 (GPU machine; log under $OUT).
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-v11.log resnet50-conv1 f16 '{}' '{"stages": 3}' '{"reduction_tile_sizes": [7, 7, 4], "stages": 1}'
sweep sweep-v11.log resnet50-conv1 f32 '{}'
sweep sweep-v11.log resnet50-conv1 tf32 '{}'
