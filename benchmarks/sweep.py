"""Time a few configurations of one of the benchmark convolutions, each checked
against float64 first (a quick sweep on the GPU machine; `affinec tune` is the
search proper).

    python benchmarks/sweep.py conv3x3-64-relu f16 '{"stages": 2}' '{"warp_grid": [4, 1]}'
    python benchmarks/sweep.py conv1x1-256-64 tf32 '{"stages": 2}'   # config_for(tf32=True)

Each argument after the dtype is a JSON object of `KernelConfig` fields that change
the configuration `config_for` picks; `{}` is that configuration itself.
"""

from __future__ import annotations

import argparse
import json
import sys

from affinec.backend.runtime import current_arch
from affinec.driver.benchmark import (
    DESIGN_CONVOLUTIONS,
    bench_conv,
    format_table,
    with_format,
)
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for, with_knobs


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(DESIGN_CONVOLUTIONS))
    parser.add_argument("dtype", choices=("f16", "bf16", "f32", "tf32"))
    parser.add_argument(
        "changes", nargs="*", metavar="JSON", help="KernelConfig fields to change"
    )
    args = parser.parse_args(argv)
    tf32 = args.dtype == "tf32"  # f32 data on the tensor cores
    spec = with_format(DESIGN_CONVOLUTIONS[args.name], "f32" if tf32 else args.dtype)
    base = config_for(spec, tf32=tf32)
    configs = []
    for text in args.changes or ["{}"]:
        try:
            changes = json.loads(text)
            if not isinstance(changes, dict):
                raise ValueError("not a JSON object")
            knobs = {
                k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()
            }
            configs.append((text, with_knobs(base, **knobs)))
        except (ValueError, TypeError) as e:
            parser.error(f"{text!r}: {e}")
    rows = []
    for text, config in configs:
        try:
            compiled = compile_to_ptx(spec, config, arch=current_arch())
        except Exception as e:  # a configuration the passes refuse: say so, go on
            print(f"{text}: refused: {e}")
            continue
        row = bench_conv(args.name, spec, compiled=compiled)
        row.config = text
        rows.append(row)
        print(format_table([row]).splitlines()[-1], text, flush=True)
    print(format_table(rows))
    for r in rows:
        print(r.config, f"{r.ours_ms}")


if __name__ == "__main__":
    main(sys.argv[1:])
