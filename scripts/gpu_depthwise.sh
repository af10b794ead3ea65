#!/usr/bin/env bash
# Depthwise convolutions with their channels in vectors, timed on a GPU machine in one
# command: MobileNetV2's and EfficientNet-B0's depthwise layers at batch 1 and 32
# (`benchmarks/layer_sweep.py`), config_for's rule, the channels in vectors (a thread
# a 16-byte vector of channels by a row of pixels), against the rule before it (each
# thread's channels strided across the block, variant 'depthwise strided'), against
# the vectors' own blocks without the filling of small grids (variant 'depthwise
# unfilled') and cuDNN, in the
# same process; every kernel checked against float64 before it is timed. Log and JSON
# under $OUT (default /tmp/affinec-gpu); a table last: each layer's bandwidth floor
# (its bytes at 3.35 TB/s), cuDNN, before, unfilled and after, and each network's
# sums. Before the timing, compute-sanitizer's memcheck over the depthwise and SIMT
# routes whose stores became vectors (scripts/gpu_sanitize.py; a misaligned 16-byte
# access fails there), its exit status printed last.
#
#   scripts/gpu_depthwise.sh                 # about 4 minutes on one H100
#   BATCHES="32" scripts/gpu_depthwise.sh    # batch 32 only
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=scripts/gpu_python.sh
BATCHES=${BATCHES:-1 32}
JSON="$OUT/layer_sweep_depthwise_vectors.json"
# The vector accesses under compute-sanitizer's memcheck first (a misaligned 16-byte
# access is an error there): the depthwise and SIMT routes whose stores are vectors.
ROUTES="depthwise-f16 simt-f32 simt-f32-nhwc-bias-relu residual-simt"
# shellcheck disable=SC2086
$PY scripts/gpu_sanitize.py --compile "$OUT/depthwise_kernels.pkl" --route $ROUTES \
  > "$OUT/depthwise_memcheck.log" 2>&1
if command -v compute-sanitizer > /dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --target-processes all \
    --report-api-errors no --check-api-memory-access no --leak-check no \
    --error-exitcode 3 $PY scripts/gpu_sanitize.py --run "$OUT/depthwise_kernels.pkl" \
    >> "$OUT/depthwise_memcheck.log" 2>&1
  memcheck=$?
else
  memcheck="no compute-sanitizer"
fi
echo "memcheck over $ROUTES: exit $memcheck (log: $OUT/depthwise_memcheck.log)"
# shellcheck disable=SC2086
timeout "${LIMIT_S:-540}" $PY benchmarks/layer_sweep.py \
  --network mobilenet_v2 efficientnet_b0 --batch $BATCHES --layers depthwise \
  --variant config_for "depthwise strided" "depthwise unfilled" --json "$JSON" \
  2>&1 | tee "$OUT/layer_sweep_depthwise_vectors.log"
status=${PIPESTATUS[0]}
if [ ! -s "$JSON" ]; then
  echo "layer_sweep.py wrote no JSON (exit $status): see $OUT/layer_sweep_depthwise_vectors.log"
  exit 1
fi
$PY - "$JSON" <<'EOF'
import json, sys

from affinec.base.element_types import storage_bytes
from affinec.base.spec import parse_spec

BANDWIDTH = 3.35e12  # the H100 SXM's HBM3, bytes a second
data = json.load(open(sys.argv[1]))
print()
print(f"{'network':16s} {'batch':>5s} {'layer':26s} {'floor':>6s} {'cuDNN':>6s} "
      f"{'before':>7s} {'unfill':>6s} {'after':>6s} {'after/floor':>11s}   (us)")
for res in data["results"]:
    sums = {"floor": 0.0, "cudnn": 0.0, "before": 0.0, "unfilled": 0.0, "after": 0.0}
    for row in res["layers"]:
        spec = parse_spec(row["spec"])
        element = storage_bytes(spec.dtype)
        moved = element * (
            spec.n * spec.h * spec.w * spec.c
            + spec.n * spec.out_h * spec.out_w * spec.k
            + spec.r * spec.s * spec.k
        )
        floor = moved / BANDWIDTH * 1e3
        v = row["variants"]
        before = v.get("depthwise strided", {}).get("ms") or float("nan")
        unfilled = v.get("depthwise unfilled", {}).get("ms") or float("nan")
        after = v.get("config_for", {}).get("ms") or float("nan")
        n = row["count"]
        for key, ms in (("floor", floor), ("cudnn", row["cudnn_ms"]),
                        ("before", before), ("unfilled", unfilled), ("after", after)):
            sums[key] += n * ms
        print(f"{res['network']:16s} {res['batch']:5d} {row['layer']:26s} "
              f"{floor * 1e3:6.1f} {row['cudnn_ms'] * 1e3:6.1f} {before * 1e3:7.1f} "
              f"{unfilled * 1e3:6.1f} {after * 1e3:6.1f} {after / floor:11.2f}   x{n}")
    print(f"{res['network']:16s} {res['batch']:5d} {'sum (ms)':26s} "
          f"{sums['floor']:6.3f} {sums['cudnn']:6.3f} {sums['before']:7.3f} "
          f"{sums['unfilled']:6.3f} {sums['after']:6.3f} "
          f"{sums['after'] / sums['floor']:11.2f}")
print(f"{data['gpu']}, cuDNN {data['cudnn']}, torch {data['torch']}, {data['date']}")
EOF
echo "memcheck over $ROUTES: exit $memcheck"
exit "$status"
