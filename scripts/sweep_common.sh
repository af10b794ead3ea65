# Sourced by the sweep scripts (GPU machine): run from the repository root, logs
# under $OUT, and `sweep LOG CONV DTYPE '{knobs}'...` appending benchmarks/sweep.py's
# table to $OUT/LOG and printing its result lines.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
PY=${PY:-scripts/gpu_python.sh}
sweep() {
  local log=$1
  shift
  $PY benchmarks/sweep.py "$@" 2>&1 | tee -a "$OUT/$log" | grep -E "^conv|^resnet|refused|rror"
}
