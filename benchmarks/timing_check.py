"""Does the benchmark harness measure GPU time? Its figures against Nsight Compute's
`gpu__time_duration` for our kernel and cuDNN's, on the smallest convolutions of
the table of the benchmark convolutions (docs/BENCHMARKS.md) (the ones launch overhead would distort most).

    python benchmarks/timing_check.py measure OUT.json       # the harness's figures
    ncu --csv --print-units base --metrics gpu__time_duration.sum \
        --clock-control none --cache-control none \
        --nvtx --nvtx-include 'timed/' --log-file NCU.csv \
        python benchmarks/timing_check.py launch             # each kernel 5 times
    python benchmarks/timing_check.py compare OUT.json NCU.csv

`scripts/gpu_session.sh` runs the three. `launch` brackets the launches to measure
with an NVTX range `timed`, so cuDNN's algorithm search and the warm-up stay out of
ncu's report; every kernel in the range that is not ours is cuDNN's. ncu runs with
the GPU's clocks as they are and without flushing caches (`--clock-control none
--cache-control none`, as the harness sees the GPU), and both rotate over as many
input sets as the harness does.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys

from affinec.driver.benchmark import (
    DESIGN_CONVOLUTIONS,
    in_our_layout,
    input_sets,
    time_cudnn,
    torch_conv,
    torch_tensors,
    with_format,
)

CASES = [("conv3x3-128", "f16"), ("conv1x1-256-64", "f32"), ("conv3x3-128", "f32")]
LAUNCHES = 5


def _setup(name: str, dtype: str):
    import torch

    from affinec.backend.runtime import current_arch
    from affinec.driver.compiler import compile_to_ptx

    # cuDNN's own heuristic, not its timed search: the search times kernels, and
    # under ncu those times differ, so each process could pick another algorithm.
    torch.backends.cudnn.benchmark = False
    spec = with_format(DESIGN_CONVOLUTIONS[name], dtype)
    generator = torch.Generator(device="cuda").manual_seed(0)
    data = [torch_tensors(spec, generator) for _ in range(input_sets(spec))]
    kernel = compile_to_ptx(spec, arch=current_arch()).runtime_kernel()
    shape = torch_conv(spec, *data[0], relu=False).permute(0, 2, 3, 1).shape
    dtype_t = torch.float16 if dtype == "f16" else torch.float32
    bound = []
    for x, w, b in data:
        out = torch.empty(shape, dtype=dtype_t, device="cuda")
        arguments = kernel.check(*in_our_layout(spec, x, w, b), out)
        for a in arguments:
            a.to_device()
        bound.append(arguments)
    return spec, data, kernel, bound


def measure(path: str) -> None:
    from affinec.backend.timing import time_launches

    results = {}
    for name, dtype in CASES:
        spec, data, kernel, bound = _setup(name, dtype)
        ours = time_launches(lambda k: kernel.launch(bound[k]), len(bound))  # noqa: B023
        cudnn = time_cudnn(spec, data, relu=False, tf32=False)
        results[f"{name}-{dtype}"] = {"ours_ms": ours, "cudnn_ms": cudnn}
        print(f"{name} {dtype}: ours {ours:.4f} ms, cuDNN {cudnn:.4f} ms", flush=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2)


def launch() -> None:
    import torch

    for name, dtype in CASES:
        spec, data, kernel, bound = _setup(name, dtype)
        torch.backends.cudnn.allow_tf32 = False
        for _ in range(3):  # warm-up: module load, cuDNN's algorithm search
            kernel.launch(bound[0])
            torch_conv(spec, *data[0], relu=False)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("timed")
        for k in range(LAUNCHES):
            kernel.launch(bound[k % len(bound)])
        torch.cuda.synchronize()
        for k in range(LAUNCHES):
            torch_conv(spec, *data[k % len(data)], relu=False)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.backends.cudnn.allow_tf32 = True


def compare(json_path: str, csv_path: str) -> int:
    with open(json_path) as f:
        harness = json.load(f)
    with open(csv_path) as f:
        rows = list(csv.DictReader(line for line in f if line.startswith('"')))
    durations = [
        (r["Kernel Name"], float(r["Metric Value"].replace(",", "")) / 1e6)  # ns -> ms
        for r in rows
        if r.get("Metric Name") == "gpu__time_duration.sum"
    ]
    worst = 0.0
    print(f"{'case':<22} {'who':<6} {'harness ms':>11} {'ncu ms':>9} {'diff':>7}")
    k = 0
    for name, dtype in CASES:
        key = f"{name}-{dtype}"
        ours: list[float] = []
        while k < len(durations) and durations[k][0].startswith("conv_kernel"):
            ours.append(durations[k][1])
            k += 1
        cudnn: list[float] = []  # every kernel until our next one: cuDNN's
        while k < len(durations) and not durations[k][0].startswith("conv_kernel"):
            cudnn.append(durations[k][1])
            k += 1
        for who, got, ref in (
            ("ours", statistics.median(ours), harness[key]["ours_ms"]),
            ("cuDNN", sum(cudnn) / LAUNCHES, harness[key]["cudnn_ms"]),
        ):
            diff = (ref - got) / got
            worst = max(worst, abs(diff))
            print(f"{key:<22} {who:<6} {ref:11.4f} {got:9.4f} {diff:+7.1%}")
    print(f"largest difference: {worst:.1%} (the method is accepted within 10%)")
    return 0 if worst <= 0.10 else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("measure", help="the harness's figures").add_argument("out")
    modes.add_parser("launch", help="each kernel 5 times, for ncu")
    compare_mode = modes.add_parser("compare", help="the two side by side")
    compare_mode.add_argument("out")
    compare_mode.add_argument("ncu_csv")
    args = parser.parse_args(argv)
    if args.mode == "measure":
        measure(args.out)
    elif args.mode == "launch":
        launch()
    else:
        return compare(args.out, args.ncu_csv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
