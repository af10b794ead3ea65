"""`affinec-wgmma` reading both tiles by descriptor for 3x3 convolutions on an
H100: ResNet-50's and VGG-16's stride-1 3x3s of 64 channels or more and
ResNet-50's strided ones (its 3x3/2s and 1x1/2 downsamples) at batch 32,
each kernel checked against float64 on the GPU first, then timed: the pass route
one tap and 64 channels a step (`wgmma_taps_ss_config`: `ss_configs`' tiles by
4-D TMA boxes, with element strides 2 at stride 2, each step's MMAs in flight,
route `wgmma ss`; the first by the
promotion's cp.async copies, `wgmma ss cp.async`) against the pass route with A
from registers (`wgmma_taps_config`, each of `TAPS_TILES`: `wgmma taps`), the
Hopper template route
(`config_for(spec, wgmma=True)`: `template wgmma`, `config_for`'s kernel on
sm_90a for 3x3s of 128 channels or more) and cuDNN (torch), all in the same run.

    scripts/gpu_python.sh scripts/gpu_wgmma_taps_ss.py --out $OUT

Compiles every kernel first in a process pool, then measures as
`scripts/gpu_wgmma_pipeline.py` does (`affinec.tuning.measure.GpuMeasurer`: the
output poisoned and compared with float64, then CUDA events around batches of
back-to-back launches, the median of ten), stopping after --budget seconds (the
layers left are reported as not run). Prints a line per kernel as it goes and a
table per layer last; writes `wgmma_taps_ss.json` (every row, with ptxas's
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
from affinec.driver.wgmma_taps_ss_config import (  # noqa: E402
    ss_configs,
    wgmma_taps_ss_config,
)
from affinec.frontend.networks import network  # noqa: E402

ARCH = "sm_90a"
NETWORKS = ("resnet50", "vgg16")
STRIDED = ("resnet50",)
"""The networks whose strided 3x3s and 1x1s are measured too."""


def layers(batch: int) -> list[tuple[str, ConvSpec]]:
    """The networks' stride-1 3x3 convolutions the route takes, then `STRIDED`'s
    3x3s and 1x1s of stride 2, each shape once, those of 128 channels or more
    first."""
    seen: set[str] = set()
    out = []
    for net in NETWORKS:
        for layer in network(net, batch):
            spec = layer.spec
            strided = spec.stride == (2, 2) and net in STRIDED and spec.r in (1, 3)
            wanted = strided or (spec.r == 3 and spec.stride == (1, 1))
            if not wanted or spec.to_text() in seen or not ss_configs(spec, ARCH):
                continue
            seen.add(spec.to_text())
            out.append((f"{net} b{batch} {layer.name}", spec))
    # the template's layers (128 channels or more) first: --budget may cut the rest
    return sorted(out, key=lambda case: (case[1].c < 128, case[1].stride != (1, 1)))


def routes(spec: Spec) -> list[tuple[str, KernelConfig | None, str]]:
    """(route, configuration, note) of every kernel measured for `spec`."""
    out: list[tuple[str, KernelConfig | None, str]] = [
        ("wgmma ss" if c.tma else "wgmma ss cp.async", c, "")
        for c in ss_configs(spec, ARCH)
    ]
    # one warpgroup of 64 rows by 128 channels: a 7 x 7 image a block, which
    # ss_cost ranks first on ResNet-50's 3x3 512 at 7 x 7 (not among SS_TILES yet)
    try:
        one = wgmma_taps_ss_config(spec, 64, 128, arch=ARCH)
    except ValueError:
        one = None
    if one is not None and all(one != c for _, c, _ in out):
        out.append(("wgmma ss", one, "64 rows"))
    taps = taps_configs(spec, ARCH)[:2]  # measured before: two tiles to compare
    out += [("wgmma taps", c, "") for c in taps]
    if not taps:
        out.append(("wgmma taps", None, "wgmma_taps_config takes none of its tiles"))
    try:
        out.append(("template wgmma", config_for(spec, arch=ARCH, wgmma=True), ""))
    except ValueError as e:
        out.append(("template wgmma", None, str(e)))
    return out


def best_table(rows: list[Row]) -> str:
    """Per layer: cuDNN, each route's fastest correct kernel (ms), and the ss
    route's ratios."""
    lines = [
        f"{'layer':40} {'cuDNN':>8} {'ss':>8} {'ss cp':>8} {'taps':>8} "
        f"{'template':>8} {'ss/cuDNN':>9} {'vs tmpl':>7}  best ss tile"
    ]
    for case in dict.fromkeys(r.case for r in rows):
        mine = [r for r in rows if r.case == case]

        def best(route: str, mine: list[Row] = mine) -> Row | None:
            timed = [r for r in mine if r.route == route and r.ok and r.ms]
            return min(timed, key=lambda r: r.ms) if timed else None  # pyright: ignore

        vendor = next((r for r in mine if r.route == "cuDNN" and r.ms), None)
        ss, template = best("wgmma ss"), best("template wgmma")
        cells = [vendor, ss, best("wgmma ss cp.async"), best("wgmma taps"), template]
        text = " ".join(f"{c.ms:8.4f}" if c else f"{'-':>8}" for c in cells)
        ratio = f"{vendor.ms / ss.ms:8.2f}x" if ss and vendor else f"{'-':>9}"
        gain = f"{template.ms / ss.ms:6.2f}x" if ss and template else f"{'-':>7}"
        tile = ss.config[:50] if ss else ""
        lines.append(f"{case[:40]:40} {text} {ratio} {gain}  {tile}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-layers", type=int, default=0, help="0: all")
    parser.add_argument(
        "--budget", type=float, default=260.0, help="seconds for everything"
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
        cases, compiled, os.path.join(args.out, "wgmma_taps_ss.json"), routes,
        budget_s=args.budget, start=start,
    )  # fmt: skip
    mine = ("wgmma ss", "wgmma ss cp.async")
    checked = [r for r in rows if r.route in mine and r.error is not None]
    wrong = [r for r in checked if not r.ok]
    print()
    print(best_table(rows))
    print(f"\nwgmma ss kernels wrong: {len(wrong)} of {len(checked)}; "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
