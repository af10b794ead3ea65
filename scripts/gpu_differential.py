"""Random convolutions x configurations from the tuner's space, compiled in a process
pool and run on this GPU against float64 (`affinec.tuning.differential`).

    scripts/gpu_python.sh scripts/gpu_differential.py --pairs 1200 --seed 1 \
        --json /tmp/affinec-gpu/differential.json

Prints a line per wrong or failed pair, then a table of outcomes by dtype; exits 1 if
any pair was wrong or failed. Without a GPU, `--compile-only` compiles them all
(the passes' static checks still apply) and counts refusals.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from affinec.backend.runtime import cuda_available, current_arch
from affinec.tuning.differential import (
    COMPILED,
    CORRECT,
    FAILED,
    REFUSED,
    WRONG,
    check_on_gpu,
    compile_pair,
    random_pairs,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0, help="compiler processes")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument(
        "--arch",
        help="the chip to draw configurations for and compile to (default: this "
        "GPU's; sm_90 without one); sm_90a adds the wgmma route's",
    )
    parser.add_argument(
        "--wgmma-only",
        action="store_true",
        help="only the wgmma route's configurations (sm_90a)",
    )
    parser.add_argument("--json", help="write every outcome here")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error(f"--pairs must be at least 1, got {args.pairs}")
    run = not args.compile_only
    if run and not cuda_available():
        parser.error("no CUDA GPU: use --compile-only")
    arch = args.arch or (current_arch() if run else "sm_90")
    if args.wgmma_only and arch != "sm_90a":
        parser.error("--wgmma-only draws the wgmma route's kernels: --arch sm_90a")
    pairs = random_pairs(args.seed, args.pairs, arch=arch, wgmma_only=args.wgmma_only)
    import os

    jobs = args.jobs or max(1, (os.cpu_count() or 2) - 1)
    outcomes = []
    with ProcessPoolExecutor(jobs) as pool:
        for k, compiled in enumerate(
            pool.map(compile_pair, pairs, [arch] * len(pairs))
        ):
            outcome = (
                check_on_gpu(compiled, seed=args.seed * 100003 + k) if run else compiled
            )
            outcome.extra.pop("kernel", None)
            outcomes.append(outcome)
            if outcome.status in (WRONG, FAILED):
                print(
                    f"{outcome.status}: {outcome.pair.describe()}: "
                    f"{outcome.error if outcome.error is not None else outcome.reason}",
                    flush=True,
                )
    table: dict[str, Counter] = {}
    for o in outcomes:
        table.setdefault(o.pair.spec.dtype, Counter())[o.status] += 1
    columns = [CORRECT, WRONG, FAILED, REFUSED] if run else [COMPILED, FAILED, REFUSED]
    print(f"{'dtype':6s}" + "".join(f"{c:>10s}" for c in columns))
    for dtype, counts in sorted(table.items()):
        print(f"{dtype:6s}" + "".join(f"{counts[c]:10d}" for c in columns))
    total = Counter(o.status for o in outcomes)
    print(f"{'all':6s}" + "".join(f"{total[c]:10d}" for c in columns))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "seed": args.seed,
                    "arch": arch,
                    "outcomes": [o.to_json() for o in outcomes],
                },
                f,
                indent=1,
            )
    return 1 if total[WRONG] or total[FAILED] else 0


if __name__ == "__main__":
    sys.exit(main())
