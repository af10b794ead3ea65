"""One small kernel per route of the compiler, compiled once and run under
compute-sanitizer's tools (memcheck, racecheck, synccheck), each checked against
float64.

    scripts/gpu_sanitize.py --list                        # the routes
    scripts/gpu_sanitize.py --compile-only                # compile every route (no GPU)
    scripts/gpu_sanitize.py --compile kernels.pkl         # compile, keep the kernels
    compute-sanitizer --tool racecheck ... \\
        python3 scripts/gpu_sanitize.py --run kernels.pkl  # launch them, check them

Compiling is most of the time and needs no GPU, so the kernels are compiled once in a
process pool and pickled; each sanitized process only loads and launches them (one
process a tool, every route in it). `--run` prints a line a route (`ok` or `WRONG`
with its relative error against float64) and exits 1 if any route was wrong or failed;
`scripts/gpu_session.sh sanitize_routes` runs the three tools and prints a table of
routes x tools.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple

from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.driver.wgmma_taps_ss_config import wgmma_taps_ss_config


class Route(NamedTuple):
    """A route's kernel: `spec` compiled with `config_for(spec, **knobs)` changed by
    `changes`, for `arch`; run at `run_batch` where it is a kernel of any batch."""

    name: str
    spec: Spec
    knobs: dict = {}  # noqa: RUF012 (never changed)
    changes: dict = {}  # noqa: RUF012
    arch: str = "sm_90"
    run_batch: int = 0


def _conv(**changes) -> ConvSpec:
    base = ConvSpec(n=2, c=32, h=10, w=9, k=16, r=3, s=3, padding=(1, 1), dtype="f16")
    return dataclasses.replace(base, **changes)


NHWC = {"layout": "nhwc", "filter_layout": "rsck"}
HOPPER_PRODUCT = MatmulSpec(m=192, n=128, k=320, dtype="f16")
WGMMA_PRODUCT = MatmulSpec(m=256, n=256, k=448, dtype="f16")
"""Four 128 x 128 blocks of seven 64-deep steps: every stage of four reused."""
HOPPER_CONV = ConvSpec(n=3, c=64, h=7, w=9, k=64, r=1, s=1, dtype="bf16", **NHWC)
"""189 flattened pixels: the Hopper kernel's row tiles cross images."""


def routes() -> list[Route]:
    """Every route the compiler builds, one small kernel each."""
    out = [
        Route("simt-f32", _conv(dtype="f32", k=12, stride=(2, 1))),
        Route("simt-f32-nhwc-bias-relu", _conv(dtype="f32", epilogue="bias-relu", **NHWC)),
        Route("simt-f16-few-channels", _conv(c=5, k=7)),
        Route("coalesced-f16", _conv(c=4, r=7, s=7, h=15, w=13, stride=(2, 2), padding=(3, 3), **NHWC)),
        Route("tf32", _conv(dtype="f32", c=32, k=16), {"tf32": True}),
    ]  # fmt: skip
    window = _conv(c=96, k=16)  # 6 steps of the window's 16 channels x 3 x 3 taps
    for stages in (2, 3, 4):
        out.append(
            Route(f"mma-window-stages{stages}", window, changes={"stages": stages})
        )
    for stages in (2, 5, 6):
        out.append(
            Route(
                f"mma-per-tap-stages{stages}",
                _conv(c=64, k=32, **NHWC),
                changes={"stages": stages, "reduction_tile_sizes": (1, 1, 16)},
            )
        )
    out.append(
        Route(
            "mma-bf16-dilated",
            _conv(dtype="bf16", c=48, k=24, dilation=(2, 2), padding=(2, 2)),
        )
    )
    for schedule in ("waited", "in-flight", "specialized", "cooperative"):
        # the cooperative schedule's two consumers take 64 rows each
        changes = {"wgmma_schedule": schedule} | (
            {"wgmma_tile": (128, 64)} if schedule == "cooperative" else {}
        )
        out.append(
            Route(f"hopper-{schedule}-product", HOPPER_PRODUCT, {"wgmma": True},
                  changes, arch="sm_90a")
        )  # fmt: skip
        out.append(
            Route(f"hopper-{schedule}-1x1-across-images", HOPPER_CONV, {"wgmma": True},
                  changes, arch="sm_90a")
        )  # fmt: skip
    # the pipeline's own warpgroup MMA (`affinec-wgmma`): the promotion's cp.async
    # copies, and TMA with each step's MMAs in flight (`config_for`'s on sm_90a)
    pipeline_wgmma = {"mma": True, "tensor_core": "wgmma", "stages": 4,
                      "tile_sizes": (128, 128), "reduction_tile_sizes": (64,),
                      "stage_output": True}  # fmt: skip
    tma = {"tma": True, "in_flight": True}
    out += [
        Route("wgmma-pass-cp-async-product", WGMMA_PRODUCT, changes=pipeline_wgmma,
              arch="sm_90a"),
        Route("wgmma-pass-tma-in-flight-product", WGMMA_PRODUCT,
              changes=pipeline_wgmma | tma, arch="sm_90a"),
        Route("wgmma-pass-tma-in-flight-1x1-across-images", HOPPER_CONV,
              {"flatten_pixels": True},
              pipeline_wgmma | tma | {"tile_sizes": (128, 64)}, arch="sm_90a"),
    ]  # fmt: skip
    # `affinec-wgmma`'s descriptor route (both tiles read by descriptor, a tap a
    # step; `config_for`'s on sm_90a for convolutions with taps or strides of 128
    # channels or more): a 3x3, a 3x3/2 and a 1x1/2 (TMA's element strides)
    for name, spec in (
        ("wgmma-pass-descriptors-3x3", _conv(c=64, k=64, h=10, w=9, **NHWC)),
        ("wgmma-pass-descriptors-3x3-stride2", _conv(c=64, k=64, h=16, w=15, stride=(2, 2), **NHWC)),
        ("wgmma-pass-descriptors-1x1-stride2", _conv(c=64, k=64, h=16, w=15, r=1, s=1, padding=(0, 0), stride=(2, 2), **NHWC)),
    ):  # fmt: skip
        ss = dataclasses.asdict(wgmma_taps_ss_config(spec, 128, 64, arch="sm_90a"))
        out.append(Route(name, spec, changes=ss, arch="sm_90a"))
    out += [
        Route("split2-mma", _conv(c=64, k=16), {"splits": 2}),
        Route("split3-simt", _conv(dtype="f32", c=48, k=8), {"splits": 3}),
        Route("split8-mma", _conv(c=128, k=16, **NHWC), {"splits": 8}),
        Route("split3-uneven-simt", _conv(dtype="f32", c=40, k=8), {"splits": 3}),
        Route("split3-uneven-f16", _conv(c=88, k=16, **NHWC), {"splits": 3}),
        Route("hopper-split2", MatmulSpec(m=128, n=128, k=512, dtype="f16"),
              {"wgmma": True, "splits": 2}, arch="sm_90a"),
        Route("flattened-across-images-f16", _conv(n=3, h=5, w=7, c=32, k=24, r=1, s=1, padding=(0, 0), **NHWC),
              {"flatten_pixels": True}, {"tile_sizes": (48, 24)}),
        Route("flattened-across-images-f32", _conv(dtype="f32", n=3, h=5, w=7, c=16, k=8, r=1, s=1, padding=(0, 0), **NHWC),
              {"flatten_pixels": True}, {"tile_sizes": (24, 8)}),
        Route("grouped-mma", _conv(c=64, k=32, groups=2, **NHWC)),
        Route("grouped-simt", _conv(dtype="f32", c=12, k=8, groups=4)),
        Route("depthwise-f16", _conv(c=32, k=32, groups=32, **NHWC)),
        Route("depthwise-f32-stride2", _conv(dtype="f32", c=16, k=16, groups=16, stride=(2, 2))),
        Route("residual-mma", _conv(c=32, k=32, epilogue="bias,residual,relu", **NHWC)),
        Route("residual-simt", _conv(dtype="f32", c=8, k=8, epilogue="residual")),
        Route("residual-hopper", dataclasses.replace(HOPPER_CONV, epilogue="scale,bias,residual,relu6"),
              {"wgmma": True}, arch="sm_90a"),
        Route("dynamic-batch-mma", _conv(n=2, c=32, k=16, dynamic_batch=True, **NHWC), run_batch=5),
        Route("dynamic-batch-simt", _conv(dtype="f32", n=4, c=8, k=8, dynamic_batch=True), run_batch=1),
        Route("dynamic-batch-residual", _conv(n=1, c=32, k=32, dynamic_batch=True, epilogue="residual", **NHWC),
              run_batch=7),
    ]  # fmt: skip
    return out


def compile_route(route: Route):
    """(route name, runtime kernel, tolerance, seconds), or (name, None, reason, s)
    when the compiler refused or failed."""
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for, with_knobs

    start = time.perf_counter()
    try:
        # the route's own knobs only: nothing split or flattened unless asked
        knobs = {"splits": 1, "flatten_pixels": False} | route.knobs
        config = with_knobs(
            config_for(route.spec, arch=route.arch, **knobs), **route.changes
        )
        compiled = compile_to_ptx(route.spec, config, arch=route.arch)
        kernel = compiled.runtime_kernel()
    except Exception as e:  # reported per route, the others still compile
        return route.name, None, f"{type(e).__name__}: {e}", time.perf_counter() - start
    describe = f"{config.describe()}; grids {[r.grid_text for r in compiled.launches]}"
    return (
        route.name,
        (kernel, compiled.tolerance, describe),
        None,
        (time.perf_counter() - start),
    )


def compile_all(names: list[str], jobs: int) -> tuple[dict, list[str]]:
    chosen = [r for r in routes() if not names or r.name in names]
    kernels, failures = {}, []
    with ProcessPoolExecutor(jobs) as pool:
        each = (
            pool.map(compile_route, chosen) if jobs > 1 else map(compile_route, chosen)
        )
        for name, built, reason, seconds in each:
            if built is None:
                failures.append(name)
                print(f"{name}: NOT COMPILED: {reason}", flush=True)
            else:
                kernels[name] = built
                print(f"{name}: compiled in {seconds:.1f} s: {built[2]}", flush=True)
    return kernels, failures


def run_all(kernels: dict, seed: int) -> int:
    import numpy as np

    from affinec.frontend.reference import (
        poisoned_output,
        random_inputs,
        reference,
        relative_error,
        verdict,
    )

    by_name = {r.name: r for r in routes()}
    bad = 0
    for name, (kernel, tolerance, _) in kernels.items():
        route = by_name[name]
        spec = route.spec
        if route.run_batch:
            spec = dataclasses.replace(spec, n=route.run_batch)
        try:
            inputs = random_inputs(spec, np.random.default_rng(seed))
            out = kernel(*inputs, poisoned_output(spec))
            checked = verdict(
                spec, relative_error(out, reference(spec, *inputs)), tolerance
            )
            line = checked.describe()
            bad += not checked.ok
        except Exception as e:  # a launch that failed: named, the others still run
            line, bad = f"FAILED: {type(e).__name__}: {e}", bad + 1
        at = f" (at batch {spec.n})" if route.run_batch else ""  # pyright: ignore
        print(f"route {name}{at}: {line}", flush=True)
    print(f"{len(kernels)} routes run, {bad} wrong or failed")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true", help="print the routes' names")
    mode.add_argument("--compile-only", action="store_true", help="compile, no GPU")
    mode.add_argument("--compile", metavar="FILE", help="compile and pickle to FILE")
    mode.add_argument("--run", metavar="FILE", help="launch and check FILE's kernels")
    parser.add_argument("--route", nargs="+", default=[], help="only these routes")
    parser.add_argument("--jobs", type=int, default=0, help="compiler processes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    known = [r.name for r in routes()]
    if unknown := [n for n in args.route if n not in known]:
        parser.error(f"unknown route {unknown[0]!r} (see --list)")
    if args.list:
        print("\n".join(known))
        return 0
    if args.run:
        with open(args.run, "rb") as f:
            kernels = pickle.load(f)
        if args.route:
            kernels = {n: k for n, k in kernels.items() if n in args.route}
        return run_all(kernels, args.seed)
    import os

    jobs = args.jobs or max(1, min(len(known), (os.cpu_count() or 2) - 1))
    kernels, failures = compile_all(args.route, jobs)
    if args.compile:
        with open(args.compile, "wb") as f:
            pickle.dump(kernels, f)
    print(f"{len(kernels)} routes compiled, {len(failures)} not: {' '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
