"""The launch path and graphed models on a GPU, in one run: what the GPU tests of
`tests/test_launch_path.py` and `tests/test_torch_front_door.py` check, the cost
of one kernel call against `torch.nn.functional.conv2d`'s, and the models' table of
`benchmarks/torch_models.py`.

    scripts/gpu_python.sh scripts/gpu_launch_check.py --json $OUT/launch.json

Parts, each run whatever became of the one before (a failure is printed, with its
traceback, and the next part runs):

  fast path   a compiled 3x3 convolution called from torch tensors and from numba
              arrays, again and again: the same result as the first call, split-K
              too; a wrong array after a right one still refused (shape, dtype,
              aliasing, alignment, a CPU tensor); a call inside a CUDA graph's
              capture (torch's current stream); bf16 from numba (uint16) and torch
              back in the caller's kind; on sm_90, a Hopper kernel (tensor maps)
              called twice from torch tensors
  launch      µs per call, wall time over --calls calls after warm-up: the kernel
              from torch tensors and from numba arrays, affinec.torch.conv2d, an
              AffinecConv2d, F.conv2d
  models      ResNet-50 and MobileNetV2 at each --batch in f16: affinec eager and
              graphed, torch eager, torch.compile default and reduce-overhead (ms
              per forward), each output against float64, graphed against eager

`--budget-s` (default 330) bounds the run: past it, what is left of the models runs
without torch.compile, or not at all. The last lines printed are the summary.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _torch_models():
    """benchmarks/torch_models.py as a module (benchmarks/ is no package)."""
    path = ROOT / "benchmarks" / "torch_models.py"
    spec = importlib.util.spec_from_file_location("torch_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _conv(dtype: str = "f16", splits: int = 1):
    import affinec
    from affinec.backend.runtime import current_arch
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    spec = ConvSpec(
        1, 64, 14, 14, 64, 3, 3, padding=1, dtype=dtype, layout="nhwc",
        filter_layout="rsck", epilogue="bias-relu",
    )  # fmt: skip
    if splits == 1:
        return spec, affinec.compile(spec)
    config = config_for(spec, splits=splits)
    return spec, compile_to_ptx(spec, config, arch=current_arch()).runtime_kernel()


def _relative(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))


def fast_path(args: argparse.Namespace) -> dict[str, Any]:
    """Each check's verdict (True, or what went wrong)."""
    import torch
    from numba import cuda

    from affinec.backend.kernel_arguments import transferable
    from affinec.backend.runtime import KernelArgumentError
    from affinec.frontend.reference import TOLERANCE, random_inputs, reference

    checks: dict[str, Any] = {}

    def check(name: str, run) -> None:
        try:
            outcome = run()
            checks[name] = True if outcome is None else outcome
        except Exception as e:
            traceback.print_exc()
            checks[name] = f"{type(e).__name__}: {e}"[:300]
        print(f"  {name}: {checks[name]}", flush=True)

    def repeated_torch(splits: int):
        def run():
            spec, kernel = _conv(splits=splits)
            inputs = random_inputs(spec, np.random.default_rng(3))
            tensors = [torch.as_tensor(a, device="cuda") for a in inputs]
            before = len(kernel._plans)
            first = kernel(*tensors)
            again = [kernel(*tensors) for _ in range(20)]
            out = torch.empty_like(first)
            for _ in range(3):
                assert kernel(*tensors, out) is out
            plans = len(kernel._plans) - before
            torch.cuda.synchronize()
            error = _relative(first.double().cpu().numpy(), reference(spec, *inputs))
            assert error <= TOLERANCE["f16"], f"error {error:.2e}"
            assert all(torch.equal(a, first) for a in (*again, out)), "differ"
            assert plans <= 2, f"{plans} plans for two layouts of call"
            return f"ok (error {error:.1e})"

        return run

    def repeated_numba():
        spec, kernel = _conv()
        inputs = random_inputs(spec, np.random.default_rng(4))
        arrays = [cuda.to_device(a) for a in inputs]
        first = kernel(*arrays).copy_to_host()
        for _ in range(5):
            again = kernel(*arrays).copy_to_host()
            assert again.tobytes() == first.tobytes(), "differ"
        error = _relative(first.astype(np.float64), reference(spec, *inputs))
        assert error <= TOLERANCE["f16"], f"error {error:.2e}"
        return f"ok (error {error:.1e})"

    def refusals():
        spec, kernel = _conv()
        half = torch.float16
        x = torch.randn(1, 14, 14, 64, device="cuda", dtype=half)
        w = torch.randn(3, 3, 64, 64, device="cuda", dtype=half)
        b = torch.randn(64, device="cuda", dtype=half)
        out = torch.empty(1, 14, 14, 64, device="cuda", dtype=half)
        kernel(x, w, b, out)
        kernel(x, w, b, out)
        odd = torch.empty(1 + x.numel(), device="cuda", dtype=half)[1:].view(x.shape)
        cases = {
            "shape": ((x[:, :13], w, b, out), "shape"),
            "dtype": ((x.float(), w, b, out), "dtype"),
            "aliasing": ((x, w, b, x), "shares memory"),
            "alignment": ((odd, w, b, out), "not 16-byte aligned"),
            "cpu tensor": ((x.cpu(), w, b, out), "got Tensor"),
        }
        missed = []
        for what, (arrays, words) in cases.items():
            try:
                kernel(*arrays)
                missed.append(f"{what}: accepted")
            except KernelArgumentError as e:
                if words not in str(e):
                    missed.append(f"{what}: {e}")
        kernel(x, w, b, out)
        assert not missed, "; ".join(missed)

    def captured():
        spec, kernel = _conv()
        x = torch.randn(1, 14, 14, 64, device="cuda", dtype=torch.float16)
        w = torch.randn(3, 3, 64, 64, device="cuda", dtype=torch.float16) * 0.05
        b = torch.randn(64, device="cuda", dtype=torch.float16)
        expected = kernel(x, w, b)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            kernel(x, w, b)
        side.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            got = kernel(x, w, b)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(got, expected), "the replay differs"

    def bf16(kind: str):
        def run():
            spec, kernel = _conv("bf16")
            inputs = random_inputs(spec, np.random.default_rng(5))
            expected = reference(spec, *inputs)
            if kind == "numba":
                arrays = [cuda.to_device(transferable(a)) for a in inputs]
                out = kernel(*arrays)
                assert out.dtype == np.uint16, f"came back as {out.dtype}"
                got = out.copy_to_host().view(inputs[0].dtype).astype(np.float64)
                again = kernel(*arrays).copy_to_host()
                assert again.tobytes() == out.copy_to_host().tobytes(), "differ"
            else:
                arrays = [
                    torch.as_tensor(a.astype(np.float32), device="cuda").bfloat16()
                    for a in inputs
                ]
                out = kernel(*arrays)
                assert out.dtype == torch.bfloat16, f"came back as {out.dtype}"
                got = out.double().cpu().numpy()
                assert torch.equal(kernel(*arrays), out), "differ"
            error = _relative(got, expected)
            assert error <= TOLERANCE["bf16"], f"error {error:.2e}"
            return f"ok (error {error:.1e})"

        return run

    def hopper():
        if torch.cuda.get_device_capability() != (9, 0):
            return "skipped (not sm_90)"
        from affinec.base.spec import MatmulSpec
        from affinec.driver.compiler import compile_to_ptx

        spec = MatmulSpec(128, 64, 64, "f16")
        kernel = compile_to_ptx(spec, arch="sm_90a", wgmma=True).runtime_kernel()
        inputs = random_inputs(spec, np.random.default_rng(6))
        tensors = [torch.as_tensor(a, device="cuda") for a in inputs]
        first = kernel(*tensors)
        again = kernel(*tensors)
        other = [t.clone() for t in tensors]  # new addresses: maps encoded again
        third = kernel(*other)
        torch.cuda.synchronize()
        error = _relative(first.double().cpu().numpy(), reference(spec, *inputs))
        assert error <= TOLERANCE["f16"], f"error {error:.2e}"
        assert torch.equal(again, first) and torch.equal(third, first), "differ"
        return f"ok (error {error:.1e})"

    check("torch, repeated calls", repeated_torch(1))
    check("torch, repeated calls, split-K 4", repeated_torch(4))
    check("numba, repeated calls", repeated_numba)
    check("wrong arrays after right ones refused", refusals)
    check("a call inside a CUDA graph capture", captured)
    check("bf16 numba (uint16) in, numba out", bf16("numba"))
    check("bf16 torch in, torch out", bf16("torch"))
    check("Hopper kernel (tensor maps) from torch", hopper)
    return checks


def launch(args: argparse.Namespace) -> dict[str, Any]:
    from numba import cuda

    from affinec.frontend.reference import random_inputs

    costs = _torch_models().launch_costs(args.calls)
    try:
        spec, kernel = _conv()
        rng = np.random.default_rng(0)
        arrays = [cuda.to_device(a) for a in random_inputs(spec, rng)]
        out = cuda.device_array(spec.output_shape, np.float16)
        costs["numba_kernel_call_us"] = _torch_models().wall_us_per_call(
            lambda: kernel(*arrays, out), args.calls
        )
        costs.update(_launch_entries(kernel, arrays, out, args.calls))
    except Exception:
        traceback.print_exc()
        costs["numba_failed"] = traceback.format_exc()[-500:]
    print(f"  {json.dumps(costs)}", flush=True)
    return costs


def _launch_entries(kernel, arrays, out, calls: int) -> dict[str, float]:
    """µs per launch of the same kernel (its launches, for a split one) on the same
    arrays through the two lowest entries, nothing else in the loop: the driver's
    cuLaunchKernel with the plan's packed parameters (what a planned call uses),
    and cuda.core's launch of the kernel loaded by numba (how numba launches its
    own)."""
    from numba import cuda

    from affinec.backend.cuda_launch import (
        allow_dynamic_shared_memory,
        launch_function,
        launch_parameters,
    )
    from affinec.hardware.chips import DEFAULT_SHARED_PER_BLOCK

    tm = _torch_models()
    plan = kernel.prepare(*arrays, out)
    pointers = {
        name: int(a.__cuda_array_interface__["data"][0])
        for name, a in zip(plan.names, (*arrays, out), strict=True)
    }
    pointers.update(kernel._workspace_addresses(0, None))
    kernel.pack(plan, pointers)
    functions = kernel.functions
    steps = list(zip(kernel.launches, plan.grids, plan.blocks, strict=True))

    def by_driver():
        for launch, grid, block in steps:
            launch_parameters(
                functions[launch.name], grid, launch.block, launch.shared_memory,
                0, block.address,
            )  # fmt: skip

    driver_us = tm.wall_us_per_call(by_driver, calls)
    module = cuda.current_context().create_module_ptx(kernel.ptx)
    for launch, _, _ in steps:
        if launch.shared_memory > DEFAULT_SHARED_PER_BLOCK:
            allow_dynamic_shared_memory(
                module.get_function(launch.name), launch.shared_memory
            )
    loaded = [
        (module.get_function(launch.name), launch, grid,
         [np.uint64(pointers[a]) for a in launch.arguments])
        for launch, grid, _ in steps
    ]  # fmt: skip

    def by_core():
        for function, launch, grid, values in loaded:
            launch_function(
                function, grid, launch.block, launch.shared_memory, values, None
            )

    core_us = tm.wall_us_per_call(by_core, calls)
    return {"driver_launch_us": driver_us, "core_launch_us": core_us}


def models(args: argparse.Namespace, started: float) -> list[dict]:
    tm = _torch_models()
    rows: list[dict] = []
    for name in args.model:
        elapsed = time.perf_counter() - started
        if elapsed > args.budget_s:
            print(f"  {name}: skipped, {elapsed:.0f} s past the budget", flush=True)
            continue
        # torch.compile costs ~10 s a mode and batch: left out past 60 % of budget
        modes = () if args.no_compile or elapsed > 0.6 * args.budget_s else (
            "default", "reduce-overhead")  # fmt: skip
        try:
            rows += tm.model_rows(
                name,
                args.batch,
                args.repeat,
                compile_modes=modes,
                report=lambda row: print(f"  {json.dumps(row)}", flush=True),
            )
        except Exception:
            traceback.print_exc()
            rows.append({"model": name, "failed": traceback.format_exc()[-500:]})
    return rows


def _agreement(row: dict) -> str:
    """Whether the converted model agrees with torch as the GPU test asks."""
    if "failed" in row:
        return "FAILED"
    bound = max(2 * row.get("torch_error", 0.0), 2e-3)
    verdicts = []
    for way in ("affinec", "graphed"):
        if f"{way}_error" not in row:
            verdicts.append(f"{way} failed")
        elif row[f"{way}_error"] > bound:
            verdicts.append(f"{way} {row[f'{way}_error']:.1e} > {bound:.1e}")
    if row.get("graph_captured") is False:
        verdicts.append("no graph captured (ran eagerly)")
    if row.get("graphed_vs_eager", 0.0) > 1e-3:
        verdicts.append(f"graphed vs eager {row['graphed_vs_eager']:.1e}")
    return "ok" if not verdicts else "; ".join(verdicts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--model", nargs="+", default=["resnet50", "mobilenet_v2"])
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--budget-s", type=float, default=330.0)
    parser.add_argument(
        "--parts", nargs="+", default=["fast", "launch", "models"],
        choices=["fast", "launch", "models"],
    )  # fmt: skip
    args = parser.parse_args(argv)
    started = time.perf_counter()

    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU (torch.cuda.is_available() is False)")
        return 1
    torch.backends.cudnn.benchmark = True
    result: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        from affinec.driver.benchmark import device_description

        result["device"] = device_description()
    except Exception as e:
        result["device"] = repr(e)
    parts = {
        "fast": lambda: fast_path(args),
        "launch": lambda: launch(args),
        "models": lambda: models(args, started),
    }
    for part in args.parts:
        print(f"== {part} ({time.perf_counter() - started:.0f} s)", flush=True)
        try:
            result[part] = parts[part]()
        except Exception:
            traceback.print_exc()
            result[part] = {"failed": traceback.format_exc()[-800:]}
    result["seconds"] = time.perf_counter() - started
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))

    device = result["device"]
    gpu = device.get("gpu", device) if isinstance(device, dict) else device
    print(f"\n== summary ({result['seconds']:.0f} s, {gpu})")
    fast = result.get("fast", {})
    for name, verdict in fast.items():
        print(f"fast path  {name:<42} {str(verdict)[-200:]}")
    costs = result.get("launch", {})
    if "kernel_call_us" in costs:
        print(
            f"launch µs  kernel from torch {costs['kernel_call_us']:.1f}, "
            f"affinec.torch.conv2d {costs['affinec_conv2d_us']:.1f}, AffinecConv2d "
            f"{costs['affinec_module_us']:.1f}, F.conv2d {costs['torch_conv2d_us']:.1f}"
        )
        if "core_launch_us" in costs:
            print(
                f"launch µs  kernel from numba {costs['numba_kernel_call_us']:.1f}; "
                f"the entries alone: cuLaunchKernel packed "
                f"{costs['driver_launch_us']:.1f}, cuda.core launch "
                f"{costs['core_launch_us']:.1f}"
            )
        else:
            print(
                f"launch     numba part FAILED: {costs.get('numba_failed', '')[-200:]}"
            )
    elif costs:
        print(f"launch     FAILED: {str(costs)[-300:]}")
    rows = result.get("models", [])
    if isinstance(rows, list) and rows:
        ok_rows = [r for r in rows if "failed" not in r]
        if ok_rows:
            _torch_models().print_table(ok_rows, None)
        for r in rows:
            print(f"agreement  {r['model']:<13} batch {r.get('batch', '-')}: "
                  f"{_agreement(r)}")  # fmt: skip
            for way in ("affinec", "graphed", "torch", "compiled", "reduce_overhead"):
                if f"{way}_failed" in r:
                    print(f"           {way} failed: {r[f'{way}_failed'][:200]}")
    elif rows:
        print(f"models     FAILED: {str(rows)[-300:]}")
    failed = any(v is not True and not str(v).startswith(("ok", "skipped"))
                 for v in fast.values())  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
