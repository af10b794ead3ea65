"""Launch our kernel for each of the five benchmark convolutions once, on random data,
for a profiler to watch (`scripts/gpu_session.sh profile` runs it under Nsight
Compute, which reports what limits each kernel).

    ncu --section SpeedOfLight -k regex:^conv_kernel python benchmarks/profile_kernels.py
    python benchmarks/profile_kernels.py --dtype f16 --only conv3x3-128
    python benchmarks/profile_kernels.py --dtype f16 --wgmma   # Hopper's route, sm_90a
    python benchmarks/profile_kernels.py --network resnet50 --batch 32 --layers 3x3/2
"""

from __future__ import annotations

import argparse

import numpy as np

from affinec.backend.runtime import current_arch
from affinec.base.spec import DTYPES
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.frontend.networks import NETWORKS, network
from affinec.frontend.reference import poisoned_output, random_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", nargs="+", choices=DTYPES, default=["f32", "f16"])
    parser.add_argument("--only", nargs="+", choices=list(DESIGN_CONVOLUTIONS))
    parser.add_argument(
        "--wgmma",
        action="store_true",
        help="the wgmma route for sm_90a (config_for(spec, wgmma=True)) where the "
        "convolution takes it",
    )
    parser.add_argument(
        "--network", choices=NETWORKS, help="a network's layers instead, in f16"
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument(
        "--layers", nargs="+", help="only the layers whose names contain one of these"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if args.network:
        for layer in network(args.network, args.batch):
            if args.layers and not any(part in layer.name for part in args.layers):
                continue
            compiled = compile_to_ptx(layer.spec, arch=current_arch())
            print(f"{layer.name}: {compiled.config.describe()}", flush=True)
            kernel = compiled.runtime_kernel()
            kernel(*random_inputs(layer.spec, rng), poisoned_output(layer.spec))
        return
    for name, spec in DESIGN_CONVOLUTIONS.items():
        if args.only and name not in args.only:
            continue
        for dtype in args.dtype:
            s = with_format(spec, dtype)
            if args.wgmma:
                try:
                    config = config_for(s, arch="sm_90a", wgmma=True)
                except ValueError as e:
                    print(f"{name} {dtype}: not on the wgmma route: {e}", flush=True)
                    continue
                compiled = compile_to_ptx(s, config, arch="sm_90a")
            else:
                compiled = compile_to_ptx(s, arch=current_arch())
            kernel = compiled.runtime_kernel()
            print(f"{name} {dtype}: {compiled.config.describe()}", flush=True)
            kernel(*random_inputs(s, rng), poisoned_output(s))


if __name__ == "__main__":
    main()
