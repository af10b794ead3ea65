"""the five benchmark convolutions, ours against cuDNN on the GPU (= `affinec bench`).

    scripts/gpu_python.sh benchmarks/conv.py --json benchmarks/results/conv.json

Prints a table (ms, TFLOP/s, cuDNN's time over ours) and writes JSON. See
affinec/driver/benchmark.py for the method.
"""

import sys

from affinec.tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
