#!/usr/bin/env bash
# Window steps: one stage or two, the output staged or not (GPU machine; log under
# $OUT). Which of the two changes made the 3x3-64 faster.
source "$(dirname "$0")/sweep_common.sh"
for conv in conv3x3-64-relu conv3x3-256-512; do
  sweep sweep-staged-stages.log "$conv" f16 '{}' '{"stage_output": false}' \
    '{"stages": 2}' '{"stage_output": false, "stages": 2}'
done
