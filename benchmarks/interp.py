"""How fast the interpreter runs the naive convolution (issue target: ≥ 100k
multiply-adds per second on one core).

    python benchmarks/interp.py [--repeat 5] [--json benchmarks/results/interp.json]

Prints a table and writes JSON. The spec is the naive f32 convolution N=1, C=8,
H=W=8, K=8, 3×3, pad 1 (36,864 multiply-adds); f16 and a larger spec for context.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from affinec.contraction import contraction_of
from affinec.frontend import build
from affinec.interpreter import Interpreter
from affinec.reference import poisoned_output, random_inputs
from affinec.spec import ConvSpec

SPECS = {
    "target: 1x8x8x8 * 8x3x3 p1 f32": ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1),
    "same, f16": ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1, dtype="f16"),
    "2x16x12x12 * 16x3x3 s2 p1 nhwc": ConvSpec(
        2, 16, 12, 12, 16, 3, 3, stride=2, padding=1, layout="nhwc"
    ),
}


def measure(spec: ConvSpec, repeat: int) -> dict:
    module = build(spec)
    start = time.perf_counter()
    interpreter = Interpreter(module)
    decode = time.perf_counter() - start
    inputs = random_inputs(spec, np.random.default_rng(0))
    name = contraction_of(spec).name
    times = []
    for _ in range(repeat):
        out = poisoned_output(spec)
        start = time.perf_counter()
        interpreter.run(name, *inputs, out)
        times.append(time.perf_counter() - start)
    macs = spec.flops // 2
    median = statistics.median(times)
    return {
        "spec": spec.to_text(),
        "macs": macs,
        "decode_s": decode,
        "run_s_median": median,
        "run_s_all": times,
        "macs_per_s": macs / median,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default="benchmarks/results/interp.json")
    args = parser.parse_args()
    rows = {label: measure(spec, args.repeat) for label, spec in SPECS.items()}
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "results": rows,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"{'spec':<34} {'MACs':>9} {'decode':>9} {'run':>9} {'MAC/s':>11}")
    for label, r in rows.items():
        print(
            f"{label:<34} {r['macs']:>9,} {r['decode_s'] * 1e3:>7.1f}ms "
            f"{r['run_s_median'] * 1e3:>7.1f}ms {r['macs_per_s']:>11,.0f}"
        )
    print(f"\n(median of {args.repeat}; JSON in {args.json})")


if __name__ == "__main__":
    main()
