#!/usr/bin/env bash
# The runs that belong together on a GPU machine, in one command (device time is
# scarce): each step's log goes to $OUT/STEP.log, a one-line result per step to
# $OUT/summary.txt, which is printed last.
#
#   scripts/gpu_session.sh tests bench timing     # a subset of the steps, in order
#   scripts/gpu_session.sh all
#
# Every route proven in two runs of under 10 minutes each (16 cores, one H100):
#   scripts/gpu_session.sh sanitize_routes differential   # about 3 + 5 minutes
#   DYNAMIC_LAYERS=6 scripts/gpu_session.sh tests dynamic notebook  # about 6 + 2 + 1.5
# (each step's limit: TESTS_LIMIT_S, SANITIZE_LIMIT_S, DIFFERENTIAL_LIMIT_S, ...).
#
# Steps:
#   tests     make gpu-test: the GPU test matrix (pytest -m gpu)
#   bench     affinec bench: the five benchmark convolutions against cuDNN (JSON too)
#   tune      benchmarks/tune_all.py: the autotuner over the five convolutions, f16
#   timing    the harness against Nsight Compute's gpu__time_duration
#   profile   ncu sections (speed of light, occupancy, stalls) for our kernels
#   sanitize  compute-sanitizer memcheck and racecheck over a GPU test subset
#   sanitize_routes  one small kernel per route (scripts/gpu_sanitize.py) under
#             memcheck, racecheck and synccheck, each checked against float64: a
#             table of routes x tools and each tool's error count
#   differential  PAIRS (3000) random specs x the tuner's configurations against
#             float64 on sm_90a: every route and knob, a table by route
#   dynamic   ResNet-50's layers (DYNAMIC_LAYERS of them, 0: all) at batch 1, 8, 15
#             and 32: one kernel of any batch against the same configuration compiled
#             for each batch, and cuDNN
#   dynamic_models  the torch model converted with any_batch at 8, 12, 15
#   notebook  notebooks/05_pytorch.ipynb run as a script on the GPU, its figures
#             saved under $OUT
#   variants  ResNet-50 at batch 1 with Hopper's kernel and split-K variants: the
#             ones refused for a layer are named, never a crash
#   networks  ResNet-50, VGG-16 and MobileNetV2 convolutions at batch 1 and 32
#             against cuDNN
#   splits    ResNet-50 at batch 1 and 32 with split-K tried on every layer (2, 4, 8),
#             and the 1x1 layers as products of their flattened pixels
#   models    ResNet-50 and MobileNetV2 as torch models through affinec.torch.convert
#             against torch's own, time per forward pass; notebooks/05_pytorch.ipynb
#             run as a script (each convolution of ResNet-50 against cuDNN)
#   hopper    the TMA + mbarrier + wgmma kernels on sm_90a: the test bed
#             (affinec.tools.hopper_matmul) and the spec route (affinec-wgmma-gemm through
#             the runtime) checked against float64, HGMMA in the SASS, timed against
#             cuBLAS; compute-sanitizer memcheck and racecheck on the smallest of
#             each; the five benchmark convolutions and ResNet-50 and VGG-16 on
#             the route against cuDNN; ncu on
#             the five benchmark convolutions' wgmma kernels
#   strided   ResNet-50's strided 3x3s with the input tile stored by phase
#             (KernelConfig.split_phases) and one filter row a step, against
#             config_for and cuDNN (benchmarks/layer_sweep.py)
#   tune_networks  ResNet-50 and MobileNetV2 at batch 1 and 32 tuned whole for sm_90a
#             (`affinec tune network`, TUNE_BUDGET_S: 255 s, within TUNE_LIMIT_S: 300),
#             then timed from the cache; the tuner's summary last
#   halved_block  ResNet-50's and VGG-16's 3x3s at batch 1 and 32 with the window
#             route's block halved in two stages (the tuner's neighbour; config_for
#             takes it only once timed on shapes it was not fitted on)
#   wgmma_pipeline  affinec-wgmma, Hopper's MMA as the pipeline's tensor-core pass:
#             products and ResNet-50's 1x1s checked against float64, then timed
#             against the template route, mma.sync and cuBLAS/cuDNN
#   wgmma_taps  affinec-wgmma with A from registers (convolutions with taps and
#             strides): ResNet-50's and VGG-16's 3x3s at batch 32 checked against
#             float64, then timed against mma.sync, the template route and cuDNN
#   depthwise  scripts/gpu_depthwise.sh: memcheck over the routes whose stores are
#             vectors, then MobileNetV2's and EfficientNet-B0's depthwise layers on
#             config_for's rule (channels in vectors) against the rule before it
#             (channels strided across the block) and cuDNN
#   wgmma_rule  config_for's sm_90a rules (products and wide 1x1s on affinec-wgmma,
#             wide 3x3s on Hopper's kernel):
#             ResNet-50 at batch 32 (the fit), 16 and 8 (unseen) compiled for sm_90
#             (no rule) and sm_90a (the rule), same run, cuDNN alongside
#   ss_rule   the descriptor route's rule for 3x3s (sweep variant "ss",
#             ss_config_for: fitted on ResNet-50's and VGG-16's 3x3s at batch 32)
#             against config_for over the whole of both networks at batch 8, 16
#             (unseen) and 32, every kernel checked against float64, cuDNN alongside
#   batch1_tiles  one warpgroup's 64 x 64 tiles at batch 1, where config_for's blocks
#             leave most of the chip idle: Hopper's template kernel ("hopper 64x64",
#             the tuner's pick for most of ResNet-50's and MobileNetV2's wide layers)
#             against the pipeline's ("tma 64x64" products, "ss 64x64" 3x3s by
#             descriptor) and config_for, ResNet-50 and MobileNetV2 (the tuner's
#             shapes) and VGG-16 and EfficientNet-B0 (not seen), cuDNN alongside
#   product_tiles  128 x 256 product tiles (4 stages, and 3 with a producer
#             warpgroup: the fastest 4096-wide products, 2026-12-07) against
#             config_for's 128 x 128 on the 1x1s of ResNet-50 (the fit), MobileNetV2
#             and EfficientNet-B0 at batch 16 and 32, and on products neither 4096-wide
#             product is (scripts/gpu_warp_specialize.py --products), cuBLAS and cuDNN
#             alongside
#   wide_products  config_for's 128 x 256 warp-specialized product tile on products
#             its rule was not fitted on, beside the old rule's 128 x 128 kernel and
#             cuBLAS; the two ResNet-50 layers it takes at batch 32 on it and on the
#             old tile; ResNet-50 whole at batch 16 and 32 with the rule in place
#   codegen   affinec bench in f16 twice, LLVM's code generation as it is and with
#             AFFINEC_FAST_CODEGEN=1 (no straight-line strength reduction: a third of
#             the compile time): whether the kernels lose anything by it
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=scripts/gpu_python.sh
$PY -c "import affinec.dialects" || exit 1  # installs what the machine lacks, once

run() {  # run NAME SECONDS COMMAND...: log, exit code and seconds in the summary
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local code=$?
  echo "$name: exit $code in $((SECONDS - start)) s" >>"$OUT/summary.txt"
  return $code
}

step_tests() {  # the GPU tests in TEST_SHARDS (8) at once: compiling is most of their time
  run tests "${TESTS_LIMIT_S:-420}" $PY scripts/pytest_shards.py "${TEST_SHARDS:-8}" tests -- -q -m gpu -p no:cacheprovider
  tail -12 "$OUT/tests.log"
}

step_bench() {
  run bench 420 $PY benchmarks/conv.py --dtype f16 f32 tf32 --json "$OUT/bench.json"
  tail -16 "$OUT/bench.log"
}

step_tune() {  # the autotuner over the five convolutions in f16 (plots drawn later)
  run tune 540 $PY benchmarks/tune_all.py --out "$OUT/tuning" --dtype f16 \
    --budget-s "${TUNE_BUDGET_S:-300}"
  tail -14 "$OUT/tune.log"
}

step_timing() {
  run timing-measure 200 $PY benchmarks/timing_check.py measure "$OUT/timing.json"
  run timing-ncu 200 ncu --csv --print-units base --metrics gpu__time_duration.sum \
    --clock-control none --cache-control none \
    --nvtx --nvtx-include 'timed/' --log-file "$OUT/timing-ncu.csv" \
    python3 benchmarks/timing_check.py launch
  run timing-compare 30 $PY benchmarks/timing_check.py compare "$OUT/timing.json" \
    "$OUT/timing-ncu.csv"
  cat "$OUT/timing-compare.log"
}

# What the warps wait on, in % of active warps' cycles (ncu's warp-state sampling).
STALLS=$(printf 'smsp__warp_issue_stalled_%s_per_warp_active.pct,' barrier \
  long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
  lg_throttle dispatch_stall no_instruction selected)
STALLS=${STALLS%,}

step_profile() {
  run profile 300 ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,$STALLS \
    -k regex:^conv_kernel \
    python3 benchmarks/profile_kernels.py --dtype ${PROFILE_DTYPES:-f32 f16}
  grep -E "^(resnet|conv)|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Thr|Memory Thr|L2 Cache Thr|Executed Ipc A|hmma|pipe_fma|stalled|Block Limit Reg|Block Limit Sh" \
    "$OUT/profile.log" | head -150
}

step_sanitize() {
  # SIMT, tensor-core (per-tap and window steps, pipelined copies, coalesced k) and
  # tf32 kernels.
  local subset="((spec_matrix or tensor_core_route or filter_window or tf32) and (pad1 or everything or 1x1)) or coalesced"
  run memcheck 300 compute-sanitizer --tool memcheck --target-processes all \
    --error-exitcode 3 python3 -m pytest -q -m gpu tests/test_gpu.py -k "$subset" \
    -p no:cacheprovider
  run racecheck 300 compute-sanitizer --tool racecheck --target-processes all \
    --error-exitcode 3 python3 -m pytest -q -m gpu tests/test_gpu.py -k "$subset" \
    -p no:cacheprovider
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/memcheck.log" \
    "$OUT/racecheck.log"
}

step_sanitize_routes() {
  # One small kernel per route (scripts/gpu_sanitize.py --list), compiled once, then
  # launched and checked against float64 under each tool in one process. API-probe
  # noise (numba's and torch's failed queries of pointers) is excluded by flag.
  run sanitize-compile 120 $PY scripts/gpu_sanitize.py --compile "$OUT/sanitize_kernels.pkl"
  tail -2 "$OUT/sanitize-compile.log"
  local tool
  for tool in memcheck racecheck synccheck; do  # side by side: each mostly waits
    local extra=()
    [ "$tool" = memcheck ] && extra=(--check-api-memory-access no --leak-check no)
    [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
    run "sanitize-$tool" "${SANITIZE_LIMIT_S:-150}" compute-sanitizer --tool "$tool" \
      --target-processes all --report-api-errors no --error-exitcode 3 "${extra[@]}" \
      python3 scripts/gpu_sanitize.py --run "$OUT/sanitize_kernels.pkl" &
  done
  wait
  python3 - "$OUT" <<'PY'
import re, sys
out = sys.argv[1]
tools = ["memcheck", "racecheck", "synccheck"]
table, totals = {}, {}
for tool in tools:
    try:
        text = open(f"{out}/sanitize-{tool}.log").read()
    except OSError:
        text = ""
    # a kernel's reports come before its route's line (the check synchronizes)
    found = 0
    for line in text.splitlines():
        route = re.match(r"route ([^\s:]+)[^:]*: (.*)$", line)
        if route:
            verdict = "ok" if "(ok:" in route.group(2) else "WRONG"
            table.setdefault(route.group(1), {})[tool] = f"{verdict} {found}"
            found = 0
        elif re.match(r"========= \S", line) and not re.search(
            r"SUMMARY|COMPUTE-SANITIZER|^========= +at |Saved host backtrace", line
        ):
            found += 1
    summary = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:error|hazard)", text)
    totals[tool] = summary[-1] if summary else "no summary"
print("each cell: the check against float64, then the sanitizer's reports")
print(f"{'route':40s}" + "".join(f"{t:>11s}" for t in tools))
for name, row in table.items():
    print(f"{name:40s}" + "".join(f"{row.get(t, '-'):>11s}" for t in tools))
print(f"{'sanitizer errors / hazards':40s}" + "".join(f"{totals[t]:>11s}" for t in tools))
PY
}

step_differential() {  # PAIRS random pairs (3000 by default) over every route, sm_90a
  run differential "${DIFFERENTIAL_LIMIT_S:-540}" $PY scripts/gpu_differential.py \
    --pairs "${PAIRS:-3000}" --seed "${SEED:-1}" --json "$OUT/differential.json"
  grep -E "^(wrong|failed):" "$OUT/differential.log" | head -20
  tail -24 "$OUT/differential.log"
}

step_networks() {
  run networks 900 $PY benchmarks/networks.py --network resnet50 vgg16 mobilenet_v2 \
    --batch 1 32 --json "$OUT/networks.json" --plot "$OUT/networks.png"
  tail -9 "$OUT/networks.log"
}

step_splits() {
  run splits 900 $PY benchmarks/networks.py --network resnet50 --batch 1 32 \
    --splits 2 4 8 --flatten --json "$OUT/splits.json"
  tail -5 "$OUT/splits.log"
}

step_models() {
  run models 900 $PY benchmarks/torch_models.py --batch 1 32 \
    --json "$OUT/torch_models.json"
  tail -6 "$OUT/models.log"
  # the notebook's GPU path: every convolution checked and timed against cuDNN
  MPLBACKEND=Agg run notebook-05 900 $PY scripts/run_notebook.py \
    notebooks/05_pytorch.ipynb
  tail -4 "$OUT/notebook-05.log"
}

step_hopper() {
  run hopper 600 $PY scripts/gpu_hopper.py --json "$OUT/hopper.json"
  tail -6 "$OUT/hopper.log"
  for tool in memcheck racecheck; do
    run "hopper-$tool" 600 compute-sanitizer --tool "$tool" $PY scripts/gpu_hopper.py \
      --reps 1 --only 0 --spec-only 0
    tail -3 "$OUT/hopper-$tool.log"
  done
  run hopper-bench 600 $PY -m affinec bench --dtype f16 bf16 --wgmma \
    --json "$OUT/hopper_bench.json"
  tail -9 "$OUT/hopper-bench.log"
  run hopper-networks 1500 $PY benchmarks/networks.py --network resnet50 vgg16 \
    --batch 1 32 --wgmma --splits 2 4 --json "$OUT/hopper_networks.json"
  tail -5 "$OUT/hopper-networks.log"
  run hopper-profile 300 ncu --clock-control none --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    -k regex:conv_kernel $PY benchmarks/profile_kernels.py --dtype f16 bf16 --wgmma
  grep -E "wgmma|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Thr|Memory Thr|L2 Cache Thr|Block Limit Sh" \
    "$OUT/hopper-profile.log" | head -80
}

step_dynamic() {  # DYNAMIC_LAYERS: ResNet-50's first N distinct layers (0: all)
  run dynamic "${DYNAMIC_LIMIT_S:-600}" $PY benchmarks/dynamic_batch.py --network resnet50 \
    --batch 1 8 15 32 --layers "${DYNAMIC_LAYERS:-0}" --json "$OUT/dynamic_batch.json"
  grep -E "^WRONG|kernels right|geomean" "$OUT/dynamic.log"
  tail -"$((4 * ${DYNAMIC_LAYERS:-20} + 2))" "$OUT/dynamic.log" | head -60
}

step_dynamic_models() {  # the torch model of any batch at 8, 12, 15: one compile
  run dynamic-models 600 $PY benchmarks/torch_models.py --model resnet50 \
    --batch 8 12 15 --any-batch --json "$OUT/torch_models_any_batch.json"
  tail -4 "$OUT/dynamic-models.log"
}

step_notebook() {  # notebooks/05_pytorch.ipynb as a script; its figures saved to $OUT
  MPLBACKEND=Agg run notebook-05 "${NOTEBOOK_LIMIT_S:-300}" $PY -c '
import sys
sys.path.insert(0, "scripts")
from run_notebook import main
main("notebooks/05_pytorch.ipynb")
import matplotlib.pyplot as plt
for n in plt.get_fignums():
    plt.figure(n).savefig(f"{sys.argv[1]}/notebook05_figure{n}.png", dpi=120)
    print(f"saved {sys.argv[1]}/notebook05_figure{n}.png")
' "$(realpath "$OUT")"
  tail -8 "$OUT/notebook-05.log"
}

step_variants() {  # a variant refused for a layer is skipped and named, never a crash
  run variants "${VARIANTS_LIMIT_S:-420}" $PY benchmarks/networks.py --network resnet50 \
    --batch 1 --wgmma --splits 2 --json "$OUT/variants.json"
  grep -E "skipped on|Traceback|Error" "$OUT/variants.log" | head -10
  tail -4 "$OUT/variants.log"
}

step_strided() {  # the strided 3x3s' input tile stored by phase (split_phases), same run
  run strided "${STRIDED_LIMIT_S:-300}" $PY benchmarks/layer_sweep.py --network resnet50 \
    --batch 32 1 --layers 3x3/2 "3x3 128" \
    --variant config_for phases "row steps" "row steps phases" --json "$OUT/strided.json"
  tail -12 "$OUT/strided.log"
}

step_tune_networks() {  # both models tuned whole in one pipeline (<= 5 min), then timed from the cache
  # TUNE_BUDGET_S bounds the tuner's wall time; the rest of the 300 s is starting up
  # and the finalists of the shapes screened when the budget runs out
  AFFINEC_TUNING_CACHE="$OUT/tuning.json" run tune-networks "${TUNE_LIMIT_S:-300}" \
    $PY -m affinec tune network resnet50 mobilenet_v2 --batch 1 32 --arch sm_90a \
    --network-budget-s "${TUNE_BUDGET_S:-255}" --max-candidates 10 --top 1 --explore 0 \
    --finalists 2 --no-progress --log-dir "$OUT/tune_logs"
  AFFINEC_TUNING_CACHE="$OUT/tuning.json" run networks-tuned 300 $PY benchmarks/networks.py \
    --network resnet50 mobilenet_v2 --batch 1 32 --arch sm_90a --tuned \
    --json "$OUT/networks_tuned.json"
  tail -6 "$OUT/networks-tuned.log"
  sed -n '/^network  *batch shapes/,$p' "$OUT/tune-networks.log" | head -24
}

step_ss_rule() {  # the descriptor route's rule against config_for, whole networks
  run ss-rule "${SS_RULE_LIMIT_S:-420}" $PY benchmarks/layer_sweep.py \
    --network resnet50 vgg16 --batch 8 16 32 --arch sm_90a \
    --variant config_for ss --json "$OUT/ss_rule.json"
  tail -12 "$OUT/ss-rule.log"
}

step_halved_block() {  # the window route's block halved on every 3x3 of two networks
  run halved-block 300 $PY benchmarks/layer_sweep.py --network resnet50 vgg16 \
    --batch 1 32 --layers 3x3 --variant config_for "half block s2" "half block s2 phases" \
    --json "$OUT/halved_block.json"
  tail -12 "$OUT/halved-block.log"
}

step_wgmma_pipeline() {  # affinec-wgmma (the pipeline's pass) against the template, mma.sync, cuBLAS
  run wgmma-pipeline 540 $PY scripts/gpu_wgmma_pipeline.py --out "$OUT"
  tail -25 "$OUT/wgmma-pipeline.log"
}

step_wgmma_taps() {  # the pass route's wgmma on 3x3s (A from registers) against mma.sync, the template, cuDNN
  run wgmma-taps "${TAPS_LIMIT_S:-180}" $PY scripts/gpu_wgmma_taps.py --out "$OUT"
  tail -30 "$OUT/wgmma-taps.log"
}

step_depthwise() {
  OUT="$OUT" run depthwise "${DEPTHWISE_LIMIT_S:-420}" bash scripts/gpu_depthwise.sh
  tail -14 "$OUT/depthwise.log"
}

step_wgmma_rule() {  # before (sm_90: the rule does not apply) and after (sm_90a)
  local arch
  for arch in sm_90 sm_90a; do
    run "wgmma-rule-$arch" 240 $PY benchmarks/networks.py --network resnet50 \
      --batch 32 16 8 --arch "$arch" --json "$OUT/wgmma_rule_$arch.json"
  done
  grep -hE "^resnet50 +[0-9]+ +[0-9.]+ " "$OUT/wgmma-rule-sm_90.log" \
    "$OUT/wgmma-rule-sm_90a.log"
}

step_batch1_tiles() {  # 64 x 64 tiles at batch 1: the template's against the pipeline's
  run batch1-tiles "${BATCH1_TILES_LIMIT_S:-420}" $PY benchmarks/layer_sweep.py \
    --network resnet50 mobilenet_v2 vgg16 efficientnet_b0 --batch 1 --arch sm_90a \
    --variant config_for "hopper 64x64" "tma 64x64" "ss 64x64" \
    --json "$OUT/batch1_tiles.json"
  tail -14 "$OUT/batch1-tiles.log"
}

step_product_tiles() {  # 128 x 256 product tiles against config_for's, 1x1s and products
  run product-tiles "${PRODUCT_TILES_LIMIT_S:-360}" $PY benchmarks/layer_sweep.py \
    --network resnet50 mobilenet_v2 efficientnet_b0 --batch 16 32 --layers 1x1 \
    --arch sm_90a --variant config_for "tma 128x256" "tma 128x256 s3 ws" \
    --json "$OUT/product_tiles.json"
  tail -14 "$OUT/product-tiles.log"
  run product-shapes "${PRODUCT_SHAPES_LIMIT_S:-240}" $PY scripts/gpu_warp_specialize.py --out "$OUT" \
    --products 2048x2048x2048 8192x8192x1024 4096x2048x4096 8192x4096x512
  tail -12 "$OUT/product-shapes.log"
}

step_wide_products() {  # the wide-tile rule on unseen products, and a whole network
  run wide-products 200 $PY scripts/gpu_warp_specialize.py --out "$OUT" \
    --products 4096x4096x4096 4096x4096x1024 3072x3072x3072 6144x6144x2048
  tail -8 "$OUT/wide-products.log"
  # the layers the rule takes, on it (config_for) and on the old rule's 128 x 128 tile
  run wide-layers 120 $PY benchmarks/layer_sweep.py --network resnet50 --batch 32 \
    --layers "1x1 1024-512" "1x1 512-2048" --arch sm_90a \
    --variant config_for "tma 128x128" --json "$OUT/wide_layers.json"
  tail -6 "$OUT/wide-layers.log"
  run wide-network 240 $PY benchmarks/networks.py --network resnet50 --batch 16 32 \
    --arch sm_90a --json "$OUT/wide_network.json"
  tail -6 "$OUT/wide-network.log"
}

step_codegen() {
  run codegen-default 420 $PY benchmarks/conv.py --dtype f16 \
    --json "$OUT/codegen_default.json"
  AFFINEC_FAST_CODEGEN=1 run codegen-fast 420 $PY benchmarks/conv.py --dtype f16 \
    --json "$OUT/codegen_fast.json"
  tail -9 "$OUT/codegen-default.log" "$OUT/codegen-fast.log"
}

steps=("$@")
[ "${steps[0]:-all}" = all ] && steps=(tests bench timing profile sanitize)
: >"$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  >>"$OUT/summary.txt" 2>&1
for s in "${steps[@]}"; do
  echo "== $s"
  "step_$s"
done
echo "== summary"
cat "$OUT/summary.txt"
