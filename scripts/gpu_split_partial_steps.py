"""Split-K whose reduction tile does not divide a split's channels, on this GPU: the
last step of each split is partial (80 channels a split in tiles of 32: 32, 32, 16),
on the tensor-core and SIMT routes, products and convolutions, each compiled and
run against float64 (`affinec.tuning.differential`).

    scripts/gpu_python.sh scripts/gpu_split_partial_steps.py --json /tmp/split-partial.json

Prints one line a pair, then a table of outcomes; exits 1 if any pair was wrong or
failed. Without a GPU, `--compile-only` compiles them (the passes' checks apply).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter

from affinec.backend.runtime import cuda_available, current_arch
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.config import config_for
from affinec.driver.kernel_config import KernelConfig
from affinec.tuning.differential import (
    COMPILED,
    CORRECT,
    Pair,
    check_on_gpu,
    compile_pair,
)


def pairs() -> list[Pair]:
    """The products of the report (k=320 in 4 splits, tiles of 32) and their
    neighbours (a split's last step of 16, 18 and 4 channels; one split; tiles that
    divide), on both routes, and convolutions of 96 and 160 channels in 2 splits."""
    out = []
    for m, n in ((28, 16), (256, 128)):
        for k, splits, tile in (
            (320, 4, 32),
            (160, 2, 32),
            (96, 2, 32),
            (100, 2, 32),
            (72, 2, 32),
            (80, 1, 32),
            (320, 4, 16),
        ):
            for dtype in ("f16", "bf16"):
                spec = MatmulSpec(m, n, k, dtype=dtype, epilogue="bias-relu")
                mma = KernelConfig(
                    tile_sizes=(min(m, 64), min(n, 64)),
                    reduction_tile_sizes=(tile,),
                    reassociate=True,
                    stages=3,
                    mma=True,
                    warp_grid=(2, 2) if m > 28 else (1, 2),
                    stage_output=True,
                    splits=splits,
                )
                simt = KernelConfig(
                    tile_sizes=(min(m, 32), min(n, 32)),
                    reduction_tile_sizes=(tile,),
                    splits=splits,
                )
                out += [Pair(spec, mma), Pair(spec, simt)]
    for c in (96, 160):
        spec = ConvSpec(
            2, c, 7, 7, 64, 3, 3, padding=1, dtype="f16", layout="nhwc",
            filter_layout="rsck", epilogue="bias-relu",
        )  # fmt: skip
        base = config_for(spec)
        tiled = dataclasses.replace(
            base,
            reduction_tile_sizes=(*base.reduction_tile_sizes[:-1], 32),
            splits=2,
        )
        out.append(Pair(spec, tiled))
        if tiled.mma:
            simt = dataclasses.replace(
                tiled, mma=False, stage_output=False, unroll_taps=False
            )
            out.append(Pair(spec, simt))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the outcomes here")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    run = not args.compile_only
    if run and not cuda_available():
        print("no GPU: use --compile-only", file=sys.stderr)
        return 2
    arch = current_arch() if run else "sm_90"
    outcomes = []
    for pair in pairs():
        compiled = compile_pair(pair, arch)
        outcome = check_on_gpu(compiled, seed=args.seed) if run else compiled
        outcome.extra.pop("kernel", None)
        outcomes.append(outcome)
        error = "" if outcome.error is None else f"{outcome.error:.2e}"
        print(f"{outcome.status:9} {error:>9}  {pair.describe()}  {outcome.reason}")
    counts = Counter((o.pair.route(), o.status) for o in outcomes)
    print(f"\n{'route':8} {'status':9} pairs")
    for (route, status), n in sorted(counts.items()):
        print(f"{route:8} {status:9} {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([o.to_json() for o in outcomes], f, indent=1)
    good = {CORRECT} if run else {COMPILED}
    return 0 if all(o.status in good for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
