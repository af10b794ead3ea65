"""A convolution of any batch against the same configuration compiled for a fixed
batch, and cuDNN, in the same run.

    scripts/gpu_python.sh benchmarks/dynamic_batch.py --network resnet50 \
        --batch 1 8 15 32 --json /tmp/affinec-gpu/dynamic_batch.json

For each distinct layer of the network and each batch B, the configuration is
`config_for`'s for the layer of any batch configured at B (one image a block); the
layer is compiled with it twice, for the fixed batch B and for any batch, and both
are checked against float64 and timed (kernel time, as `affinec.driver.benchmark`). A third
column runs the one kernel of any batch compiled at the first batch given, at every
batch (what a user of one compiled kernel gets). The table shows the kernels' times,
cuDNN's, and the dynamic kernel's time over the fixed one's (the target is
1.10 at most). Exits 1 if any kernel was wrong against float64 (a time of n/a, the
layer named). `--compile-only` (no GPU needed) compiles both and compares what ptxas
reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from affinec.driver.benchmark import bench_conv, device_description, geomean
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.frontend.networks import NETWORKS, network


def _row(name: str, batch: int, spec, once, arch: str, compile_only: bool) -> dict:
    any_batch = replace(spec, n=batch, dynamic_batch=True)
    fixed_spec = replace(spec, n=batch)
    config = config_for(any_batch)
    fixed = compile_to_ptx(fixed_spec, config, arch=arch)
    dynamic = compile_to_ptx(any_batch, config, arch=arch)
    row = {
        "layer": name,
        "batch": batch,
        "spec": any_batch.to_text(),
        "config": config.describe(),
        "fixed_registers": fixed.resources().registers,
        "dynamic_registers": dynamic.resources().registers,
    }
    if compile_only:
        return row
    f = bench_conv(name, fixed_spec, compiled=fixed)
    d = bench_conv(name, fixed_spec, compiled=dynamic)
    o = bench_conv(name, fixed_spec, compiled=once)
    row.update(
        fixed_ms=f.ours_ms,
        dynamic_ms=d.ours_ms,
        one_kernel_ms=o.ours_ms,
        cudnn_ms=f.cudnn_ms,
        errors=[f.error, d.error, o.error],
        notes=[x.note for x in (f, d, o) if x.note],
        wrong=[
            label
            for label, x in (("fixed", f), ("any batch", d), ("one kernel", o))
            if x.ours_ms is None
        ],
    )
    return row


def _table(rows: list[dict]) -> str:
    def ms(x) -> str:
        return f"{x:8.4f}" if x is not None else "     n/a"

    lines = [
        f"{'layer':34} {'B':>3} {'fixed':>8} {'any B':>8} {'one':>8} {'cuDNN':>8} "
        f"{'any/fixed':>9}"
    ]
    for r in rows:
        ratio = (
            r["dynamic_ms"] / r["fixed_ms"]
            if r.get("dynamic_ms") and r.get("fixed_ms")
            else None
        )
        lines.append(
            f"{r['layer'][:34]:34} {r['batch']:3d} {ms(r.get('fixed_ms'))} "
            f"{ms(r.get('dynamic_ms'))} {ms(r.get('one_kernel_ms'))} "
            f"{ms(r.get('cudnn_ms'))} "
            + (f"{ratio:9.3f}" if ratio is not None else "      n/a")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="resnet50", choices=NETWORKS)
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 8, 15, 32])
    parser.add_argument("--layers", type=int, default=0, help="the first N (0: all)")
    parser.add_argument("--arch", default=None, help="default: the GPU's")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if any(b < 1 for b in args.batch):
        parser.error("every --batch must be at least 1")
    arch = args.arch
    if arch is None:
        from affinec.backend.runtime import current_arch

        arch = "sm_90" if args.compile_only else current_arch()
    layers = network(args.network, args.batch[0])
    if args.layers:
        layers = layers[: args.layers]
    rows = []
    for layer in layers:
        first = replace(layer.spec, dynamic_batch=True)
        once = None if args.compile_only else compile_to_ptx(first, arch=arch)
        for batch in args.batch:
            rows.append(
                _row(layer.name, batch, layer.spec, once, arch, args.compile_only)
            )
            print(_table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(_table(rows))
    ratios = [
        r["dynamic_ms"] / r["fixed_ms"]
        for r in rows
        if r.get("dynamic_ms") and r.get("fixed_ms")
    ]
    if ratios:
        print(
            f"any batch over fixed batch: geomean {geomean(ratios):.3f}, "
            f"worst {max(ratios):.3f} ({len(ratios)} kernels)"
        )
    wrong = [r for r in rows if r.get("wrong")]
    for r in wrong:
        print(f"WRONG: {r['layer']} at batch {r['batch']}: {', '.join(r['wrong'])} "
              f"(errors {r['errors']})")  # fmt: skip
    if not args.compile_only:
        print(f"{len(rows) * 3 - sum(len(r['wrong']) for r in wrong)} of "
              f"{len(rows) * 3} kernels right against float64")  # fmt: skip
    if args.json:
        extra = {} if args.compile_only else {"device": device_description()}
        with open(args.json, "w") as f:
            json.dump({"rows": rows, **extra}, f, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
