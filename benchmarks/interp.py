"""How fast the interpreter runs each level of the pipeline (the targets: the
naive level at ≥ 10 million multiply-adds a second, the gpu level at ≥ 1 million).

    python benchmarks/interp.py [--repeat 5] [--json benchmarks/results/interp.json]

Prints two tables and writes JSON. First, the naive level: the f32 convolution N=1,
C=8, H=W=8, K=8, 3×3, pad 1 (36,864 multiply-adds), the same in f16, and a larger
NHWC one, each run as lanes (`affinec.interpreter.lanes`, the default) and iteration
by iteration. Then one convolution (N=1, C=K=16, 8×8, 3×3, pad 1: 147,456
multiply-adds) through `config_for`'s pipeline on both routes — the tensor cores
(f16, NHWC/RSCK) and SIMT (f32) — interpreted at four levels: naive, tiled (after
the affine passes), gpu (after `gpu-kernel-outlining`) and llvm (the end), the
last two with a block's threads in lockstep where the kernel allows it, and thread
by thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from machine import machine

from affinec.base.spec import ConvSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.pipeline_names import pass_text
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter

NAIVE = {
    "1x8x8x8 * 8x3x3 p1 f32": ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1),
    "same, f16": ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1, dtype="f16"),
    "2x16x12x12 * 16x3x3 s2 p1 nhwc": ConvSpec(
        2, 16, 12, 12, 16, 3, 3, stride=2, padding=1, layout="nhwc"
    ),
}

ROUTES = {
    "tensor cores (f16)": ConvSpec(
        1,
        16,
        8,
        8,
        16,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    ),
    "SIMT (f32)": ConvSpec(1, 16, 8, 8, 16, 3, 3, padding=1),
}

LEVELS = {"tiled": "affinec-insert-barriers", "gpu": "gpu-kernel-outlining"}
"""The pass after which each middle level is interpreted."""


def measure(
    module, spec: ConvSpec, repeat: int, lanes: bool = True, lockstep: bool = True
) -> dict:
    start = time.perf_counter()
    interpreter = Interpreter(module, lanes=lanes, lockstep=lockstep)
    decode = time.perf_counter() - start
    inputs = random_inputs(spec, np.random.default_rng(0))
    name = contraction_of(spec).name
    times = []
    for _ in range(repeat):
        out = poisoned_output(spec)
        start = time.perf_counter()
        interpreter.run(name, *inputs, out)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {
        "macs": spec.flops // 2,
        "decode_s": decode,
        "run_s_median": median,
        "run_s_all": times,
        "macs_per_s": spec.flops // 2 / median,
    }


def levels(spec: ConvSpec, repeat: int) -> dict[str, dict]:
    """The spec interpreted at the naive, tiled, gpu and llvm levels."""
    modules = {}

    def keep(p, m, _seconds) -> None:
        for level, after in LEVELS.items():
            if pass_text(p).startswith(after):
                modules[level] = m.clone()

    kernel = compile_to_ptx(spec, callback=keep)
    modules = {"naive": build(spec), **modules, "llvm": kernel.module}
    measured = {level: measure(m, spec, repeat) for level, m in modules.items()}
    # the gpu and llvm levels thread by thread too (the coroutines lockstep replaces)
    measured["gpu threads"] = measure(modules["gpu"], spec, repeat, lockstep=False)
    measured["llvm threads"] = measure(modules["llvm"], spec, repeat, lockstep=False)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default="benchmarks/results/interp.json")
    args = parser.parse_args()
    naive = {
        label: {
            "spec": spec.to_text(),
            "lanes": measure(build(spec), spec, args.repeat),
            "iterations": measure(build(spec), spec, args.repeat, lanes=False),
        }
        for label, spec in NAIVE.items()
    }
    routes = {
        label: {"spec": spec.to_text(), "levels": levels(spec, args.repeat)}
        for label, spec in ROUTES.items()
    }
    result = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "naive": naive,
        "routes": routes,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"{'naive level':<32} {'MACs':>9} {'lanes MAC/s':>13} {'iterations':>12}")
    for label, r in naive.items():
        lanes, iterations = r["lanes"], r["iterations"]
        print(
            f"{label:<32} {lanes['macs']:>9,} {lanes['macs_per_s']:>13,.0f} "
            f"{iterations['macs_per_s']:>12,.0f}"
        )
    print(
        f"\n{'MAC/s by level':<20}"
        + "".join(f"{lv:>13}" for lv in routes[next(iter(routes))]["levels"])
    )
    for label, r in routes.items():
        cells = "".join(f"{m['macs_per_s']:>13,.0f}" for m in r["levels"].values())
        print(f"{label:<20}{cells}")
    print(f"\n(median of {args.repeat}, one core; JSON in {args.json})")


if __name__ == "__main__":
    main()
