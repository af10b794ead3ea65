"""Run the Hopper matmul (`affinec.tools.hopper_matmul`) on an H100: TMA, mbarriers and
wgmma from nvgpu IR through every level to sm_90a PTX, launched with its tensor
maps, checked against float64 and timed against torch's (cuBLAS) f16 product in the
same run.

    scripts/gpu_python.sh scripts/gpu_hopper.py --json /tmp/hopper.json

Prints, per shape: ptxas's registers and spills, the SASS's HGMMA count (when
`cuobjdump` is on PATH or in $CUOBJDUMP), the relative error, the kernel time
(CUDA events around repeated launches) and cuBLAS's. Written before any GPU ran it
(2026-11-26): the tensor maps are encoded with cuda.bindings' cuTensorMapEncodeTiled
and the kernel launched with cuLaunchKernel, the route checked on the H100 with a
throw-away kernel; this script itself has not run.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from affinec.backend.emitter import to_ptx
from affinec.backend.ptxas import assemble
from affinec.base.locating_parser import parse_module
from affinec.base.spec import MatmulSpec
from affinec.dialects import gpu, nvgpu
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.frontend.reference import (
    TOLERANCE,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.hardware.chips import chip
from affinec.hardware.tensor_maps import tensor_map_of
from affinec.ir.context import make_context
from affinec.tools.hopper_matmul import matmul_module

STAGES = (
    "nvvm-attach-target{chip=sm_90a},convert-nvgpu-to-nvvm,convert-scf-to-cf,"
    "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
)
SHAPES = [  # m, n, k, stages, tile_m, tile_n, schedule
    (64, 64, 64, 1, 64, 64, "waited"),
    (512, 512, 512, 3, 128, 128, "waited"),
    (512, 512, 512, 3, 128, 128, "in flight"),
    (512, 512, 512, 3, 128, 128, "specialized"),
    (4096, 4096, 1024, 3, 128, 64, "in flight"),
    (4096, 4096, 1024, 4, 128, 128, "waited"),
    (4096, 4096, 1024, 4, 128, 128, "in flight"),
    (4096, 4096, 1024, 4, 128, 128, "specialized"),
    (4096, 4096, 1024, 4, 64, 256, "in flight"),
]
"""`waited`: each step's MMAs finish before the next; `in flight`: they run while
the next step waits for its tiles; `specialized`: a warpgroup that loads and one
that multiplies, stages handed back on mbarriers."""


def _constant(value) -> int:
    return value.owner.value.value.data


def compiled(m, n, k, stages, tm, tn, schedule):
    """The PTX, the launch (kernel name, grid, block, dynamic shared bytes) and the
    types of the tensor maps the host function makes for A and B, in order."""
    text = matmul_module(
        m, n, k, stages, tm, tn,
        in_flight=schedule == "in flight",
        warp_specialized=schedule == "specialized",
    )  # fmt: skip
    module = parse_module(make_context(), text)
    Pipeline.parse(STAGES).run(module)
    (launch,) = [o for o in module.walk() if isinstance(o, gpu.LaunchFuncOp)]
    shared = launch.dynamicSharedMemorySize
    maps = [
        o.tensorMap.type
        for o in module.walk()
        if isinstance(o, nvgpu.TmaCreateDescriptorOp)
    ]
    return (
        to_ptx(module, "sm_90a"),
        launch.kernel_name,
        tuple(_constant(v) for v in launch.grid_sizes),
        tuple(_constant(v) for v in launch.block_sizes),
        0 if shared is None else _constant(shared),
        maps,
    )


def hgmma_count(ptx: str) -> int | None:
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if tool is None or not os.path.exists(ptxas):
        return None
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/k.ptx", "w") as f:
            f.write(ptx)
        subprocess.run(
            [ptxas, "-arch=sm_90a", f"{d}/k.ptx", "-o", f"{d}/k.cubin"], check=True
        )
        sass = subprocess.run(
            [tool, "-sass", f"{d}/k.cubin"], capture_output=True, text=True
        ).stdout
    return len(re.findall(r"\bHGMMA\.", sass))


def _check(result) -> object:
    from cuda.bindings import driver

    status, *rest = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver: {status}")
    return rest[0] if len(rest) == 1 else rest


def run(shape, reps: int) -> dict:
    import torch
    from cuda.bindings import driver
    from numba import cuda

    m, n, k, stages, tm, tn, schedule = shape
    ptx, name, grid, block, shared, map_types = compiled(*shape)
    (resources,) = assemble(ptx, "sm_90a").values()
    row = {
        "shape": f"{m}x{n}x{k}",
        "stages": stages,
        "schedule": schedule,
        "tile": f"{tm}x{tn}",
        "registers": resources.registers,
        "spills": resources.spill_stores,
        "hgmma": hgmma_count(ptx),
    }
    cuda.current_context()  # numba's context, current for the driver calls below
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    da, db = cuda.to_device(a), cuda.to_device(b)
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))
    address = lambda x: int(x.__cuda_array_interface__["data"][0])  # noqa: E731
    map_a, map_b = (
        tensor_map_of(t, x.shape, x.strides, x.dtype).encode(address(d))
        for t, x, d in zip(map_types, (a, b), (da, db), strict=True)
    )
    module = _check(driver.cuModuleLoadData(ptx.encode() + b"\0"))
    function = _check(driver.cuModuleGetFunction(module, name.encode()))
    if shared > chip("sm_90a").static_shared_per_block:
        _check(
            driver.cuFuncSetAttribute(
                function,
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared,
            )
        )
    params = ((map_a, map_b, address(out)), (None, None, ctypes.c_void_p))

    def launch() -> None:
        _check(driver.cuLaunchKernel(function, *grid, *block, shared, 0, params, 0))

    launch()
    cuda.synchronize()
    got = out.copy_to_host()
    reference = a.astype(np.float64) @ b.astype(np.float64)
    row["error"] = (
        float(np.linalg.norm(got - reference) / np.linalg.norm(reference))
        if np.isfinite(got).all()
        else float("nan")
    )
    start, end = (
        torch.cuda.Event(enable_timing=True),
        torch.cuda.Event(enable_timing=True),
    )
    start.record()
    for _ in range(reps):
        launch()
    end.record()
    torch.cuda.synchronize()
    row["ms"] = start.elapsed_time(end) / reps
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    torch.matmul(ta, tb)
    start.record()
    for _ in range(reps):
        torch.matmul(ta, tb)
    end.record()
    torch.cuda.synchronize()
    row["cublas_ms"] = start.elapsed_time(end) / reps
    flops = 2 * m * n * k
    row["tflops"] = flops / row["ms"] / 1e9
    row["cublas_tflops"] = flops / row["cublas_ms"] / 1e9
    return row


SPEC_ROUTE = [  # what users get: affinec-wgmma-gemm from a spec, (spec, knobs)
    (MatmulSpec(300, 200, 328, "f16", "bias-relu"), {}),  # edges in m, n and k
    (MatmulSpec(4096, 4096, 1024, "f16"), {}),
    (MatmulSpec(4096, 4096, 1024, "f16"), {"wgmma_schedule": "specialized"}),
    (MatmulSpec(4096, 4096, 1024, "f16"), {"wgmma_tile": (64, 256)}),
    (
        MatmulSpec(4096, 4096, 1024, "f16"),
        {"wgmma_tile": (128, 256), "wgmma_schedule": "cooperative", "stages": 2},
    ),
    (MatmulSpec(4096, 4096, 1024, "f16"), {"wgmma_schedule": "cooperative"}),
    (MatmulSpec(4096, 4096, 4096, "f16"), {}),
    (MatmulSpec(8192, 8192, 2048, "bf16", "bias-relu"), {}),
    (MatmulSpec(6272, 1024, 256, "f16", "bias-relu"), {}),  # ResNet-50 @14, batch 32
]


def spec_kernel(spec, knobs):
    """The compiled kernel of `spec` on the wgmma route: `config_for`'s, changed by
    `knobs`."""
    from dataclasses import replace

    config = replace(config_for(spec, arch="sm_90a", wgmma=True), **knobs)
    return compile_to_ptx(spec, config, arch="sm_90a")


def run_spec(spec, knobs, reps: int) -> dict:
    """The spec route through the runtime (`Kernel`: tensor maps encoded for the
    arrays, cuLaunchKernel), checked against float64, timed with CUDA events around
    repeated launches, against torch's product (+ its epilogue) in the same run."""
    import torch

    compiled = spec_kernel(spec, knobs)
    (resources,) = assemble(compiled.ptx, "sm_90a").values()
    kernel = compiled.runtime_kernel()
    row = {
        "shape": f"{spec.m}x{spec.n}x{spec.k} {spec.dtype} {spec.epilogue}",
        "config": compiled.config.describe(),
        "registers": resources.registers,
        "spills": resources.spill_stores,
        "hgmma": hgmma_count(compiled.ptx),
    }
    inputs = random_inputs(spec, np.random.default_rng(0))
    out = kernel(*inputs, poisoned_output(spec))
    row["error"] = relative_error(out, reference(spec, *inputs))
    arguments = kernel.check(*inputs, poisoned_output(spec))
    for a in arguments:
        a.to_device()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    kernel.launch(arguments)
    start.record()
    for _ in range(reps):
        kernel.launch(arguments)
    end.record()
    torch.cuda.synchronize()
    row["ms"] = start.elapsed_time(end) / reps
    dtype = torch.float16 if spec.dtype == "f16" else torch.bfloat16
    ta = torch.randn(spec.m, spec.k, device="cuda", dtype=dtype)
    tb = torch.randn(spec.k, spec.n, device="cuda", dtype=dtype)
    bias = torch.randn(spec.n, device="cuda", dtype=dtype)
    epilogue = spec.epilogue != "none"

    def theirs():
        c = torch.matmul(ta, tb)
        return torch.relu(c + bias) if epilogue else c

    theirs()
    start.record()
    for _ in range(reps):
        theirs()
    end.record()
    torch.cuda.synchronize()
    row["cublas_ms"] = start.elapsed_time(end) / reps
    row["tflops"] = spec.flops / row["ms"] / 1e9
    row["cublas_tflops"] = spec.flops / row["cublas_ms"] / 1e9
    return row


def compile_only(shapes, specs) -> int:
    """Without a GPU: each shape's kernel through ptxas (and cuobjdump, if there)."""
    for shape in shapes:
        ptx, name, grid, block, shared, _ = compiled(*shape)
        (resources,) = assemble(ptx, "sm_90a").values()
        print(
            f"{shape}: grid {grid}, block {block}, {shared} B dynamic shared, "
            f"{resources.registers} registers, {resources.spill_stores} B spilled, "
            f"HGMMA {hgmma_count(ptx)}"
        )
    for spec, knobs in specs:
        kernel = spec_kernel(spec, knobs)
        (resources,) = assemble(kernel.ptx, "sm_90a").values()
        print(
            f"{spec.to_text()} [{kernel.config.describe()}]: grid "
            f"{kernel.launch.grid}, {kernel.launch.dynamic_shared_memory} B "
            f"dynamic shared, {resources.registers} registers, "
            f"{resources.spill_stores} B spilled, HGMMA {hgmma_count(kernel.ptx)}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the table here")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument(
        "--only", type=int, nargs="*", help="run these shapes (positions in SHAPES)"
    )
    parser.add_argument(
        "--spec-only",
        type=int,
        nargs="*",
        help="run these of the spec route (positions in SPEC_ROUTE)",
    )
    parser.add_argument(
        "--compile-only", action="store_true", help="no GPU: ptxas's report only"
    )
    args = parser.parse_args(argv)
    rows = []
    chosen = [SHAPES[i] for i in args.only] if args.only is not None else SHAPES
    specs = (
        [SPEC_ROUTE[i] for i in args.spec_only]
        if args.spec_only is not None
        else SPEC_ROUTE
    )
    if args.compile_only:
        return compile_only(chosen, specs)
    for shape in chosen:
        try:
            rows.append(run(shape, args.reps))
        except Exception as e:  # one shape's failure is a row, the others still run
            rows.append({"shape": "x".join(map(str, shape[:3])), "failed": repr(e)})
        print(json.dumps(rows[-1]), flush=True)
    spec_rows = []
    for spec, knobs in specs:
        try:
            spec_rows.append(run_spec(spec, knobs, args.reps))
        except Exception as e:  # one shape's failure is a row, the others still run
            spec_rows.append({"shape": spec.to_text(), "failed": repr(e)})
        print(json.dumps(spec_rows[-1]), flush=True)
    print(
        f"\n{'shape':>16} {'tile':>7} {'st':>3} {'schedule':>11} {'reg':>4} {'HGMMA':>5} "
        f"{'error':>9} {'ms':>8} {'TFLOP/s':>8} {'cuBLAS':>8}"
    )
    for r in rows:
        if "failed" in r:
            print(f"{r['shape']:>16}  failed: {r['failed'][:90]}")
            continue
        print(
            f"{r['shape']:>16} {r['tile']:>7} {r['stages']:>3} {r['schedule']:>11} "
            f"{r['registers']:>4} "
            f"{r['hgmma'] if r['hgmma'] is not None else '-':>5} {r['error']:>9.2e} "
            f"{r['ms']:>8.4f} {r['tflops']:>8.1f} {r['cublas_tflops']:>8.1f}"
        )
    print(
        f"\n{'spec route':>34} {'reg':>4} {'HGMMA':>5} {'error':>9} {'ms':>8} "
        f"{'TFLOP/s':>8} {'torch':>8}  config"
    )
    for r in spec_rows:
        if "failed" in r:
            print(f"{r['shape']:>34}  failed: {r['failed'][:90]}")
            continue
        print(
            f"{r['shape']:>34} {r['registers']:>4} "
            f"{r['hgmma'] if r['hgmma'] is not None else '-':>5} {r['error']:>9.2e} "
            f"{r['ms']:>8.4f} {r['tflops']:>8.1f} {r['cublas_tflops']:>8.1f}  "
            f"{r['config']}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"test_bed": rows, "spec_route": spec_rows}, f, indent=1)
    ok = all("failed" not in r and r["error"] < 1e-3 for r in rows) and all(
        "failed" not in r and r["error"] <= TOLERANCE[r["shape"].split()[1]]
        for r in spec_rows
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
