"""Named configuration variants of whole networks' layers, each layer's variants
against cuDNN in the same run: the measurements a configuration rule is fitted on.

    scripts/gpu_python.sh benchmarks/layer_sweep.py --network vgg16 mobilenet_v2 \
        --batch 32 --json /tmp/affinec-gpu/sweep_fit.json

A variant is `config_for`'s configuration with some knobs changed
(`affinec.tuning.neighbours.VARIANTS`: a name, `config_for`'s own options such as
`flatten_pixels`, then `KernelConfig` fields). Every (layer, variant) is compiled in a process pool (a variant the
passes or `config_for` refuse for a layer is named and skipped), then checked
against float64 and timed with `affinec.driver.benchmark.bench_conv` — kernel time,
cuDNN on the same inputs. Prints each layer's variants and which was fastest,
then a table: each variant's network total where every layer took it (the layers
it was refused on keep `config_for`'s), and the per-layer oracle.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from affinec.driver.benchmark import bench_conv, device_description
from affinec.driver.compiler import compile_to_ptx
from affinec.frontend.networks import NETWORKS, network
from affinec.tuning.neighbours import VARIANTS, variant_config


def _compile(job: tuple[str, object, str, str]):
    """One (layer, variant): its compiled kernel, or the reason it was refused."""
    layer_name, spec, variant, arch = job
    start = time.perf_counter()
    try:
        config = variant_config(spec, variant, arch)
        compiled = compile_to_ptx(spec, config, arch=arch)
    except Exception as e:  # refused for this layer: named, the others go on
        reason = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        return layer_name, variant, None, f"{type(e).__name__}: {reason[:160]}"
    compiled = dataclasses.replace(compiled, module=None, llvm_ir="")  # picklable
    return layer_name, variant, compiled, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", nargs="+", default=["resnet50"], choices=NETWORKS)
    parser.add_argument("--batch", nargs="+", type=int, default=[32])
    parser.add_argument(
        "--variant", nargs="+", default=list(VARIANTS), choices=list(VARIANTS)
    )
    parser.add_argument(
        "--layers", nargs="+", help="only the layers whose names contain one of these"
    )
    parser.add_argument("--jobs", type=int, default=0, help="compiler processes")
    parser.add_argument("--json")
    parser.add_argument(
        "--compile-only", action="store_true", help="compile, say what is refused"
    )
    parser.add_argument(
        "--arch", help="the target (default: the GPU's; sm_90 with --compile-only)"
    )
    args = parser.parse_args(argv)
    if "config_for" not in args.variant:
        args.variant.insert(0, "config_for")
    from affinec.backend.runtime import cuda_available, current_arch

    if not args.compile_only and not cuda_available():
        parser.error("no CUDA GPU: use --compile-only")
    arch = args.arch or ("sm_90" if args.compile_only else current_arch())
    jobs = args.jobs or max(1, (os.cpu_count() or 2) - 1)
    results = []
    for name in args.network:
        for batch in args.batch:
            layers = [
                x
                for x in network(name, batch)
                if not args.layers or any(part in x.name for part in args.layers)
            ]
            work = [(x.name, x.spec, v, arch) for x in layers for v in args.variant]
            built: dict[tuple[str, str], object] = {}
            refused: dict[tuple[str, str], str] = {}
            with ProcessPoolExecutor(jobs) as pool:
                for layer_name, variant, compiled, extra in pool.map(_compile, work):
                    if compiled is None:
                        refused[layer_name, variant] = extra
                    else:
                        built[layer_name, variant] = compiled
            if args.compile_only:
                for (layer_name, variant), reason in refused.items():
                    print(f"{name} {batch} {layer_name}: {variant} refused: {reason}")
                print(f"{name} {batch}: {len(built)} compiled, {len(refused)} refused")
                continue
            rows = []
            for layer in layers:
                row = {"layer": layer.name, "count": layer.count,
                       "spec": layer.spec.to_text(), "variants": {}}  # fmt: skip
                for variant in args.variant:
                    if (layer.name, variant) in refused:
                        row["variants"][variant] = {
                            "refused": refused[layer.name, variant]
                        }
                        continue
                    compiled = built[layer.name, variant]
                    plain = built.get((layer.name, "config_for"))
                    if variant != "config_for" and compiled.config == plain.config:
                        row["variants"][variant] = row["variants"]["config_for"]
                        continue  # config_for's own: timed once
                    bench = bench_conv(layer.name, layer.spec, compiled=compiled)
                    row["variants"][variant] = {
                        "ms": bench.ours_ms,
                        "config": bench.config,
                        "registers": bench.registers,
                        "block": bench.block,
                        "grid": [list(r.grid) for r in compiled.launches],
                        "note": bench.note,
                    }
                    row.setdefault("cudnn_ms", bench.cudnn_ms)
                timed = {v: m["ms"] for v, m in row["variants"].items() if m.get("ms")}
                best = min(timed, key=timed.get) if timed else None
                row["fastest"] = best
                cells = " ".join(
                    f"{v}={m['ms'] * 1e3:.1f}" if m.get("ms") else f"{v}=-"
                    for v, m in row["variants"].items()
                )
                print(f"{name} {batch:3d} {layer.name:34s} x{layer.count} cuDNN "
                      f"{row['cudnn_ms'] * 1e3:.1f} us | {cells} | {best}",
                      flush=True)  # fmt: skip
                rows.append(row)
            results.append({"network": name, "batch": batch, "layers": rows})
    if args.compile_only:
        return 0
    print()
    print(f"{'network':12s} {'batch':>5s} {'variant':20s} {'ours ms':>8s} "
          f"{'cuDNN ms':>8s} {'cuDNN/ours':>10s}")  # fmt: skip
    for res in results:
        cudnn = sum(r["count"] * r["cudnn_ms"] for r in res["layers"])
        totals = {}
        for variant in [*args.variant, "oracle"]:
            total = 0.0
            for r in res["layers"]:
                pick = r["fastest"] if variant == "oracle" else variant
                m = r["variants"].get(pick, {})
                ms = m.get("ms") or r["variants"]["config_for"].get("ms")
                total += r["count"] * (ms or float("nan"))
            totals[variant] = total
            print(f"{res['network']:12s} {res['batch']:5d} {variant:20s} "
                  f"{total:8.3f} {cudnn:8.3f} {cudnn / total:10.3f}")  # fmt: skip
        res |= {"cudnn_ms": cudnn, "totals": totals}
    info = device_description()
    print(
        f"{info['gpu']}, cuDNN {info['cudnn']}, torch {info['torch']}, {info['date']}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**info, "variants": {v: [VARIANTS[v][0], {
                k: list(x) if isinstance(x, tuple) else x
                for k, x in VARIANTS[v][1].items()}] for v in args.variant},
                "results": results}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
