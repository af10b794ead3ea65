"""DESIGN.md's five convolutions, ours against cuDNN on the GPU (= `affinec bench`).

    scripts/gpu_python.sh benchmarks/conv.py --json benchmarks/results/conv.json

Prints a table (ms, TFLOP/s, cuDNN's time over ours) and writes JSON. See
affinec/benchmark.py for the method.
"""

import argparse
import sys

from affinec.benchmark import add_bench_arguments, run_benchmarks

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_arguments(parser)
    args = parser.parse_args()
    sys.exit(run_benchmarks(args.only, args.dtype, args.layout, args.json))
