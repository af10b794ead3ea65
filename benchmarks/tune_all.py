"""Tune the five benchmark convolutions in f16 and f32 on the GPU.

    PYTHONUNBUFFERED=1 scripts/gpu_python.sh benchmarks/tune_all.py --out tuning-run \
        && cp tuning-run/* $OUT/                                     # about 8-9 minutes
    scripts/gpu_python.sh benchmarks/tune_all.py --out tuning-run --dtype f16   # 4-5
    python benchmarks/tune_all.py --plot-only --out tuning-run      # redraw, no GPU

Each convolution (NHWC, RSCK filters, as `affinec bench` runs them) is tuned with
`affinec.tuning.tune`: a few hundred candidates compiled in parallel processes, the
cost model's favourites (and a few random ones) checked against float64 and timed
in this process, the fastest timed again; cuDNN is timed on the same inputs in the
same run (f32: TF32 off, the exact comparison; and with TF32 on). The compiling of
every spec is submitted at the start, so the pool compiles the next specs while
this process measures the current one.

Written under `--out` (six files, within what the device tool brings back):

    tuning.json     the cache (use it as AFFINEC_TUNING_CACHE, or merge it)
    tune-log.jsonl  every configuration tried, one JSON line each, a summary line per spec
    summary.json    per spec: best, config_for's time, cuDNN's, the cost model's
                    rank correlation and what pruning saved; the GPU and the date
    table.txt       the table printed at the end
    times.png       measured against predicted time of every configuration measured
    roofline.png    the H100's roofline with the tuned kernels and cuDNN's

`--budget-s` (default 420) is the whole run's; each spec gets an equal share of
what is left (at most `--spec-budget-s`, 120). A spec already in `--out`'s cache for
this GPU and compiler is not tuned again unless `--force`, so a run cut short
continues where it stopped. The plots need matplotlib (the `plots` extra:
`pip install -e '.[plots]'`); without it the other files are written and `--plot-only` draws
them later on a machine that has it.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

from affinec.base.spec import DTYPES, ConvSpec, parse_spec
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, geomean, with_format
from affinec.tuning import TuningCache, entry_of
from affinec.tuning.cache import tuning_key
from affinec.tuning.compiling import default_jobs, make_pool
from affinec.tuning.log import read_log, records_by_spec, write_log
from affinec.tuning.measure import Measurer
from affinec.tuning.problem import problem_of
from affinec.tuning.space import search_space
from affinec.tuning.tuner import TuneOptions, start_compiling, tune

TUNE_ALL_CANDIDATES = 120
"""Compiled per convolution: ten convolutions' compiles at 2 to 4 s each must keep
up with the measuring on 15 cores."""
CACHE, LOG, SUMMARY, TABLE = (
    "tuning.json",
    "tune-log.jsonl",
    "summary.json",
    "table.txt",
)
TIMES_PNG, ROOFLINE_PNG = "times.png", "roofline.png"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--dtype", nargs="+", choices=DTYPES, default=["f16", "f32"])
    p.add_argument("--only", nargs="+", choices=list(DESIGN_CONVOLUTIONS))
    p.add_argument("--budget-s", type=float, default=420.0, help="the whole run's")
    p.add_argument("--spec-budget-s", type=float, default=120.0)
    p.add_argument("--top", type=int, default=24)
    p.add_argument("--explore", type=int, default=6)
    p.add_argument("--finalists", type=int, default=3)
    p.add_argument("--max-candidates", type=int, default=TUNE_ALL_CANDIDATES)
    p.add_argument("--jobs", type=int, default=0, help="0: every core but one")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="tune cached specs again")
    p.add_argument("--no-cudnn", action="store_true", help="take cuDNN from JSON")
    p.add_argument(
        "--cudnn-json",
        help="a benchmark JSON (docs/results/conv-*.json) for cuDNN's figures when "
        "they are not measured in this run (default: the newest)",
    )
    p.add_argument("--plot-only", action="store_true", help="redraw from --out")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    for name in ("budget_s", "spec_budget_s"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        return draw(out, args)
    from affinec.backend.runtime import current_arch, require_gpu
    from affinec.tuning.measure import GpuMeasurer, gpu_name

    require_gpu()
    return run(
        args, lambda spec: GpuMeasurer(spec, args.seed), gpu_name(), current_arch()
    )


def run(
    args: argparse.Namespace,
    measurer_for: Callable[[ConvSpec], Measurer],
    gpu: str,
    arch: str,
) -> int:
    """Tune, write, draw (`measurer_for` makes each spec's measurer: the GPU's, or
    a fake one in the tests)."""
    out = Path(args.out)
    start = time.monotonic()
    cache = TuningCache(out / CACHE)
    specs = [
        (name, with_format(spec, dtype))
        for name, spec in DESIGN_CONVOLUTIONS.items()
        if not args.only or name in args.only
        for dtype in args.dtype
    ]
    todo = [
        (name, spec)
        for name, spec in specs
        if args.force or cache.lookup(tuning_key(spec), gpu) is None
    ]
    for name, spec in specs:
        if (name, spec) not in todo:
            print(f"{name} {spec.dtype}: cached, not tuned again (--force to)")
    jobs = args.jobs or default_jobs()
    print(
        f"{gpu} ({arch}), {len(todo)} convolutions to tune, {jobs} compiler processes"
    )
    pool = make_pool(jobs) if jobs > 1 else None
    summaries = _read_summaries(out)
    try:
        # Every spec's compiles go to the pool now: it works ahead while we measure.
        queued = []
        for name, spec in todo:
            space = search_space(spec, max_candidates=args.max_candidates)
            queued.append((name, spec, space, start_compiling(spec, space, arch, pool)))
        for k, (name, spec, space, compilation) in enumerate(queued):
            left = args.budget_s - (time.monotonic() - start)
            share = min(args.spec_budget_s, left / (len(queued) - k))
            if share < 10:
                print(f"{name} {spec.dtype}: skipped, the run's budget is spent")
                compilation.cancel()
                continue
            options = TuneOptions(
                budget_s=share,
                top=args.top,
                explore=args.explore,
                finalists=args.finalists,
                max_candidates=args.max_candidates,
                jobs=jobs,
                arch=arch,
                seed=args.seed,
                progress=not args.no_progress and sys.stderr.isatty(),
            )
            measurer = measurer_for(spec)
            try:
                result = tune(
                    spec, measurer, options, compilation=compilation, space=space
                )
                cudnn = {
                    "cudnn_ms": measurer.cudnn_ms() if not args.no_cudnn else None,
                    "cudnn_tf32_ms": measurer.cudnn_ms(tf32=True)
                    if spec.dtype == "f32" and not args.no_cudnn
                    else None,
                    "cudnn_relu_ms": measurer.cudnn_ms(relu=True)
                    if spec.epilogue != "none" and not args.no_cudnn
                    else None,
                }
                result.cudnn_ms = cudnn["cudnn_ms"]
            finally:
                measurer.close()
            write_log(result, out / LOG)
            if (entry := entry_of(result)) is not None:
                cache.store(entry)
            summaries[spec.to_text()] = {"name": name, **result.summary(), **cudnn}
            _write_summaries(out, summaries, gpu, arch)
            print(result.report(), flush=True)
            print()
            if measurer.broken:
                print("the GPU faulted: the remaining convolutions are not tuned")
                break
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    print(f"tuning took {time.monotonic() - start:.0f} s")
    return draw(out, args)


def _read_summaries(out: Path) -> dict[str, dict]:
    path = out / SUMMARY
    if not path.exists():
        return {}
    return {s["spec"]: s for s in json.loads(path.read_text())["specs"]}


def _write_summaries(out: Path, summaries: dict[str, dict], gpu: str, arch: str):
    from affinec.tuning.cost import H100

    payload = {
        "gpu": gpu,
        "arch": arch,
        "date": time.strftime("%Y-%m-%d"),
        "machine_model": H100.name,
        "specs": list(summaries.values()),
    }
    (out / SUMMARY).write_text(json.dumps(payload, indent=1) + "\n")


# -- the table and the plots ---------------------------------------------------------------


def _cudnn_from_json(path: str | None) -> dict[tuple[str, str], float]:
    """cuDNN's times by (name, dtype) from a benchmark JSON (the newest if None)."""
    if path is None:
        found = sorted(glob.glob("docs/results/conv-*.json"))
        if not found:
            return {}
        path = found[-1]
    rows = json.loads(Path(path).read_text())["rows"]
    out = {}
    for r in rows:
        dtype = parse_spec(r["spec"]).dtype
        out[(r["name"], dtype)] = r["cudnn_ms"]
    return out


def draw(out: Path, args: argparse.Namespace) -> int:
    """The table (printed and written), and the plots if matplotlib is there."""
    if not (out / SUMMARY).exists():
        print(f"error: no {SUMMARY} in {out}: nothing tuned yet", file=sys.stderr)
        return 1
    summaries = list(_read_summaries(out).values())
    fallback = _cudnn_from_json(args.cudnn_json)
    rows = []
    for s in summaries:
        spec = parse_spec(s["spec"])
        cudnn = s.get("cudnn_ms") or fallback.get((s["name"], spec.dtype))
        rows.append((s, spec, cudnn))
    order = {name: k for k, name in enumerate(DESIGN_CONVOLUTIONS)}
    rows.sort(key=lambda r: (order.get(r[0]["name"], 99), r[1].dtype))
    text = _table(rows)
    print(text)
    (out / TABLE).write_text(text + "\n")
    from affinec.base.extras import install_hint
    from affinec.tuning.plots import plots_available

    if not plots_available():
        print(f"plots: matplotlib is not installed ({install_hint('matplotlib')})")
        return 0
    _plots(out, rows)
    return 0


def _table(rows: list) -> str:
    head = (
        f"{'convolution':<16} {'dtype':<5} {'tuned ms':>9} {'TFLOP/s':>7} "
        f"{'config_for':>10} {'cuDNN ms':>9} {'cuDNN/ours':>10} {'rho':>5} "
        f"{'measured':>8} {'tune s':>6}  best configuration"
    )
    lines = [head]
    ratios: dict[str, list[float]] = {}
    for s, spec, cudnn in rows:
        best = s.get("best_ms")
        base = s.get("baseline_ms")
        rho = s["model"].get("spearman")
        ratio = cudnn / best if cudnn and best else None
        if ratio:
            ratios.setdefault(spec.dtype, []).append(ratio)
        lines.append(
            f"{s['name']:<16} {spec.dtype:<5} "
            f"{_f(best, 9, '.4f')} {_f(spec.flops / (best * 1e-3) / 1e12 if best else None, 7, '.1f')} "
            f"{_f(base, 10, '.4f')} {_f(cudnn, 9, '.4f')} {_f(ratio, 10, '.3f')} "
            f"{_f(rho, 5, '.2f')} {s['savings']['measured']:>8} "
            f"{_f(s['seconds'].get('total'), 6, '.0f')}  "
            f"{(s['best'] or {}).get('describe', '-')}"
        )
    for dtype, values in sorted(ratios.items()):
        faster = sum(v > 1 for v in values)
        lines.append(
            f"{dtype}: geomean cuDNN/ours {geomean(values):.3f} over {len(values)}, "
            f"faster than cuDNN on {faster}"
        )
    return "\n".join(lines)


def _f(v: float | None, width: int, fmt: str) -> str:
    return (
        f"{v:{width}{fmt}}" if v is not None and math.isfinite(v) else f"{'-':>{width}}"
    )


def _plots(out: Path, rows: list) -> None:
    from affinec.tuning.plots import (
        RooflinePoint,
        SpecTimes,
        plot_roofline,
        plot_tuning,
    )

    by_spec = records_by_spec(read_log(out / LOG)) if (out / LOG).exists() else {}
    panels = [
        SpecTimes(f"{s['name']} {spec.dtype}", by_spec.get(s["spec"], []), cudnn)
        for s, spec, cudnn in rows
    ]
    print(f"plot: {plot_tuning(panels, out / TIMES_PNG)}")
    points = [
        RooflinePoint(
            s["name"],
            spec.dtype,
            spec.flops,
            problem_of(spec).dram_bytes(),
            s.get("best_ms"),
            cudnn,
        )
        for s, spec, cudnn in rows
        if isinstance(spec, ConvSpec)
    ]
    print(f"plot: {plot_roofline(points, out / ROOFLINE_PNG)}")


if __name__ == "__main__":
    sys.exit(main())
