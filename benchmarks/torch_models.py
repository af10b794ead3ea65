"""Whole torch models through `affinec.torch.convert`, against the same models on
torch in the same run: time per forward pass, the outputs' agreement, and the cost
of one kernel call from torch tensors.

    scripts/gpu_python.sh benchmarks/torch_models.py --model resnet50 mobilenet_v2 \
        --batch 1 32 --json /tmp/affinec-gpu/torch_models.json

Each model (`affinec.torch.networks`, random weights, random batch-norm statistics)
runs in f16, channels_last, in inference mode, five ways: converted by affinec and
run eagerly (`convert(model, graphs=False)`: every convolution on affinec, batch
norms folded and ReLUs fused; the rest — pooling, additions, the classifier — still
torch's), converted and replayed as a CUDA graph (`convert(model)`), torch's own
(its convolutions on cuDNN, `cudnn.benchmark` on), `torch.compile` (default mode)
and `torch.compile(mode="reduce-overhead")` (CUDA graphs). The converted models run
once first, which compiles every shape (timed apart, `first pass s`); the compiled
ones likewise (`compile s`). The time per forward pass is the median of `--repeat`
passes between CUDA events. Every output is compared with the model's in float64.

The launch cost is the wall time per call over `--calls` back-to-back calls, after
warm-up, of a 3x3 64->64 convolution on 14x14 (batch 1, f16, channels_last): the
compiled kernel called from torch tensors, `affinec.torch.conv2d`, a converted
`AffinecConv2d`, and `torch.nn.functional.conv2d`.

With `--any-batch`, the converted models run kernels of any batch (`convert(model,
any_batch=True)`): give batches of one bucket (`--batch 8 12 15`) to see the later
ones compile nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import warnings
from typing import Any

WAYS = ("affinec", "graphed", "torch", "compiled", "reduce_overhead")
"""The ways each model runs, in the table's order."""


def forward_ms(model: Any, x: Any, repeat: int) -> float:
    """The median GPU time of `model(x)` between two CUDA events, in ms."""
    import torch

    times = []
    with torch.no_grad():
        for _ in range(repeat):
            start, end = torch.cuda.Event(True), torch.cuda.Event(True)
            start.record()
            model(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def wall_us_per_call(call: Any, calls: int, warmup: int = 50) -> float:
    """Microseconds of wall time per `call()` over `calls` back-to-back calls (after
    `warmup`), the GPU drained before and after."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def launch_costs(calls: int = 2000) -> dict[str, float]:
    """The wall time per call (µs) of a small convolution four ways (see the module
    docstring), and what the kernel computes against torch (relative error)."""
    import torch
    import torch.nn.functional as F

    import affinec.torch as at

    g = torch.Generator(device="cuda").manual_seed(0)
    cl = torch.channels_last
    x = (
        torch.randn(1, 64, 14, 14, device="cuda", generator=g)
        .half()
        .to(memory_format=cl)
    )
    w = torch.randn(64, 64, 3, 3, device="cuda", generator=g).half() * 0.05
    spec = at.spec_of(x, w, None, 1, 1)
    kernel = at._kernel(spec, x.device.index or 0)
    nhwc = x.permute(0, 2, 3, 1)
    filter = at.filter_for(w, "nhwc")
    out = torch.empty_like(nhwc)
    layer = at.AffinecConv2d(torch.nn.Conv2d(64, 64, 3, padding=1), w, None)
    with torch.no_grad():
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            kernel(input=nhwc, filter=filter, output=out)
            at.conv2d(x, w, None, 1, 1)
            layer(x)
        fell_back = [str(m.message) for m in said if "instead" in str(m.message)]
        if fell_back:  # torch's convolution is no measure of ours
            raise RuntimeError(f"affinec.torch fell back to torch: {fell_back[0]}")
        expected = F.conv2d(x.double(), w.double(), None, 1, 1)
        error = float(
            (out.permute(0, 3, 1, 2).double() - expected).norm() / expected.norm()
        )
        costs = {
            "kernel_call_us": wall_us_per_call(
                lambda: kernel(input=nhwc, filter=filter, output=out), calls
            ),
            "affinec_conv2d_us": wall_us_per_call(
                lambda: at.conv2d(x, w, None, 1, 1), calls
            ),
            "affinec_module_us": wall_us_per_call(lambda: layer(x), calls),
            "torch_conv2d_us": wall_us_per_call(
                lambda: F.conv2d(x, w, None, 1, 1), calls
            ),
        }
    costs["kernel_error"] = error
    costs["calls"] = calls
    return costs


def _error(got: Any, expected: Any) -> float:
    return float((got.double() - expected).norm() / expected.norm())


def model_rows(
    name: str,
    batches: list[int],
    repeat: int,
    any_batch: bool = False,
    compile_modes: tuple[str, ...] = ("default", "reduce-overhead"),
    report: Any = None,
) -> list[dict]:
    """One row per batch for model `name`: each way's time per forward pass (ms),
    its error against float64, the first passes' times. A way that fails leaves its
    error message in the row (`<way>_failed`) and the others still run."""
    import torch

    import affinec.torch as at
    from affinec.torch.networks import TORCH_NETWORKS, randomize_batch_norms

    model = randomize_batch_norms(TORCH_NETWORKS[name]()).eval().cuda()
    reference = copy.deepcopy(model).double()
    half = model.half().to(memory_format=torch.channels_last)
    ways: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallbacks are recorded per pass below
        ways["affinec"] = at.convert(half, any_batch=any_batch, graphs=False)
        ways["graphed"] = at.convert(half, any_batch=any_batch)
    ways["torch"] = half
    if compile_modes:
        import torch._dynamo

        # a fresh start per model, and room for both modes at every batch: past
        # dynamo's limit of recompilations a compiled model silently runs eagerly
        torch._dynamo.reset()
        for limit in ("cache_size_limit", "recompile_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, 64)
    for mode in compile_modes:
        way = "compiled" if mode == "default" else "reduce_overhead"
        ways[way] = torch.compile(copy.deepcopy(half), mode=mode)
    rows = []
    for batch in batches:
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        x16 = x.half().to(memory_format=torch.channels_last)
        with torch.no_grad():
            expected = reference(x.double())
        row: dict[str, Any] = {"model": name, "batch": batch, "any_batch": any_batch}
        outputs = {}
        for way, run in ways.items():
            try:
                graphs = getattr(run, "captured", 0)
                start = time.perf_counter()
                with warnings.catch_warnings(record=True) as said, torch.no_grad():
                    warnings.simplefilter("always")
                    for _ in range(3):  # compiles; reduce-overhead records its graph
                        got = run(x16)
                    torch.cuda.synchronize()
                row[f"{way}_first_s"] = time.perf_counter() - start
                if way in ("affinec", "graphed"):
                    row[f"{way}_fallbacks"] = sorted({str(w.message) for w in said})
                if way == "graphed":  # whether this input shape is replayed
                    row["graph_captured"] = getattr(run, "captured", 0) > graphs
                outputs[way] = got.clone()
                row[f"{way}_error"] = _error(got, expected)
                row[f"{way}_ms"] = forward_ms(run, x16, repeat)
            except Exception as e:  # one way failing leaves the others measured
                row[f"{way}_failed"] = f"{type(e).__name__}: {e}"[:500]
        if "graphed" in outputs and "affinec" in outputs:
            row["graphed_vs_eager"] = _error(outputs["graphed"], outputs["affinec"])
        rows.append(row)
        if report is not None:
            report(row)
    return rows


def print_table(rows: list[dict], costs: dict | None) -> None:
    """The forward passes in ms (and errors), then the launch cost."""
    head = "".join(f"{w:>16}" for w in WAYS)
    print(f"{'model':<13} {'batch':>5}{head}   (ms per forward, f16)")
    for r in rows:
        cells = "".join(
            f"{r[f'{w}_ms']:>16.3f}" if f"{w}_ms" in r
            else f"{'failed' if f'{w}_failed' in r else '-':>16}"
            for w in WAYS
        )  # fmt: skip
        print(f"{r['model']:<13} {r['batch']:>5}{cells}")
    print(f"{'error vs f64':<19}" + "".join(f"{w:>16}" for w in WAYS))
    for r in rows:
        cells = "".join(
            f"{r[f'{w}_error']:>16.1e}" if f"{w}_error" in r else f"{'-':>16}"
            for w in WAYS
        )
        print(f"{r['model']:<13} {r['batch']:>5}{cells}")
    if costs:
        print(
            f"launch, µs per call ({costs['calls']} calls, 3x3 64->64 on 14x14 f16): "
            f"kernel {costs['kernel_call_us']:.1f}, affinec.torch.conv2d "
            f"{costs['affinec_conv2d_us']:.1f}, AffinecConv2d "
            f"{costs['affinec_module_us']:.1f}, F.conv2d {costs['torch_conv2d_us']:.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    from affinec.torch.networks import TORCH_NETWORKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", nargs="+", default=list(TORCH_NETWORKS), choices=TORCH_NETWORKS
    )
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--any-batch",
        action="store_true",
        help="convert with kernels of any batch (one per batch bucket: a new batch "
        "in a bucket compiles nothing; see the first pass's time)",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="leave out torch.compile (each model takes ~10 s per mode to compile)",
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=2000,
        help="calls of the small convolution per launch-cost figure (0: none)",
    )
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU (torch.cuda.is_available() is False)")
        return 1
    torch.backends.cudnn.benchmark = True
    costs = launch_costs(args.calls) if args.calls > 0 else None
    if costs:
        print(json.dumps(costs), file=sys.stderr)
    modes = () if args.no_compile else ("default", "reduce-overhead")
    rows = []
    for name in args.model:
        rows += model_rows(
            name,
            args.batch,
            args.repeat,
            args.any_batch,
            modes,
            report=lambda row: print(json.dumps(row), file=sys.stderr),
        )
    print_table(rows, costs)
    if args.json:
        from affinec.driver.benchmark import device_description

        with open(args.json, "w") as f:
            json.dump(
                {"device": device_description(), "launch": costs, "rows": rows},
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
