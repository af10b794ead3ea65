"""Whole networks' convolutions, ours against cuDNN in the same run: per layer and the
model's total weighted by how often it runs each shape (`affinec.frontend.networks`).

    scripts/gpu_python.sh benchmarks/networks.py --network resnet50 vgg16 \
        --batch 1 32 --json /tmp/affinec-gpu/networks.json --plot /tmp/affinec-gpu/networks.png

Each distinct shape is compiled with config_for's configuration (the tuning cache's
with `--tuned`), checked against torch's float64 convolution and timed with the
method of `affinec.driver.benchmark` (kernel time: launches batched between CUDA events,
inputs rotating past the L2 cache); cuDNN runs the same shape on the same inputs.
Prints a table per network and batch, the totals last; writes JSON and, with `--plot`,
a chart of cuDNN's time over ours per layer. `--compile-only` (no GPU needed)
compiles every layer and reports what ptxas says.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from affinec.driver.benchmark import bench_conv, device_description, geomean
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.frontend.networks import NETWORKS, network


def _compiled(spec, tuned: bool, arch: str):
    config = None
    if tuned:
        from affinec.tuning.cache import TuningCache, tuning_key
        from affinec.tuning.measure import gpu_name

        entry = TuningCache().lookup(tuning_key(spec), gpu_name())
        config = entry.config if entry is not None else None
    return compile_to_ptx(spec, config or config_for(spec, arch=arch), arch=arch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", nargs="+", default=["resnet50"], choices=NETWORKS)
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--dtype", default="f16", choices=("f16", "bf16", "f32"))
    parser.add_argument(
        "--tuned", action="store_true", help="the tuning cache's configurations"
    )
    parser.add_argument(
        "--splits",
        nargs="+",
        type=int,
        default=[],
        help="also time each layer with its reduction split in N (split-K, "
        "config_for(spec, splits=N)) and keep the fastest",
    )
    parser.add_argument(
        "--flatten",
        action="store_true",
        help="also time each 1x1 layer compiled as the product of its flattened "
        "pixels (config_for(spec, flatten_pixels=True)) and keep the fastest",
    )
    parser.add_argument(
        "--wgmma",
        action="store_true",
        help="also time each layer Hopper's kernel takes (products, 1x1 layers) "
        "compiled for sm_90a with TMA and wgmma (config_for(spec, wgmma=True)) and "
        "keep the fastest",
    )
    parser.add_argument(
        "--unsplit",
        action="store_true",
        help="also time each layer whose config_for configuration splits its "
        "reduction or flattens its pixels as the spec's own grid "
        "(config_for(spec, splits=1, flatten_pixels=False)), in the same run, and "
        "print that total beside config_for's (the filling rule before and after)",
    )
    parser.add_argument(
        "--arch",
        choices=("sm_80", "sm_90", "sm_90a"),
        help="compile and choose configurations for this architecture (default: "
        "the current GPU's; sm_90a takes Hopper's instructions where config_for "
        "chooses them)",
    )
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args(argv)
    if any(b < 1 for b in args.batch):
        parser.error("--batch takes sizes of at least 1")
    from affinec.backend.runtime import cuda_available, current_arch

    if not args.compile_only and not cuda_available():
        parser.error("no CUDA GPU: use --compile-only")
    arch = args.arch or (current_arch() if not args.compile_only else "sm_90")
    results = []
    for name in args.network:
        for batch in args.batch:
            rows = []
            variants = [(f"splits={n}", {"splits": n}) for n in args.splits]
            if args.flatten:
                variants.append(("flattened", {"flatten_pixels": True}))
            if args.wgmma:
                variants.append(("wgmma", {"wgmma": True}))
                variants += [
                    (f"wgmma splits={n}", {"wgmma": True, "splits": n})
                    for n in args.splits
                ]
            for layer in network(name, batch, args.dtype):
                start = time.perf_counter()
                compiled = _compiled(layer.spec, args.tuned, arch)
                seconds = time.perf_counter() - start
                row = {"layer": layer.name, "count": layer.count, "compile_s": seconds}
                if args.compile_only:
                    r = compiled.resources()
                    row |= {"registers": r.registers, "spills": r.spill_stores}
                    print(f"{name} {batch:3d} {layer.name:34s} {seconds:5.2f} s "
                          f"{r.registers} regs", flush=True)  # fmt: skip
                    for label, knobs in variants:
                        other = _variant(layer.spec, label, knobs, arch, row)
                        if other is None:
                            continue
                        blocks = [launch.grid for launch in other.launches]
                        print(f"    {label}: grids {blocks}, "
                              f"{other.resources().registers} regs")  # fmt: skip
                else:
                    bench = bench_conv(layer.name, layer.spec, compiled=compiled)
                    if args.unsplit:
                        row["unsplit_ms"] = _unsplit_ms(layer, compiled, bench, arch)
                    bench, variant = _fastest(layer, bench, variants, arch, row)
                    row |= {
                        "variant": variant,
                        "ours_ms": bench.ours_ms,
                        "cudnn_ms": bench.cudnn_ms,
                        "ratio": bench.ratio,
                        "error": bench.error,
                        "config": bench.config,
                        "note": bench.note,
                    }
                    ratio = f"{bench.ratio:6.2f}" if bench.ratio else "     -"
                    ours = f"{bench.ours_ms:8.4f}" if bench.ours_ms else "       -"
                    print(f"{name} {batch:3d} {layer.name:34s} x{layer.count} "
                          f"{ours} {bench.cudnn_ms:8.4f} {ratio} {bench.note}",
                          flush=True)  # fmt: skip
                rows.append(row | {"spec": layer.spec.to_text()})
            results.append({"network": name, "batch": batch, "layers": rows})
    _print_skipped(results)
    if args.compile_only:
        return 0
    print()
    print(f"{'network':10s} {'batch':>5s} {'ours ms':>9s} {'cuDNN ms':>9s} "
          f"{'cuDNN/ours':>10s} {'worst layer':>11s}")  # fmt: skip
    ok = True
    for res in results:
        rows = res["layers"]
        if any(r["ours_ms"] is None for r in rows):
            ok = False
            print(f"{res['network']:10s} {res['batch']:5d}  a layer was wrong")
            continue
        ours = sum(r["count"] * r["ours_ms"] for r in rows)
        cudnn = sum(r["count"] * r["cudnn_ms"] for r in rows)
        worst = min(r["ratio"] for r in rows)
        res |= {"ours_ms": ours, "cudnn_ms": cudnn, "ratio": cudnn / ours,
                "worst_ratio": worst,
                "geomean_ratio": geomean([r["ratio"] for r in rows])}  # fmt: skip
        print(f"{res['network']:10s} {res['batch']:5d} {ours:9.3f} {cudnn:9.3f} "
              f"{cudnn / ours:10.3f} {worst:11.3f}")  # fmt: skip
        if args.unsplit and all(r.get("unsplit_ms") for r in rows):
            unsplit = sum(r["count"] * r["unsplit_ms"] for r in rows)
            worst_unsplit = min(r["cudnn_ms"] / r["unsplit_ms"] for r in rows)
            res |= {"unsplit_ms": unsplit, "unsplit_ratio": cudnn / unsplit,
                    "unsplit_worst_ratio": worst_unsplit}  # fmt: skip
            print(f"{'  unsplit':10s} {res['batch']:5d} {unsplit:9.3f} {cudnn:9.3f} "
                  f"{cudnn / unsplit:10.3f} {worst_unsplit:11.3f}")  # fmt: skip
    info = device_description()
    print(
        f"{info['gpu']}, cuDNN {info['cudnn']}, torch {info['torch']}, {info['date']}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**info, "dtype": args.dtype, "results": results}, f, indent=1)
    if args.plot:
        _plot(results, args.plot)
    return 0 if ok else 1


def _variant(spec, label: str, knobs: dict, arch: str, row: dict):
    """`spec` compiled as the variant `label` (`config_for` knobs: a split
    reduction, the flattened pixels, Hopper's kernel), or None where `config_for` or
    the passes refuse it for this layer (fewer channel steps than splits, not a 1x1
    layer, ...): the refusal is printed and kept in `row["skipped"]`, never raised."""
    from affinec.base.diagnostics import OpError

    target = _variant_arch(knobs, arch)
    try:
        config = config_for(spec, arch=target, **knobs)
        return compile_to_ptx(spec, config, arch=target)
    except (ValueError, OpError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        row.setdefault("skipped", {})[label] = reason
        print(f"    {label}: skipped ({reason})", flush=True)
        return None


def _unsplit_ms(layer, compiled, plain, arch: str) -> float | None:
    """The layer's time on the spec's own grid (`config_for(spec, splits=1,
    flatten_pixels=False)`): `plain`'s where config_for chose that already, else
    that configuration compiled, checked and timed in this run."""
    config = config_for(layer.spec, arch=arch, splits=1, flatten_pixels=False)
    if config == compiled.config:
        return plain.ours_ms
    unsplit = compile_to_ptx(layer.spec, config, arch=arch)
    bench = bench_conv(layer.name, layer.spec, compiled=unsplit)
    print(f"    unsplit: {bench.ours_ms} ms {bench.note}", flush=True)
    return bench.ours_ms


def _fastest(layer, plain, variants: list[tuple[str, dict]], arch: str, row: dict):
    """The fastest of `plain` and the layer compiled as each of `variants` (label,
    `config_for` knobs) where the layer allows it, and the winner's label ("plain");
    a variant refused for the layer is skipped and named (`_variant`)."""
    best, best_label = plain, "plain"
    for label, knobs in variants:
        compiled = _variant(layer.spec, label, knobs, arch, row)
        if compiled is None:
            continue
        bench = bench_conv(layer.name, layer.spec, compiled=compiled)
        print(f"    {label}: {bench.ours_ms} ms {bench.note}", flush=True)
        if bench.ours_ms is not None and (
            best.ours_ms is None or bench.ours_ms < best.ours_ms
        ):
            best, best_label = bench, label
    return best, best_label


def _print_skipped(results: list[dict]) -> None:
    """The variants refused for some layers, each with how many layers and why."""
    skipped: dict[str, list[str]] = {}
    for res in results:
        for row in res["layers"]:
            for label, reason in row.get("skipped", {}).items():
                skipped.setdefault(label, []).append(f"{row['layer']}: {reason}")
    for label, reasons in skipped.items():
        print(f"{label}: skipped on {len(reasons)} layers (first: {reasons[0]})")


def _variant_arch(knobs: dict, arch: str) -> str:
    """The chip a variant compiles for: wgmma's is sm_90a (an H100 reports sm_90;
    the `a` instructions are asked for by name)."""
    return "sm_90a" if knobs.get("wgmma") else arch


def _plot(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(12, 3.2 * len(results)))
    axes = axes if len(results) > 1 else [axes]
    for ax, res in zip(axes, results, strict=True):
        rows = res["layers"]
        ratios = [r["ratio"] or 0.0 for r in rows]
        ax.bar(
            range(len(rows)),
            ratios,
            color=["tab:green" if x >= 1 else "tab:red" for x in ratios],
        )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(
            range(len(rows)), [r["layer"] for r in rows], rotation=70, fontsize=6
        )
        ax.set_ylabel("cuDNN / ours")
        total = res.get("ratio")
        ax.set_title(f"{res['network']} batch {res['batch']}"
                     + (f": total {total:.2f}x cuDNN" if total else ""))  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
