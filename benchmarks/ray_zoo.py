"""Tune a model zoo through Ray on this machine's GPUs, with 1, 2, ... of them, and
compare with `affinec tune` without Ray.

    scripts/gpu_python.sh benchmarks/ray_zoo.py --out $OUT/ray-zoo --gpus 1 2 4 8
    python benchmarks/ray_zoo.py --out /tmp/zoo --measure cost-model --gpus 1   # no GPU

For each number of GPUs, a local Ray cluster is started with that many (and every
CPU of the machine), and the zoo (`--networks` at `--batch`, their distinct
convolutions) is tuned from an empty cache by `affinec.tuning.distributed`. The
scaling is the wall time with one GPU over the time with n, divided by n. With
`--compare K`, the first K shapes are tuned again without Ray (`tune_specs`, the same
options) and each shape's best is set beside the one Ray found.

Written under `--out`: `cache-<n>gpu.json` (with its journal of measurements) per
run, `summary.json`, and `table.txt`, the table printed last.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from affinec.frontend.networks import NETWORKS, network
from affinec.tuning import TuneOptions, TuningCache
from affinec.tuning.distributed import COST_MODEL, GPU, require_ray, tune_specs_ray
from affinec.tuning.many import tune_specs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--networks", nargs="+", default=["resnet50", "mobilenet_v2", "vgg16"],
        choices=NETWORKS,
    )  # fmt: skip
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument("--dtype", default="f16")
    parser.add_argument("--gpus", nargs="+", type=int, default=[1])
    parser.add_argument("--measure", choices=(GPU, COST_MODEL), default=GPU)
    parser.add_argument("--max-candidates", type=int, default=60)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--explore", type=int, default=4)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    parser.add_argument("--compare", type=int, default=0)
    args = parser.parse_args()
    ray = require_ray()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    specs = list(
        dict.fromkeys(
            layer.spec
            for name in args.networks
            for batch in args.batch
            for layer in network(name, batch, args.dtype)
        )
    )
    options = TuneOptions(
        top=args.top, explore=args.explore, max_candidates=args.max_candidates,
        progress=False,
    )  # fmt: skip
    runs = []
    zoos = {}
    for gpus in args.gpus:
        ray.init(
            num_gpus=gpus if args.measure == GPU else 0,
            include_dashboard=False,
            log_to_driver=False,
        )
        cache = TuningCache(out / f"cache-{gpus}gpu.json")
        start = time.monotonic()
        zoo = tune_specs_ray(
            specs, options, cache, measure=args.measure, timeout_s=args.timeout_s,
            measurers=gpus, force=True,
        )  # fmt: skip
        seconds = time.monotonic() - start
        ray.shutdown()
        print(zoo.table(), flush=True)
        zoos[gpus] = zoo
        runs.append({"gpus": gpus, "seconds": seconds, "table": zoo.table()})
    base = next((r for r in runs if r["gpus"] == 1), None)
    lines = [f"{len(specs)} distinct convolutions of {', '.join(args.networks)} at "
             f"batch {', '.join(map(str, args.batch))} ({args.dtype}), measured: "
             f"{args.measure}",
             f"{'GPUs':>4} {'seconds':>8} {'scaling':>8}"]  # fmt: skip
    for r in runs:
        scaling = base["seconds"] / r["seconds"] / r["gpus"] if base else None
        r["scaling"] = scaling
        text = f"{scaling:8.2f}" if scaling is not None else f"{'-':>8}"
        lines.append(f"{r['gpus']:>4} {r['seconds']:8.1f} {text}")
    comparison = []
    if args.compare and args.gpus:
        from affinec.tuning.measure import GpuMeasurer, gpu_name
        from affinec.tuning.model_measure import COST_MODEL_GPU, CostModelMeasurer

        zoo = zoos[args.gpus[0]]
        model = args.measure == COST_MODEL
        alone = tune_specs(
            specs[: args.compare],
            options,
            TuningCache(out / "cache-without-ray.json"),
            budget_s=1e9,
            gpu=COST_MODEL_GPU if model else gpu_name(),
            measurer_for=CostModelMeasurer if model else GpuMeasurer,
            force=True,
        )
        lines.append(f"{'shape':<60} {'ray ms':>9} {'alone ms':>9} same config")
        for mine, theirs in zip(zoo.shapes, alone, strict=False):
            a, b = mine.entry, theirs.entry
            same = a is not None and b is not None and a.config == b.config
            comparison.append(
                {"spec": mine.spec.to_text(), "ray_ms": a.ms if a else None,
                 "alone_ms": b.ms if b else None, "same_config": same}
            )  # fmt: skip
            lines.append(
                f"{mine.spec.to_text()[:60]:<60} "
                f"{a.ms if a else float('nan'):9.4f} "
                f"{b.ms if b else float('nan'):9.4f} {same}"
            )
    table = "\n".join(lines)
    (out / "summary.json").write_text(
        json.dumps({"runs": runs, "comparison": comparison}, indent=1)
    )
    (out / "table.txt").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
