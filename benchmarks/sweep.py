"""Time a few configurations of one of the benchmark convolutions, each checked
against float64 first (a quick sweep on the GPU machine; `affinec tune` is the
search proper).

    python benchmarks/sweep.py conv3x3-64-relu f16 '{"stages": 2}' '{"warp_grid": [4, 1]}'
    python benchmarks/sweep.py conv1x1-256-64 tf32 '{"stages": 2}'   # config_for(tf32=True)

Each argument after the dtype is a JSON object of `KernelConfig` fields that change
the configuration `config_for` picks; `{}` is that configuration itself.
"""

from __future__ import annotations

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
    name, dtype, *changes = argv
    tf32 = dtype == "tf32"  # f32 data on the tensor cores
    spec = with_format(DESIGN_CONVOLUTIONS[name], "f32" if tf32 else dtype)
    base = config_for(spec, tf32=tf32)
    rows = []
    for text in changes or ["{}"]:
        knobs = {
            k: tuple(v) if isinstance(v, list) else v
            for k, v in json.loads(text).items()
        }
        config = with_knobs(base, **knobs)
        try:
            compiled = compile_to_ptx(spec, config, arch=current_arch())
        except Exception as e:  # a configuration the passes refuse: say so, go on
            print(f"{text}: refused: {e}")
            continue
        row = bench_conv(name, spec, compiled=compiled)
        row.config = text
        rows.append(row)
        print(format_table([row]).splitlines()[-1], text, flush=True)
    print(format_table(rows))
    for r in rows:
        print(r.config, f"{r.ours_ms}")


if __name__ == "__main__":
    main(sys.argv[1:])
