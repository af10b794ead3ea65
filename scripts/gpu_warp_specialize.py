"""`affinec-warp-specialize` on an H100: the products 4096x4096x1024 and 4096^3 f16
on the pipeline's Hopper route (`tensor_core="wgmma"`, tiles loaded by TMA) with
and without a producer warpgroup, against cuBLAS, all in the same run.

For each tile (rows, columns, K step, stages) three kernels: `in-flight` (the TMA
route with each step's MMAs left in flight and the output staged through shared
memory, no specialization: the baseline), `ws in-flight` (the same with
`warp_specialize=True`: a producer warpgroup issues the loads, setmaxnreg) and `ws
unstaged` (specialized, the output stored from the registers instead of staged
through shared memory). The staged specialized kernel on 128x256 tiles is the one
whose wgmmas ptxas serialized (C7514) before the accumulators were tied to their
last `wgmma.wait_group` (`affinec.backend.wgmma_fences`): its time against
`in-flight`'s is what that change is to show. `config_for`'s own kernel of each
product is timed beside them (route `config_for`), and `--products MxNxK ...`
names other products than the two 4096-wide ones (shapes a rule fitted on those
two has not seen).

Every kernel is checked against float64 on the GPU before it is timed, as
`scripts/gpu_wgmma_pipeline.py` does (`affinec.tuning.measure.GpuMeasurer`: fresh
inputs, the output poisoned first); a kernel found wrong is reported and not
timed.

    scripts/gpu_python.sh scripts/gpu_warp_specialize.py --out $OUT

Prints one line per kernel as it goes, then a table per product: the fastest
correct kernel of each route and its ratio to cuBLAS; writes
`warp_specialize.json` (every row, with ptxas's registers and spills and the SASS's
UTMALDG/HGMMA counts where cuobjdump is installed) under --out. About 2 to 3
minutes on one H100 (compiling in parallel first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_wgmma_pipeline import (  # noqa: E402
    HEADER,
    PRODUCTS,
    Row,
    _line,
    compile_all,
    gpu_or_exit,
    measure_all,
)

from affinec.base.spec import MatmulSpec, Spec  # noqa: E402
from affinec.driver.config import KernelConfig, config_for  # noqa: E402

TILES = [  # rows, columns, K step, stages
    (128, 128, 64, 4),
    (128, 256, 64, 3),
]

TILE_ROUTES = ("in-flight", "ws in-flight", "ws unstaged")
"""The kernels of each tile: (warp_specialize, stage_output) below."""
ROUTES = ("config_for", *TILE_ROUTES)

_KNOBS = {
    "in-flight": (False, True),
    "ws in-flight": (True, True),
    "ws unstaged": (True, False),
}


def routes(spec: Spec) -> list[tuple[str, KernelConfig | None, str]]:
    """(route, configuration, note) of every kernel measured for `spec`."""
    assert isinstance(spec, MatmulSpec)
    out: list[tuple[str, KernelConfig | None, str]] = [
        ("config_for", config_for(spec, arch="sm_90a"), "")
    ]
    for bm, bn, bk, stages in TILES:
        for route in TILE_ROUTES:
            specialized, staged = _KNOBS[route]
            config = KernelConfig(
                tile_sizes=(bm, min(bn, spec.n)),
                reduction_tile_sizes=(min(bk, spec.k),),
                mma=True,
                tensor_core="wgmma",
                tma=True,
                stages=stages,
                in_flight=True,
                stage_output=staged,
                warp_specialize=specialized,
            )
            out.append((route, config, ""))
    return out


def best_table(rows: list[Row]) -> str:
    """Per product: cuBLAS, each route's fastest correct kernel (ms, its ratio to
    cuBLAS), and which configuration it was."""
    lines = [
        f"{'case':24} {'cuBLAS ms':>9} "
        + " ".join(f"{r + ' ms':>15} {'x':>5}" for r in ROUTES)
    ]
    picks = []
    for case in dict.fromkeys(r.case for r in rows):
        mine = [r for r in rows if r.case == case]
        vendor = next((r for r in mine if r.route == "cuBLAS"), None)
        cells = []
        for route in ROUTES:
            timed = [r for r in mine if r.route == route and r.ok and r.ms]
            if not timed:
                cells.append(f"{'-':>15} {'-':>5}")
                continue
            b = min(timed, key=lambda r: r.ms)  # pyright: ignore
            ratio = f"{vendor.ms / b.ms:.2f}" if vendor and vendor.ms and b.ms else "-"
            cells.append(f"{b.ms:15.4f} {ratio:>5}")
            picks.append(f"  {case} {route}: {b.config}")
        vms = f"{vendor.ms:9.4f}" if vendor and vendor.ms else f"{'-':>9}"
        lines.append(f"{case[:24]:24} {vms} " + " ".join(cells))
    return "\n".join([*lines, "best configurations:", *picks])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument(
        "--products",
        nargs="+",
        metavar="MxNxK",
        help="the f16 products to time (default: 4096x4096x1024 and 4096^3)",
    )
    args = parser.parse_args()
    products = [] if args.products else PRODUCTS
    for text in args.products or ():
        sizes = text.split("x")
        if len(sizes) != 3 or not all(x.isdigit() and int(x) > 0 for x in sizes):
            parser.error(f"--products takes MxNxK, such as 2048x2048x4096, not {text}")
        m, n, k = map(int, sizes)
        products.append(MatmulSpec(m, n, k, "f16"))
    os.makedirs(args.out, exist_ok=True)

    gpu_or_exit(parser)
    cases: list[tuple[str, Spec]] = [(f"matmul {s.m}x{s.n}x{s.k}", s) for s in products]
    start = time.perf_counter()
    compiled = compile_all(cases, routes_of=routes)
    print(f"compiled {len(compiled)} kernels in {time.perf_counter() - start:.0f} s",
          flush=True)  # fmt: skip
    rows = measure_all(
        cases,
        compiled,
        os.path.join(args.out, "warp_specialize.json"),
        routes_of=routes,
    )
    wrong = [r for r in rows if r.route in ROUTES and not r.ok]
    print()
    print(HEADER)
    for row in rows:
        print(_line(row))
    print()
    print(best_table(rows))
    print(f"\nkernels not ok: {len(wrong)} of {sum(r.route in ROUTES for r in rows)}")
    return 1 if any(r.error is not None and not r.ok for r in wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
