#!/usr/bin/env bash
# Whether a cheaper LLVM code generation costs the kernels anything, in one command
# on a GPU machine: the five benchmark convolutions in f16 (`benchmarks/conv.py`,
# against cuDNN) and ResNet-50's layers at batch 1 and 32 (`benchmarks/networks.py`)
# compiled and timed under each variant of NVPTX's code generation, and the compile
# time of the five f16 kernels under each (`benchmarks/compile.py`, on the machine's
# CPU). Logs and JSON under $OUT (default /tmp/affinec-gpu); a table last: each
# kernel's and each network's time under every variant, as a ratio to the default.
#
#   scripts/gpu_codegen_check.sh                          # at most BUDGET_S (560 s)
#   VARIANTS="default lean" scripts/gpu_codegen_check.sh  # fewer variants
#   NETWORK_BATCHES="32" scripts/gpu_codegen_check.sh     # ResNet-50 at batch 32 only
#
# The runs go by step (the five convolutions under every variant, then ResNet-50,
# then the compile times), each within what is left of BUDGET_S (a run past it is
# stopped, later ones skipped and named so in the summary); LIMIT_S (420) caps one.
#
# Variants (environment of the runs):
#   default    LLVM as it is: -O3, NVPTX's code generation at level 3
#   lean       AFFINEC_LEAN_CODEGEN=1: code generation at level 2 (EarlyCSE in
#              place of GVN in NVPTX's IR passes)
#   fast       AFFINEC_FAST_CODEGEN=1: no straight-line strength reduction
#   fast+lean  both
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/affinec-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=scripts/gpu_python.sh
$PY -c "import affinec.dialects" || exit 1 # installs what the machine lacks, once
VARIANTS=${VARIANTS:-default lean fast+lean}
NETWORK_BATCHES=${NETWORK_BATCHES:-1 32}
LIMIT_S=${LIMIT_S:-420}

environment() { # the variables a variant sets, as env(1) arguments
  case $1 in
  default) echo "AFFINEC_LEAN_CODEGEN=0 AFFINEC_FAST_CODEGEN=0" ;;
  lean) echo "AFFINEC_LEAN_CODEGEN=1 AFFINEC_FAST_CODEGEN=0" ;;
  fast) echo "AFFINEC_LEAN_CODEGEN=0 AFFINEC_FAST_CODEGEN=1" ;;
  fast+lean) echo "AFFINEC_LEAN_CODEGEN=1 AFFINEC_FAST_CODEGEN=1" ;;
  *)
    echo "unknown variant '$1' (default, lean, fast, fast+lean)" >&2
    return 1
    ;;
  esac
}

for v in $VARIANTS; do # a misspelt variant fails before any GPU time is spent
  environment "$v" >/dev/null || exit 2
done
: >"$OUT/codegen_summary.txt"
BUDGET_S=${BUDGET_S:-560}
started=$SECONDS
job() { # job VARIANT STEP: one run, within what is left of BUDGET_S
  local v=$1 step=$2 vars tag left limit cmd
  vars=$(environment "$v") || exit 2
  tag=${v/+/_}
  left=$((BUDGET_S - (SECONDS - started)))
  if [ "$left" -lt 40 ]; then
    echo "$v $step: skipped (BUDGET_S spent)" >>"$OUT/codegen_summary.txt"
    return
  fi
  limit=$((left - 10 < LIMIT_S ? left - 10 : LIMIT_S))
  case $step in
  conv) cmd=(benchmarks/conv.py --dtype f16 --json "$OUT/codegen_${tag}_conv.json") ;;
  networks)
    # shellcheck disable=SC2206 # the batches are words on purpose
    cmd=(benchmarks/networks.py --network resnet50 --batch $NETWORK_BATCHES
      --json "$OUT/codegen_${tag}_networks.json")
    ;;
  compile) cmd=(benchmarks/compile.py --repeat 3 --json "$OUT/codegen_${tag}_compile.json") ;;
  esac
  local start=$SECONDS
  # shellcheck disable=SC2086 # $vars holds several NAME=VALUE words
  env $vars timeout "$limit" $PY "${cmd[@]}" >"$OUT/codegen_${tag}_$step.log" 2>&1
  echo "$v $step: exit $? in $((SECONDS - start)) s" >>"$OUT/codegen_summary.txt"
}

# The most telling first: what the GPU needs, then the CPU's compile times.
for step in conv networks compile; do
  for v in $VARIANTS; do
    job "$v" "$step"
  done
done

cat "$OUT/codegen_summary.txt"
$PY - "$OUT" $VARIANTS <<'EOF'
import json
import sys
from pathlib import Path

out, variants = Path(sys.argv[1]), sys.argv[2:]


def load(variant: str, step: str) -> dict | None:
    path = out / f"codegen_{variant.replace('+', '_')}_{step}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def ratio(value: float | None, base: float | None) -> str:
    if value is None:
        return "wrong/none"
    if base in (None, 0):
        return f"{value:.4g}"
    return f"{value:.4g} {value / base:.2f}x"


rows: dict[str, dict[str, float | None]] = {}
for v in variants:
    conv = load(v, "conv")
    for r in (conv or {}).get("rows", []):
        rows.setdefault(f"conv {r['name']}", {})[v] = r["ours_ms"]
    networks = load(v, "networks")
    for res in (networks or {}).get("results", []):
        label = f"{res['network']} batch {res['batch']} (sum)"
        rows.setdefault(label, {})[v] = res.get("ours_ms")
    compiled = load(v, "compile")
    if compiled:
        kernels = [
            r["total_s_median"] * 1000
            for label, r in compiled["results"].items()
            if "config_for" in label
        ]
        kernels.sort()
        median = kernels[len(kernels) // 2] if kernels else None
        rows.setdefault("compile median of the five f16 (ms, CPU)", {})[v] = median
print(f"\n{'ms (ratio to the first variant)':<44}" + "".join(f"{v:>18}" for v in variants))
for label, by_variant in rows.items():
    base = by_variant.get(variants[0])
    cells = "".join(f"{ratio(by_variant.get(v), base):>18}" for v in variants)
    print(f"{label:<44}{cells}")
print("(a ratio above 1.00x: slower than the first variant; 'wrong/none': the run "
      "failed or a result was wrong, see the logs)")
EOF
