"""Random convolutions and products x configurations from the tuner's space, compiled
and run on this GPU against float64 in a pool of processes (`affinec.tuning.differential`):
every route (SIMT, mma.sync, the coalesced k, Hopper's wgmma on sm_90a: the tuner's
`wgmma` and `wgmma-pass` kernels, and the routes its space does not offer, each its
own row: `wgmma-taps-ss` and `wgmma-taps-ss-rule`, a convolution's box of pixels by
descriptor, `warp-specialize`) and every knob (split-K, flattened pixels, groups,
depthwise, residuals, any batch run at another batch, bf16 on torch tensors).

    scripts/gpu_python.sh scripts/gpu_differential.py --pairs 3000 --seed 1 \\
        --json /tmp/affinec-gpu/differential.json

Prints a line per wrong or failed pair, then a table of outcomes by route and knob (a
pair counts under its route and under each knob it exercises) and by dtype; exits 1 if
any pair was wrong or failed. Without a GPU, `--compile-only` compiles them all (the
passes' static checks still apply) and counts refusals; `--draw-only` only draws them
and counts them by route and knob.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from affinec.backend.runtime import cuda_available, current_arch
from affinec.tuning.differential import (
    COMPILED,
    CORRECT,
    FAILED,
    REFUSED,
    WRONG,
    Pair,
    check_on_gpu,
    compile_pair,
    random_pairs,
)

CHUNK = 50
"""Pairs drawn a task: drawing (the search space of each spec) runs in the pool too."""


def _draw(args: tuple[int, int, str, bool]) -> list[Pair]:
    seed, count, arch, wgmma_only = args
    return random_pairs(seed, count, arch=arch, wgmma_only=wgmma_only)


def _compile_and_check(task: tuple[Pair, str, int, bool]):
    """One pair compiled and, with `run`, checked on the GPU in this process: the
    driver's loading of each kernel (its PTX compiled for the GPU) runs in every
    worker at once, not one kernel after another in the parent."""
    pair, arch, seed, run = task
    compiled = compile_pair(pair, arch)
    outcome = check_on_gpu(compiled, seed=seed) if run else compiled
    outcome.extra.pop("kernel", None)
    return outcome


def draw_pairs(
    seed: int, count: int, arch: str, wgmma_only: bool, pool: ProcessPoolExecutor
) -> list[Pair]:
    """`count` pairs in chunks of `CHUNK`, each its own seed derived from `seed`."""
    tasks = [
        (seed * 100_003 + i, min(CHUNK, count - start), arch, wgmma_only)
        for i, start in enumerate(range(0, count, CHUNK))
    ]
    return [pair for chunk in pool.map(_draw, tasks) for pair in chunk]


WIDTH = 22
"""The table's first column: the longest route's name and a knob's indent."""

ROUTES = ["simt", "mma", "coalesced", "wgmma", "wgmma-pass"]
"""The table's first rows, in this order; the other routes after them by name."""


def _order(by_route: dict[str, Counter]) -> list[str]:
    return [r for r in ROUTES if r in by_route] + sorted(
        r for r in by_route if r not in ROUTES
    )


def _print_draw(pairs: list[Pair], arch: str, seconds: float) -> int:
    """The pairs drawn by route (and, indented under it, the knobs of its pairs) and
    by dtype."""
    by_route: dict[str, Counter] = {}
    for p in pairs:
        by_route.setdefault(p.route(), Counter())["pairs"] += 1
        for k in p.knobs():
            by_route[p.route()][k] += 1
    print(f"{len(pairs)} pairs drawn on {arch} in {seconds:.0f} s")
    print(f"{'route / knob':{WIDTH}s}{'pairs':>10s}")
    for route in _order(by_route):
        counts = by_route[route]
        print(f"{route:{WIDTH}s}{counts['pairs']:10d}")
        for knob in sorted(k for k in counts if k != "pairs"):
            print(f"{'  ' + knob:{WIDTH}s}{counts[knob]:10d}")
    for dtype, n in sorted(Counter(p.spec.dtype for p in pairs).items()):
        print(f"{dtype:{WIDTH}s}{n:10d}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0, help="compiler processes")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument(
        "--draw-only",
        action="store_true",
        help="draw the pairs and count them by route and knob, compiling none",
    )
    parser.add_argument(
        "--arch",
        help="the chip to draw configurations for and compile to (default: this "
        "GPU's, sm_90a on an sm_90 GPU so that Hopper's wgmma route is drawn too; "
        "sm_90a without one)",
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
    run = not (args.compile_only or args.draw_only)
    if run and not cuda_available():
        parser.error("no CUDA GPU: use --compile-only")
    arch = args.arch or (current_arch() if run else "sm_90a")
    if arch == "sm_90" and not args.arch:
        arch = "sm_90a"
    if args.wgmma_only and arch != "sm_90a":
        parser.error("--wgmma-only draws the wgmma route's kernels: --arch sm_90a")
    jobs = args.jobs or max(1, (os.cpu_count() or 2) - 1)
    start = time.perf_counter()
    outcomes = []
    # each worker runs its own kernels on the GPU: spawned, not forked, so that none
    # inherits this process's CUDA state
    context = multiprocessing.get_context("spawn" if run else None)
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        pairs = draw_pairs(args.seed, args.pairs, arch, args.wgmma_only, pool)
        drawn = time.perf_counter() - start
        if args.draw_only:
            return _print_draw(pairs, arch, drawn)
        tasks = [(p, arch, args.seed * 100003 + k, run) for k, p in enumerate(pairs)]
        for outcome in pool.map(_compile_and_check, tasks, chunksize=4):
            outcomes.append(outcome)
            if outcome.status in (WRONG, FAILED):
                print(
                    f"{outcome.status}: {outcome.pair.describe()}: "
                    f"{outcome.error if outcome.error is not None else outcome.reason}",
                    flush=True,
                )
    seconds = time.perf_counter() - start
    columns = [CORRECT, WRONG, FAILED, REFUSED] if run else [COMPILED, FAILED, REFUSED]
    by_route: dict[str, Counter] = {}
    by_dtype: dict[str, Counter] = {}
    for o in outcomes:
        for row in (o.pair.route(), *(f"  {k}" for k in o.pair.knobs())):
            by_route.setdefault(row, Counter())[o.status] += 1
        by_dtype.setdefault(o.pair.spec.dtype, Counter())[o.status] += 1
    total = Counter(o.status for o in outcomes)
    order = _order(by_route)
    print(
        f"{len(outcomes)} pairs on {arch} in {seconds:.0f} s (drawn in {drawn:.0f} s, "
        f"{jobs} compiler processes)"
    )
    print(f"{'route / knob':{WIDTH}s}" + "".join(f"{c:>10s}" for c in columns))
    for row in order:
        print(f"{row:{WIDTH}s}" + "".join(f"{by_route[row][c]:10d}" for c in columns))
    for dtype in sorted(by_dtype):
        print(
            f"{dtype:{WIDTH}s}" + "".join(f"{by_dtype[dtype][c]:10d}" for c in columns)
        )
    print(f"{'all':{WIDTH}s}" + "".join(f"{total[c]:10d}" for c in columns))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "seed": args.seed,
                    "arch": arch,
                    "seconds": round(seconds, 1),
                    "totals": dict(total),
                    "by_route": {r: dict(by_route[r]) for r in order},
                    "outcomes": [o.to_json() for o in outcomes],
                },
                f,
                indent=1,
            )
    return 1 if total[WRONG] or total[FAILED] else 0


if __name__ == "__main__":
    sys.exit(main())
