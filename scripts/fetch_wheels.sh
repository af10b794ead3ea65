#!/usr/bin/env bash
# Download the wheels the GPU machine lacks (it has Python 3.12, numba, numba-cuda,
# numpy, torch, but no xdsl and no network) into .whl/, which `run` carries there.
# scripts/gpu_python.sh installs them on that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
download() {
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$@"
}
# xdsl and its small dependencies (versions as pinned by xdsl 0.74.0).
download "xdsl==0.74.0" "immutabledict==4.3.1" "ordered-set==4.1.0"
# The tuner's progress bar (the GPU image may lack it).
download "tqdm==4.67.1"
ls -1 .whl
