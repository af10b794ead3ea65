"""How long the compiler takes from a spec to PTX: the small default convolution and
the kernels users get (config_for's tensor-core configurations of the five benchmark
convolutions in f16), on one core; Triton takes 0.4-0.8 s per kernel.

    python benchmarks/compile.py [--repeat 5] [--json benchmarks/results/compile.json]
    python benchmarks/compile.py --network resnet50 --batch 32 --repeat 1

Times every stage of `compile_to_ptx` (the frontend, each pass of the default
pipeline, LLVM IR translation, LLVM's -O3 and PTX code generation), the same data as
`affinec-opt --mlir-timing`, over `--repeat` warm runs (the median is reported; the
first, cold run is reported apart: it loads xDSL's dialects and LLVM's NVPTX target).
With `--process`, also the wall time of a fresh `python -c` compile (imports included).
With `--network`, also `config_for`'s configuration of each distinct layer of the
network at `--batch` (`affinec.frontend.networks`), and the stages' mean over those layers.
Prints a table and writes JSON. `AFFINEC_FAST_CODEGEN=1 python benchmarks/compile.py`
times LLVM's code generation without straight-line strength reduction,
`AFFINEC_LEAN_CODEGEN=1` at LLVM's level 2, `AFFINEC_LIBLLVM=PATH` with that shared
LLVM library and `AFFINEC_LIBLLVM=llvmlite` with llvmlite's own, where the machine
has a release build that compiles by default (`affinec.backend.shared_llvm`); the
JSON says which. `--arch sm_90a`
times Hopper's route (`config_for(spec, arch="sm_90a", wgmma=True)`: TMA and wgmma)
and names the convolutions it refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import cpu_model, machine

from affinec.backend.nvptx import FAST_CODEGEN, LEAN_CODEGEN
from affinec.backend.shared_llvm import library_path
from affinec.base.spec import ConvSpec
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.kernel_config import KernelConfig
from affinec.frontend.naive import build
from affinec.frontend.networks import NETWORKS, network

DEFAULT = "default: 1x8x8x8 * 8x3x3 p1 f32"
SPECS = {DEFAULT: ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1)}
# The kernels users get: config_for's tensor-core configuration of each benchmark
# convolution in f16 (NHWC, RSCK).
SPECS |= {
    f"{name} f16 (config_for)": with_format(spec, "f16")
    for name, spec in DESIGN_CONVOLUTIONS.items()
}


def configuration(spec: ConvSpec, arch: str) -> KernelConfig:
    """`config_for`'s configuration; on sm_90a, Hopper's (wgmma and TMA), which
    refuses what that route does not take (a ValueError saying why)."""
    if arch == "sm_90a":
        return config_for(spec, arch=arch, wgmma=True)
    return config_for(spec)


def compile_once(spec: ConvSpec, arch: str) -> list[tuple[str, float]]:
    """One compilation of `spec` with its `configuration`, timed stage by stage (as
    `compile_to_ptx` does: the verifier once, at the end)."""
    config = configuration(spec, arch)
    start = time.perf_counter()
    module = build(spec)
    stages = [("frontend (naive IR)", time.perf_counter() - start)]
    # The flattened route builds its own product from the spec.
    source = spec if config.flatten_pixels else module
    compiled = compile_to_ptx(source, config, arch=arch, verify_each=False)
    assert ".entry" in compiled.ptx
    return stages + [(name.split("{")[0], t) for name, t in compiled.timings]


def measure(spec: ConvSpec, repeat: int, arch: str) -> dict:
    cold = compile_once(spec, arch)
    runs = [compile_once(spec, arch) for _ in range(repeat)]
    names = [name for name, _ in runs[0]]
    per_stage = {
        name: statistics.median(run[k][1] for run in runs)
        for k, name in enumerate(names)
    }
    totals = [sum(t for _, t in run) for run in runs]
    return {
        "spec": spec.to_text(),
        "arch": arch,
        "stages_s_median": per_stage,
        "total_s_median": statistics.median(totals),
        "total_s_all": totals,
        "cold_total_s": sum(t for _, t in cold),
    }


def process_wall_time(spec: ConvSpec, arch: str) -> float:
    """A fresh interpreter importing affinec and compiling `spec` once (on sm_90a,
    Hopper's route, as `configuration` has it)."""
    route = ", wgmma=True" if arch == "sm_90a" else ""
    code = (
        "from affinec.driver.compiler import compile_to_ptx\n"
        "from affinec.base.spec import parse_spec\n"
        f"compile_to_ptx(parse_spec({spec.to_text()!r}), arch={arch!r}{route})\n"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--arch",
        default="sm_90",
        choices=("sm_80", "sm_90", "sm_90a"),
        help="sm_90a: Hopper's wgmma route (config_for(..., wgmma=True))",
    )
    parser.add_argument("--json", default="benchmarks/results/compile.json")
    parser.add_argument(
        "--process", action="store_true", help="also time a fresh process (imports)"
    )
    parser.add_argument(
        "--network", choices=NETWORKS, help="also every distinct layer of a network"
    )
    parser.add_argument("--batch", type=int, default=32, help="the network's batch")
    args = parser.parse_args(argv)

    specs = dict(SPECS)
    layers = []
    if args.network:
        for layer in network(args.network, args.batch):
            label = f"{args.network} {layer.name} (batch {args.batch})"
            specs[label] = layer.spec
            layers.append(label)
    results, refused = {}, {}
    for label, spec in specs.items():
        try:
            configuration(spec, args.arch)
        except ValueError as e:
            refused[label] = str(e)
            continue
        r = measure(spec, args.repeat, args.arch)
        if args.process:
            r["process_wall_s"] = process_wall_time(spec, args.arch)
        results[label] = r

    print(f"on {cpu_model()}")
    if DEFAULT in results:
        default = results[DEFAULT]
        print(
            f"naive -> PTX ({args.arch}), the default convolution, median of "
            f"{args.repeat}:"
        )
        print(f"  {'stage':<58} {'ms':>8}")
        for name, seconds in default["stages_s_median"].items():
            print(f"  {name:<58} {seconds * 1000:8.1f}")
        print(f"  {'total':<58} {default['total_s_median'] * 1000:8.1f}\n")
    print(
        f"  {'spec':<52} {'median ms':>10} {'min-max ms':>11} {'cold ms':>9} "
        f"{'process s':>10}"
    )
    for label, r in results.items():
        process = f"{r['process_wall_s']:10.2f}" if "process_wall_s" in r else " " * 10
        spread = (
            f"{min(r['total_s_all']) * 1000:.0f}-{max(r['total_s_all']) * 1000:.0f}"
        )
        print(
            f"  {label:<52} {r['total_s_median'] * 1000:10.1f} {spread:>11} "
            f"{r['cold_total_s'] * 1000:9.1f} {process}"
        )
    for label, why in refused.items():
        print(f"  {label:<52} refused on {args.arch}: {why.split(' (')[0]}")
    kernels = [
        r["total_s_median"]
        for label, r in results.items()
        if label in SPECS and label != DEFAULT
    ]
    fast = os.environ.get(FAST_CODEGEN) == "1"
    lean = os.environ.get(LEAN_CODEGEN) == "1"
    how = "without straight-line strength reduction" if fast else "as it is"
    how += ", at level 2)" if lean else ")"
    how += f" by {library_path() or 'llvmlite'}"
    if kernels:
        print(
            f"\n  median over config_for's f16 kernels: "
            f"{statistics.median(kernels) * 1000:.0f} ms (NVPTX code generation {how}"
        )
    layers = [label for label in layers if label in results]  # not the refused
    if layers:
        totals = [results[label]["total_s_median"] for label in layers]
        print(
            f"  median over {args.network}'s {len(layers)} layers at batch "
            f"{args.batch}: {statistics.median(totals) * 1000:.0f} ms (from "
            f"{min(totals) * 1000:.0f} to {max(totals) * 1000:.0f}); mean per stage:"
        )
        stages = results[layers[0]]["stages_s_median"]
        for name in stages:
            mean = statistics.mean(
                results[label]["stages_s_median"].get(name, 0.0) for label in layers
            )
            print(f"    {name:<56} {mean * 1000:8.1f}")

    payload = {
        "machine": machine(),
        "fast_codegen": fast,
        "lean_codegen": lean,
        "libllvm": library_path(),
        "results": results,
        "refused": refused,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
