"""`affinec-wgmma` with A from registers on an H100: ResNet-50's and VGG-16's 3x3
convolutions (strided and not) at batch 32, each kernel checked against float64 on
the GPU first, then timed: the pass route's wgmma with the taps
(`wgmma_taps_config`, each of `TAPS_TILES`, the last also with
`affinec-wgmma{in-flight=true}`: route `wgmma taps`) against
`config_for`'s mma.sync kernel (`mma.sync`), the Hopper template route
(`config_for(spec, wgmma=True)`: `template wgmma`) and cuDNN (torch), all in the
same run.

    scripts/gpu_python.sh scripts/gpu_wgmma_taps.py --out $OUT

Compiles every kernel first in a process pool, then measures as
`scripts/gpu_wgmma_pipeline.py` does (`affinec.tuning.measure.GpuMeasurer`: the
output poisoned and compared with float64, then CUDA events around batches of
back-to-back launches, the median of ten), stopping after --budget seconds
(the layers left are reported as not run). Prints a line per kernel as it goes
and a table per layer last; writes `wgmma_taps.json` (every row, with ptxas's
registers and spills and the SASS's HGMMA count) under --out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_wgmma_pipeline import (  # noqa: E402
    Row,
    compile_all,
    gpu_or_exit,
    measure_all,
)

from affinec.base.spec import ConvSpec, Spec  # noqa: E402
from affinec.driver.config import KernelConfig, config_for  # noqa: E402
from affinec.driver.wgmma_taps_config import taps_configs  # noqa: E402
from affinec.frontend.networks import network  # noqa: E402

ARCH = "sm_90a"
NETWORKS = ("resnet50", "vgg16")
ROUTES = ("wgmma taps", "mma.sync", "template wgmma")


def layers(batch: int) -> list[tuple[str, ConvSpec]]:
    """The networks' 3x3 convolutions, each shape once."""
    seen: set[str] = set()
    out = []
    for net in NETWORKS:
        for layer in network(net, batch):
            spec = layer.spec
            if spec.r != 3 or spec.to_text() in seen:
                continue
            seen.add(spec.to_text())
            out.append((f"{net} b{batch} {layer.name}", spec))
    return out


def routes(spec: Spec) -> list[tuple[str, KernelConfig | None, str]]:
    """(route, configuration, note) of every kernel measured for `spec`."""
    configs = taps_configs(spec, ARCH)
    out: list[tuple[str, KernelConfig | None, str]] = [
        ("wgmma taps", c, "") for c in configs
    ]
    # the largest block's runs split around its taps' loops: also left in flight
    out += [("wgmma taps", c, "in-flight") for c in configs[-1:]]
    if not out:
        out.append(("wgmma taps", None, "wgmma_taps_config takes none of its tiles"))
    out.append(("mma.sync", config_for(spec, arch=ARCH), ""))
    try:
        out.append(("template wgmma", config_for(spec, arch=ARCH, wgmma=True), ""))
    except ValueError as e:
        out.append(("template wgmma", None, str(e)))
    return out


def best_table(rows: list[Row]) -> str:
    """Per layer: cuDNN, each route's fastest correct kernel (ms), and the taps
    route's ratios."""
    lines = [
        f"{'layer':40} {'cuDNN':>8} {'taps':>8} {'mma.sync':>8} {'template':>8} "
        f"{'taps/cuDNN':>10} {'vs mma':>7}  best taps tile"
    ]
    for case in dict.fromkeys(r.case for r in rows):
        mine = [r for r in rows if r.case == case]

        def best(route: str, mine: list[Row] = mine) -> Row | None:
            timed = [r for r in mine if r.route == route and r.ok and r.ms]
            return min(timed, key=lambda r: r.ms) if timed else None  # pyright: ignore

        vendor = next((r for r in mine if r.route == "cuDNN" and r.ms), None)
        taps, mma = best("wgmma taps"), best("mma.sync")
        cells = [vendor, taps, mma, best("template wgmma")]
        text = " ".join(f"{c.ms:8.4f}" if c else f"{'-':>8}" for c in cells)
        ratio = f"{vendor.ms / taps.ms:9.2f}x" if taps and vendor else f"{'-':>10}"
        gain = f"{mma.ms / taps.ms:6.2f}x" if taps and mma else f"{'-':>7}"
        tile = taps.config[:50] if taps else ""
        lines.append(f"{case[:40]:40} {text} {ratio} {gain}  {tile}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-layers", type=int, default=0, help="0: all")
    parser.add_argument(
        "--budget", type=float, default=135.0, help="seconds for everything"
    )
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()

    gpu_or_exit(parser)
    cases: list[tuple[str, Spec]] = list(layers(args.batch))
    if args.max_layers:
        cases = cases[: args.max_layers]
    compiled = compile_all(cases, routes)
    print(f"compiled {len(compiled)} kernels in {time.perf_counter() - start:.0f} s",
          flush=True)  # fmt: skip
    rows = measure_all(
        cases, compiled, os.path.join(args.out, "wgmma_taps.json"), routes,
        budget_s=args.budget, start=start,
    )  # fmt: skip
    wrong = [r for r in rows if r.route == "wgmma taps" and r.error is not None]
    wrong = [r for r in wrong if not r.ok]
    print()
    print(best_table(rows))
    print(f"\nwgmma taps kernels wrong: {len(wrong)} of "
          f"{sum(r.route == 'wgmma taps' and r.error is not None for r in rows)}; "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
