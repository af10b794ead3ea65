#!/usr/bin/env bash
# With the output staged: stages for ResNet-50's first layer and the 1x1 (GPU
# machine; log under $OUT).
source "$(dirname "$0")/sweep_common.sh"
sweep sweep-staged-more.log resnet50-conv1 f16 '{}' '{"stages": 1}' '{"stages": 3}'
sweep sweep-staged-more.log conv1x1-256-64 f16 '{}' '{"stages": 4}' '{"stages": 1}'
