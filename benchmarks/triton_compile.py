"""How long Triton takes to compile comparable kernels on the same machine: the yardstick
for `benchmarks/compile.py`, since a 2-core development machine of this project has
compiled the same code three times faster than another.

    python -m venv /tmp/triton && /tmp/triton/bin/pip install triton numpy
    /tmp/triton/bin/python benchmarks/triton_compile.py [--repeat 5] [--json PATH]

Triton is not a dependency of affinec (this script imports nothing of affinec), and
no GPU is needed: `triton.compile` is given its target. Two kernels written here in
Triton's language, each for sm_80 (mma.sync) and sm_90 (wgmma), warm (Triton's
cache off):

- a matrix product of f16 in f32 accumulators, 128 x 128 tiles, K in steps of 32;
- an implicit-GEMM convolution, NHWC input and RSCK filters of f16, 3x3 with
  padding 1 (the shape of `benchmarks/compile.py`'s 3x3 64 -> 64 convolution), a
  block's 128 output pixels x 64 channels, the taps and 64-channel steps as loops.

Every stage of Triton's pipeline is timed (Triton IR, TritonGPU IR, LLVM IR, PTX,
ptxas's cubin): `to PTX` is what `benchmarks/compile.py` measures of affinec (a
spec to PTX), `total` adds ptxas. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # before Triton reads its settings
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

from machine import machine

try:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
except ImportError as e:  # not affinec's dependency: say how to get it
    raise SystemExit(
        f"this benchmark needs Triton ({e}); run it with a Python that has it, "
        "e.g. `pip install triton` in a virtual environment of its own"
    ) from None


@triton.jit
def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    blocks_n = tl.cdiv(N, BN)
    rows = (pid // blocks_n) * BM + tl.arange(0, BM)
    cols = (pid % blocks_n) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + ks
        x = tl.load(
            a + rows[:, None] * K + kk[None, :],
            mask=(rows[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        y = tl.load(
            b + kk[:, None] * N + cols[None, :],
            mask=(kk[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, y)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c + rows[:, None] * N + cols[None, :], acc.to(tl.float16), mask=mask)


@triton.jit
def conv3x3(
    x, w, y, N, H, W, C, K, BP: tl.constexpr, BK: tl.constexpr, BC: tl.constexpr
):
    """NHWC input, RSCK filters, padding 1, stride 1: rows are output pixels."""
    pid = tl.program_id(0)
    blocks_k = tl.cdiv(K, BK)
    pixels = (pid // blocks_k) * BP + tl.arange(0, BP)
    channels = (pid % blocks_k) * BK + tl.arange(0, BK)
    n = pixels // (H * W)
    p = (pixels // W) % H
    q = pixels % W
    cs = tl.arange(0, BC)
    acc = tl.zeros((BP, BK), dtype=tl.float32)
    for r in range(3):
        for s in range(3):
            h = p + r - 1
            v = q + s - 1
            inside = (pixels < N * H * W) & (h >= 0) & (h < H) & (v >= 0) & (v < W)
            base = ((n * H + h) * W + v) * C
            for c0 in range(0, C, BC):
                a = tl.load(
                    x + base[:, None] + (c0 + cs)[None, :],
                    mask=inside[:, None] & ((c0 + cs)[None, :] < C),
                    other=0.0,
                )
                b = tl.load(
                    w + ((r * 3 + s) * C + c0 + cs)[:, None] * K + channels[None, :],
                    mask=((c0 + cs)[:, None] < C) & (channels[None, :] < K),
                    other=0.0,
                )
                acc += tl.dot(a, b)
    mask = (pixels[:, None] < N * H * W) & (channels[None, :] < K)
    tl.store(y + pixels[:, None] * K + channels[None, :], acc.to(tl.float16), mask=mask)


KERNELS = {
    "matmul f16, 128x128x32 tiles": (
        matmul,
        {"a": "*fp16", "b": "*fp16", "c": "*fp16", "M": "i32", "N": "i32", "K": "i32"},
        {"BM": 128, "BN": 128, "BK": 32},
    ),
    "conv 3x3 f16 NHWC/RSCK, 128 pixels x 64 channels": (
        conv3x3,
        {
            "x": "*fp16",
            "w": "*fp16",
            "y": "*fp16",
            **{name: "i32" for name in ("N", "H", "W", "C", "K")},
        },
        {"BP": 128, "BK": 64, "BC": 64},
    ),
}
STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")

_seconds: dict[str, float] = {}
_add_stages = CUDABackend.add_stages


def _timed_stages(self, stages, options, language):
    """Triton's stages, each timed into `_seconds`."""
    _add_stages(self, stages, options, language)
    for name, stage in list(stages.items()):

        def timed(src, metadata, stage=stage, name=name):
            start = time.perf_counter()
            try:
                return stage(src, metadata)
            finally:
                _seconds[name] = _seconds.get(name, 0.0) + time.perf_counter() - start

        stages[name] = timed


CUDABackend.add_stages = _timed_stages


def compile_once(kernel: str, capability: int) -> dict[str, float]:
    fn, signature, constants = KERNELS[kernel]
    signature = {**signature, **{name: "constexpr" for name in constants}}
    source = ASTSource(fn=fn, signature=signature, constexprs=constants)
    _seconds.clear()
    start = time.perf_counter()
    compiled = triton.compile(
        source,
        target=GPUTarget("cuda", capability, 32),
        options={"num_warps": 4, "num_stages": 3},
    )
    total = time.perf_counter() - start
    ptx = compiled.asm["ptx"]
    mma = "wgmma" if "wgmma.mma_async" in ptx else "mma.sync"
    return {
        "total": total,
        "to PTX": total - _seconds.get("cubin", 0.0),
        **{name: _seconds.get(name, 0.0) for name in STAGES},
        "mma": mma,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default="benchmarks/results/triton_compile.json")
    args = parser.parse_args()
    results = {}
    for kernel in KERNELS:
        for capability in (80, 90):
            cold = compile_once(kernel, capability)
            runs = [compile_once(kernel, capability) for _ in range(args.repeat)]
            median = {
                name: statistics.median(run[name] for run in runs)
                for name in ("total", "to PTX", *STAGES)
            }
            results[f"{kernel}, sm_{capability}"] = {
                "median_s": median,
                "cold_total_s": cold["total"],
                "mma": cold["mma"],
            }
    print(f"Triton {triton.__version__}, warm, median of {args.repeat}:")
    print(f"  {'kernel':<70} {'to PTX ms':>9} {'ptxas ms':>9} {'total ms':>9}")
    for label, r in results.items():
        m = r["median_s"]
        print(
            f"  {label + ' (' + r['mma'] + ')':<70} {m['to PTX'] * 1000:9.0f} "
            f"{m['cubin'] * 1000:9.0f} {m['total'] * 1000:9.0f}"
        )
    payload = {
        "machine": machine(),
        "triton": triton.__version__,
        "results": results,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
