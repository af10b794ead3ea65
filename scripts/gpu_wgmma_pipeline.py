"""The tensor-core route with `affinec-wgmma` (KernelConfig.tensor_core="wgmma") on an
H100: matrix products and ResNet-50's 1x1 convolutions (through their flattened
pixels), each checked against float64 on the GPU first, then timed: the pipeline's
wgmma with the tiles loaded by TMA on mbarrier stages (`affinec-tma-copies`, route
`pipeline tma`), the same with each step's MMAs left in flight
(`affinec-tma-copies{in-flight=true}`, route `pipeline in-flight`) and with the
promotion's cp.async copies (`tma=False`, route `pipeline cp.async`), against the Hopper template route (`wgmma=True`,
affinec-wgmma-gemm), the mma.sync route (`config_for`'s configuration) and torch
(cuBLAS for products, cuDNN for convolutions), all in the same run.

    scripts/gpu_python.sh scripts/gpu_wgmma_pipeline.py --out $OUT

Timing is the project's (`affinec.tuning.measure.GpuMeasurer`, as the tuner and
benchmarks measure: fresh inputs, the output poisoned and compared with float64
before anything is timed, then `affinec.backend.timing.time_launches`, CUDA events
around batches of back-to-back launches behind a spin kernel, the median of ten).
A kernel found wrong is reported and not timed. Prints one line per kernel as it
goes and a table last; writes `wgmma_pipeline.json` (every row, with ptxas's
registers and spills) under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass

from affinec.base.spec import ConvSpec, MatmulSpec, Spec, flattens
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import KernelConfig, config_for
from affinec.frontend.networks import network

ARCH = "sm_90a"

PRODUCTS = [MatmulSpec(4096, 4096, 1024, "f16"), MatmulSpec(4096, 4096, 4096, "f16")]

TILES = [  # rows, columns, K step, stages of the new route (3 routes each)
    (128, 128, 64, 3),
    (128, 128, 64, 4),
    (128, 256, 64, 3),
]

PIPELINE_ROUTES = ("pipeline tma", "pipeline in-flight", "pipeline cp.async")


@dataclass
class Row:
    case: str
    route: str
    config: str
    ok: bool
    error: float | None = None
    ms: float | None = None
    tflops: float | None = None
    vendor_ms: float | None = None
    registers: int | None = None
    spills: int | None = None
    threads: int | None = None
    shared_bytes: int | None = None
    compile_s: float | None = None
    sass: str = ""
    note: str = ""


def resnet50_1x1(batch: int) -> list[tuple[str, ConvSpec]]:
    """ResNet-50's 1x1 stride-1 convolutions (those a product of their pixels)."""
    return [
        (f"resnet50 b{batch} {layer.name}", layer.spec)
        for layer in network("resnet50", batch)
        if flattens(layer.spec)
    ]


def product_shape(spec: Spec) -> tuple[int, int, int]:
    """(M, N, K) of the product the spec is (a 1x1 convolution over its pixels)."""
    if isinstance(spec, MatmulSpec):
        return spec.m, spec.n, spec.k
    assert isinstance(spec, ConvSpec)
    return spec.n * spec.h * spec.w, spec.k, spec.c


def wgmma_configs(spec: Spec, tma: bool = True) -> list[KernelConfig]:
    """The new route's configurations tried for `spec` (tiles that fit it), its
    tiles loaded by TMA or by cp.async."""
    m, n, k = product_shape(spec)
    seen, configs = set(), []
    for bm, bn, bk, stages in TILES:
        bn, bk = min(bn, n), min(bk, k)
        if bm > m or bn % 8 or bk % 16 or (bm, bn, bk, stages) in seen:
            continue
        seen.add((bm, bn, bk, stages))
        configs.append(
            KernelConfig(
                tile_sizes=(bm, bn),
                reduction_tile_sizes=(bk,),
                mma=True,
                tensor_core="wgmma",
                stages=stages,
                stage_output=True,
                flatten_pixels=isinstance(spec, ConvSpec),
                tma=tma,
            )
        )
    return configs


def routes(spec: Spec) -> list[tuple[str, KernelConfig | None, str]]:
    """(route, configuration, note) of every kernel measured for `spec`: the note
    says why a route has no configuration."""
    out: list[tuple[str, KernelConfig | None, str]] = [
        (route, c, "in-flight" if route == "pipeline in-flight" else "")
        for route, tma in zip(PIPELINE_ROUTES, (True, True, False), strict=True)
        for c in wgmma_configs(spec, tma)
    ]
    try:
        out.append(("template wgmma", config_for(spec, arch=ARCH, wgmma=True), ""))
    except ValueError as e:
        out.append(("template wgmma", None, str(e)))
    out.append(("mma.sync", config_for(spec, arch=ARCH), ""))
    return out


def in_flight_passes(config: KernelConfig) -> list:
    """The route's passes with affinec-tma-copies leaving each step's MMAs in
    flight (and affinec-wgmma each run with A from registers within a step)."""
    from affinec.driver.pipelines import default_passes
    from affinec.passes.affinec_tma_copies import AffinecTmaCopies
    from affinec.passes.affinec_wgmma import AffinecWgmma

    in_flight = {
        "affinec-tma-copies": AffinecTmaCopies(in_flight=True),
        "affinec-wgmma": AffinecWgmma(in_flight=True),
    }
    return [in_flight.get(p.name, p) for p in default_passes(config)]


def compile_route(spec_text: str, knobs: dict, in_flight: bool = False) -> dict:
    """Compile one kernel (what a worker process runs: picklable in and out): the
    runtime kernel and ptxas's figures, or why it was refused."""
    from affinec.base.spec import parse_spec
    from affinec.tuning.compiling import config_from_json

    spec, config = parse_spec(spec_text), config_from_json(knobs)
    start = time.perf_counter()
    try:
        pipeline = in_flight_passes(config) if in_flight else None
        compiled = compile_to_ptx(spec, config, arch=ARCH, pipeline=pipeline)
        resources = compiled.resources()
    except Exception as e:  # a refusal or a compiler error: reported
        return {
            "reason": f"compile: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        }
    kernel = compiled.runtime_kernel()
    kernel.info["tolerance"] = compiled.tolerance
    return {
        "kernel": kernel,
        "seconds": time.perf_counter() - start,
        "registers": resources.registers,
        "spills": resources.spill_stores + resources.spill_loads,
        "threads": compiled.launch.block[0] * compiled.launch.block[1],
        "shared": resources.shared_memory + compiled.launch.dynamic_shared_memory,
        "sass": _sass_counts(compiled.ptx),
    }


def _sass_counts(ptx: str) -> str:
    """How many UTMALDG, HGMMA and LDGSTS the kernel's SASS has (cuobjdump's), or
    empty where cuobjdump is missing."""
    import shutil
    import subprocess
    import tempfile

    from affinec.backend.ptxas import find_ptxas

    tool, ptxas = shutil.which("cuobjdump"), find_ptxas()
    if tool is None or ptxas is None:
        return ""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run(
            [ptxas, f"-arch={ARCH}", src, "-o", out], check=True, capture_output=True
        )
        sass = subprocess.run(
            [tool, "-sass", out], check=True, capture_output=True, text=True
        ).stdout
    return " ".join(f"{w}:{sass.count(w)}" for w in ("UTMALDG", "HGMMA", "LDGSTS"))


def compile_all(cases: list[tuple[str, Spec]], routes_of=routes) -> dict:
    """Every kernel of every case (`routes_of` each), compiled in parallel
    processes, by (case, k)."""
    from affinec.tuning.compiling import config_to_json, default_jobs, make_pool

    futures = {}
    with make_pool(default_jobs()) as pool:
        for name, spec in cases:
            for k, (_, config, note) in enumerate(routes_of(spec)):
                if config is not None:
                    futures[name, k] = pool.submit(
                        compile_route, spec.to_text(), config_to_json(config),
                        note == "in-flight",
                    )  # fmt: skip
        return {key: f.result() for key, f in futures.items()}


def vendor_ms(spec: Spec, measurer) -> float | None:
    """cuDNN's (convolutions) or cuBLAS's (products) time in the same conditions."""
    if isinstance(spec, ConvSpec):
        return measurer.cudnn_ms()
    import torch

    from affinec.backend.timing import time_launches

    data = measurer.data
    outs = [
        torch.empty(spec.m, spec.n, dtype=a.dtype, device="cuda") for a, _, _ in data
    ]
    return time_launches(
        lambda k: torch.matmul(data[k][0], data[k][1], out=outs[k]), len(data)
    )


def measure_case(
    name: str, spec: Spec, compiled: dict, log, routes_of=routes
) -> list[Row]:
    """The vendor's kernel, then each of `routes_of(spec)`: checked against float64,
    then timed."""
    from affinec.tuning.measure import GpuMeasurer

    rows: list[Row] = []
    measurer = GpuMeasurer(spec)
    try:
        vendor = vendor_ms(spec, measurer)
        vendor_name = "cuDNN" if isinstance(spec, ConvSpec) else "cuBLAS"
        rows.append(Row(name, vendor_name, "torch", True, ms=vendor,
                        tflops=_tflops(spec, vendor)))  # fmt: skip
        log(rows[-1])
        for k, (route, config, note) in enumerate(routes_of(spec)):
            if config is None:
                rows.append(Row(name, route, "-", False, note=note[:160]))
                log(rows[-1])
                continue
            described = config.describe() + (
                " in-flight" if note == "in-flight" else ""
            )
            row = Row(name, route, described, False, vendor_ms=vendor)
            rows.append(row)
            done = compiled[name, k]
            if "kernel" not in done:
                row.note = done["reason"]
                log(row)
                continue
            row.compile_s, row.registers = done["seconds"], done["registers"]
            row.spills, row.threads = done["spills"], done["threads"]
            row.shared_bytes, row.sass = done["shared"], done["sass"]
            if measurer.broken:
                row.note = "not run: an earlier kernel broke the CUDA context"
                log(row)
                continue
            kernel = done["kernel"]
            measured = measurer.measure(kernel, final=True)
            row.error = measured.error
            if measured.ok and route in PIPELINE_ROUTES:
                confirmed = measurer.confirm(kernel, runs=2)
                if not confirmed.ok:
                    measured = confirmed
            row.ok = measured.ok
            row.ms = measured.ms if measured.ok else None
            row.tflops = _tflops(spec, row.ms)
            row.note = measured.reason
            log(row)
    finally:
        measurer.close()
    return rows


def measure_all(
    cases: list[tuple[str, Spec]],
    compiled: dict,
    json_path: str,
    routes_of=routes,
    budget_s: float | None = None,
    start: float | None = None,
) -> list[Row]:
    """`measure_case` for each case, a line a kernel as it is measured, the rows so
    far written to `json_path` after each case; past `budget_s` seconds from `start`
    the cases left are rows that say so. One case's failure is reported and the
    others go on."""
    start = time.perf_counter() if start is None else start
    rows: list[Row] = []
    print(HEADER, flush=True)

    def log(row: Row) -> None:
        print(_line(row), flush=True)

    for name, spec in cases:
        if budget_s is not None and time.perf_counter() - start > budget_s:
            rows.append(Row(name, "-", "-", False, note="not run: out of --budget"))
            log(rows[-1])
            continue
        try:
            rows += measure_case(name, spec, compiled, log, routes_of)
        except Exception:  # noqa: BLE001 (one case's failure is reported, not fatal)
            traceback.print_exc()
            rows.append(
                Row(name, "-", "-", False, note="the case failed (traceback above)")
            )
        with open(json_path, "w") as f:
            json.dump({"arch": ARCH, "rows": [asdict(r) for r in rows]}, f, indent=1)
    return rows


def _tflops(spec: Spec, ms: float | None) -> float | None:
    return None if ms is None else spec.flops / (ms * 1e-3) / 1e12


def _line(row: Row) -> str:
    ms = f"{row.ms:.4f}" if row.ms is not None else "-"
    tf = f"{row.tflops:.0f}" if row.tflops is not None else "-"
    ratio = (
        f"{row.vendor_ms / row.ms:.2f}x"
        if row.ms is not None and row.vendor_ms is not None
        else "-"
    )
    err = f"{row.error:.1e}" if row.error is not None else "-"
    regs = "-" if row.registers is None else f"{row.registers}/{row.spills}"
    ok = "ok" if row.ok else "NO"
    return (
        f"{row.case[:38]:38} {row.route:18} {ok:3} {err:8} {ms:>8} {tf:>5} {ratio:>6} "
        f"{regs:>7}  {row.config[:70]}  {row.sass}"
        f"{'  ' + row.note[:90] if row.note else ''}"
    )


HEADER = (
    f"{'case':38} {'route':18} {'ok':3} {'error':8} {'ms':>8} {'TF/s':>5} "
    f"{'vs lib':>6} {'reg/spl':>7}  config"
)


def best_table(rows: list[Row]) -> str:
    """Per case: the vendor, each route's fastest correct kernel, and the ratios."""
    lines = [f"{'case':38} {'cuBLAS/cuDNN':>12} {'pipeline tma':>13} "
             f"{'in-flight':>9} {'cp.async':>9} {'template':>9} {'mma.sync':>9}   (ms; "
             "TFLOP/s of the best TMA route, and its ratio to the library, in ())"]  # fmt: skip
    for case in dict.fromkeys(r.case for r in rows):
        mine = [r for r in rows if r.case == case]

        def best(route: str, mine: list[Row] = mine) -> Row | None:
            timed = [r for r in mine if r.route == route and r.ok and r.ms]
            return min(timed, key=lambda r: r.ms) if timed else None  # pyright: ignore

        vendor = next((r for r in mine if r.route in ("cuBLAS", "cuDNN")), None)
        cells = []
        for route, width in (
            ("pipeline tma", 13),
            ("pipeline in-flight", 9),
            ("pipeline cp.async", 9),
            ("template wgmma", 9),
            ("mma.sync", 9),
        ):
            b = best(route)
            cells.append(f"{b.ms:{width}.4f}" if b else f"{'-':>{width}}")
        tma = [b for b in (best("pipeline tma"), best("pipeline in-flight")) if b]
        new = min(tma, key=lambda r: r.ms) if tma else None  # pyright: ignore
        note = f"({new.tflops:.0f})" if new and new.tflops else ""
        if new and vendor and vendor.ms:
            note = f"({new.tflops:.0f}, {vendor.ms / new.ms:.2f}x)"
        vms = f"{vendor.ms:12.4f}" if vendor and vendor.ms else f"{'-':>12}"
        lines.append(f"{case[:38]:38} {vms} {' '.join(cells)}   {note}")
    return "\n".join(lines)


def gpu_or_exit(parser: argparse.ArgumentParser) -> None:
    """Return where a CUDA GPU is found; else end the script with the reason, as
    its usage errors end (exit status 2)."""
    from affinec.backend.runtime import NoCudaGPU, require_gpu

    try:
        require_gpu()
    except NoCudaGPU as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--batch", type=int, default=32, help="ResNet-50's batch")
    parser.add_argument("--only", choices=("products", "layers"), default=None)
    parser.add_argument("--max-layers", type=int, default=0, help="0: all")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    gpu_or_exit(parser)
    cases: list[tuple[str, Spec]] = []
    if args.only != "layers":
        cases += [(f"matmul {s.m}x{s.n}x{s.k}", s) for s in PRODUCTS]
    if args.only != "products":
        layers = resnet50_1x1(args.batch)
        cases += layers[: args.max_layers] if args.max_layers else layers
    start = time.perf_counter()
    compiled = compile_all(cases)
    print(f"compiled {len(compiled)} kernels in {time.perf_counter() - start:.0f} s",
          flush=True)  # fmt: skip
    rows = measure_all(cases, compiled, os.path.join(args.out, "wgmma_pipeline.json"))
    wrong = [r for r in rows if r.route in PIPELINE_ROUTES and not r.ok]
    print()
    print(HEADER)
    for row in rows:
        print(_line(row))
    print()
    print(best_table(rows))
    print(f"\npipeline wgmma kernels not ok: {len(wrong)} of "
          f"{sum(r.route in PIPELINE_ROUTES for r in rows)}")  # fmt: skip
    return 1 if any(r.error is not None and not r.ok for r in wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
