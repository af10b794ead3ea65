"""`affinec`: generate, check and demonstrate.

    affinec gen conv --n 1 --c 8 --h 8 --w 8 --k 8 --r 3 --s 3 --pad 1   # naive IR
    affinec gen matmul --m 64 --n 64 --k 64
    affinec check conv.mlir -p 'affine-loop-tile{...}'  # interpret each stage vs numpy
    affinec demo                                         # the main job, stage by stage

Every user error is one `error: ...` line (located for IR) and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException, ParseError

from affinec.benchmark import DESIGN_CONVOLUTIONS
from affinec.checking import Checker, StageResult
from affinec.compiler import compile_to_ptx
from affinec.config import KernelConfig, config_for, with_knobs
from affinec.context import make_context
from affinec.diagnostics import format_exception, parse_module, verify
from affinec.dialects.affinec import read_spec
from affinec.emitter import ARCHS, DEFAULT_ARCH
from affinec.frontend import build
from affinec.interpreter import InterpreterError
from affinec.pipeline import Pipeline, PipelineError
from affinec.reference import (
    TOLERANCE,
    host_bytes,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.runtime import KernelArgumentError, NoCudaGPU, SharedMemoryError
from affinec.spec import (
    DTYPES,
    EPILOGUES,
    FILTER_LAYOUTS,
    LAYOUTS,
    ConvSpec,
    MatmulSpec,
    OuterSpec,
    Spec,
)


class UsageError(Exception):
    """A mistake on the command line or in its input, reported as `error: ...`."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its errors as every other error of `affinec`: one
    `error: ...` line and exit code 1 (argparse's own way is the usage text and
    exit code 2). Subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {self.prog}: {message} (see '{self.prog} --help')\n")


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


# -- spec flags ---------------------------------------------------------------------------


def _pair(text: str) -> tuple[int, int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,M, got {text!r}") from None
    if len(values) == 1:
        return (values[0], values[0])
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected N or N,M, got {text!r}")
    return (values[0], values[1])


def add_conv_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a convolution spec (shared by every command that takes one)."""
    for name, what in (
        ("n", "batch"),
        ("c", "input channels"),
        ("h", "input height"),
        ("w", "input width"),
        ("k", "output channels (filters)"),
        ("r", "filter height"),
        ("s", "filter width"),
    ):
        p.add_argument(f"--{name}", type=int, required=True, help=what)
    p.add_argument("--stride", type=_pair, default=(1, 1), help="SH,SW or S")
    p.add_argument("--pad", type=_pair, default=(0, 0), help="PH,PW or P")
    p.add_argument("--dilation", type=_pair, default=(1, 1), help="DH,DW or D")
    p.add_argument("--layout", choices=LAYOUTS, default="nchw")
    p.add_argument("--filter-layout", choices=FILTER_LAYOUTS, default="kcrs")
    p.add_argument("--dtype", choices=DTYPES, default="f32")
    p.add_argument("--epilogue", choices=EPILOGUES, default="none")


def add_matmul_arguments(p: argparse.ArgumentParser) -> None:
    for name in ("m", "n", "k"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--dtype", choices=DTYPES, default="f32")
    p.add_argument("--epilogue", choices=EPILOGUES, default="none")


def add_outer_arguments(p: argparse.ArgumentParser) -> None:
    for name in ("m", "n"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--dtype", choices=DTYPES, default="f32")


SPEC_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "conv": add_conv_arguments,
    "matmul": add_matmul_arguments,
    "outer": add_outer_arguments,
}


def spec_from_args(kind: str, args: argparse.Namespace) -> Spec:
    """The spec the flags describe (a ValueError naming the field if it is invalid)."""
    if kind == "conv":
        return ConvSpec(
            n=args.n,
            c=args.c,
            h=args.h,
            w=args.w,
            k=args.k,
            r=args.r,
            s=args.s,
            stride=args.stride,
            padding=args.pad,
            dilation=args.dilation,
            layout=args.layout,
            filter_layout=args.filter_layout,
            dtype=args.dtype,
            epilogue=args.epilogue,
        )
    if kind == "matmul":
        return MatmulSpec(args.m, args.n, args.k, args.dtype, args.epilogue)
    return OuterSpec(args.m, args.n, args.dtype)


def add_spec_subcommands(
    parser: argparse.ArgumentParser, help_prefix: str
) -> argparse._SubParsersAction:  # pyright: ignore[reportPrivateUsage]
    """`conv`, `matmul`, `outer` subcommands of `parser`, each with its spec flags."""
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    for kind, add in SPEC_ARGUMENTS.items():
        add(kinds.add_parser(kind, help=f"{help_prefix} a {kind}"))
    return kinds


# -- commands -----------------------------------------------------------------------------


def _write(text: str, path: str | None) -> None:
    if path is None:
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def cmd_gen(args: argparse.Namespace) -> int:
    spec = spec_from_args(args.kind, args)
    _write(str(build(spec)) + "\n", args.output)
    return 0


def read_source(path: str) -> tuple[str, str]:
    """The text of an IR file (`-` for stdin) and the name errors should use."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    with open(path) as f:
        return f.read(), path


def cmd_check(args: argparse.Namespace) -> int:
    text, name = read_source(args.file)
    pipeline = Pipeline.parse(args.passes or "")
    try:
        module = parse_module(make_context(), text, name)
        verify(module)
        spec = read_spec(module)
        assert spec is not None
        print(f"spec: {spec.to_text()}")
        checker = Checker(spec, args.seed)
        print(f"{'stage':<44} {'rel. error':>10}  vs previous stage")
        results: list[StageResult] = []
        reported: set[str] = set()

        def record(result: StageResult) -> None:
            results.append(result)
            print(result.row())
            if result.stopped is None:
                return
            # Located, like any other error in the IR; once, not at every stage.
            message = format_exception(result.stopped, {name: text})
            if message not in reported:
                reported.add(message)
                sys.stdout.flush()
                print(message, file=sys.stderr)

        record(checker.check("input", module))

        def after(p: ModulePass, m: ModuleOp, seconds: float) -> None:
            record(checker.check_pass(p, m))

        pipeline.run(module, callback=after)
    except (ParseError, DiagnosticException) as e:
        print(format_exception(e, {name: text}), file=sys.stderr)
        return 1
    ok = all(r.ok for r in results)
    print(checker.verdict(ok))
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from affinec.demo import run_demo

    return 0 if run_demo() else 1


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `affinec compile` and `run` beyond the spec's: the architecture,
    the knobs of a `KernelConfig` (none given: the configuration `config_for` picks
    for the spec; some given: the others at their defaults), and an optional
    pipeline."""
    parser.add_argument(
        "--arch",
        choices=ARCHS,
        help=f"GPU architecture (default: {DEFAULT_ARCH} for `compile`, the current "
        "GPU's for `run`)",
    )
    knobs = parser.add_argument_group("knobs (KernelConfig)")
    knobs.add_argument(
        "--tile-sizes",
        type=_sizes,
        help="block tile along each output dimension, outermost first",
    )
    knobs.add_argument(
        "--reduction-tile-sizes",
        type=_sizes,
        help="tile along each reduction dimension",
    )
    knobs.add_argument(
        "--register-tile",
        type=_sizes,
        help="outputs one thread owns along each output dimension",
    )
    knobs.add_argument(
        "--unroll-steps",
        type=int,
        help="reduction steps unrolled together in a register-tiled band",
    )
    knobs.add_argument(
        "--separate",
        action="store_true",
        default=None,
        help="separate full tiles (no bounds checks) from partial ones",
    )
    knobs.add_argument(
        "--no-promote",
        dest="promote",
        action="store_false",
        default=None,
        help="read global memory directly (no shared-memory copies)",
    )
    knobs.add_argument(
        "--no-fma",
        dest="fma",
        action="store_false",
        default=None,
        help="keep multiplies and adds apart (the naive IR's rounding)",
    )
    knobs.add_argument(
        "--reassociate",
        action="store_true",
        default=None,
        help="let the reduction be tiled in any order (changes the rounding)",
    )
    knobs.add_argument(
        "--no-dma",
        dest="dma",
        action="store_false",
        default=None,
        help="copy into shared memory with loads and stores, not cp.async",
    )
    knobs.add_argument(
        "--stages",
        type=int,
        help="reduction tiles in flight at once (1: copy, then compute)",
    )
    knobs.add_argument(
        "--mma",
        action="store_true",
        default=None,
        help="accumulate on tensor cores (f16, bf16; f32 with --tf32)",
    )
    knobs.add_argument(
        "--warp-grid",
        type=_sizes,
        help="with --mma: warps along the block's pixels and output channels",
    )
    knobs.add_argument(
        "--tf32",
        action="store_true",
        default=None,
        help="with --mma and f32: multiply in tf32 (10-bit mantissa operands)",
    )
    knobs.add_argument(
        "--vector-width",
        type=int,
        help="outputs a thread owns contiguously (0: 16 bytes' worth, 1: strided)",
    )
    knobs.add_argument(
        "--threads-per-block", type=int, help="threads of each block (0: derived)"
    )
    knobs.add_argument(
        "--index-bitwidth",
        type=int,
        choices=(0, 32, 64),
        help="width of index arithmetic in the kernel (0: 32 where proven to fit)",
    )
    parser.add_argument(
        "-p",
        "--passes",
        help="a pass pipeline instead of the default one (affinec-opt's syntax)",
    )


KNOBS = (
    "tile_sizes",
    "reduction_tile_sizes",
    "register_tile",
    "unroll_steps",
    "separate",
    "reassociate",
    "promote",
    "dma",
    "stages",
    "mma",
    "warp_grid",
    "tf32",
    "vector_width",
    "fma",
    "threads_per_block",
    "index_bitwidth",
)


def config_from_args(args: argparse.Namespace, spec: Spec) -> KernelConfig | None:
    """The `KernelConfig` the knob flags describe, or None when none is given (the
    compiler then picks one for the spec). `--tf32` alone is the configuration
    `config_for` picks for the spec on tf32 tensor cores."""
    given = {k: getattr(args, k) for k in KNOBS if getattr(args, k) is not None}
    if given == {"tf32": True}:
        return config_for(spec, tf32=True)
    return with_knobs(KernelConfig(), **given) if given else None


def cmd_compile(args: argparse.Namespace) -> int:
    """`affinec compile KIND --flags...`: the PTX of the spec, to `-o` or stdout."""
    spec = spec_from_args(args.kind, args)
    compiled = compile_to_ptx(
        spec,
        config_from_args(args, spec),
        pipeline=args.passes,
        arch=args.arch or DEFAULT_ARCH,
    )
    _write(compiled.ptx, args.output)
    if args.resources:
        launch = compiled.launch
        print(
            f"{compiled.name}: grid {launch.grid}, block {launch.block}, "
            f"{launch.dynamic_shared_memory} bytes dynamic shared memory",
            file=sys.stderr,
        )
        # PTX for an architecture runs on it and on newer ones.
        for arch in ARCHS[ARCHS.index(compiled.arch) :]:
            print(compiled.resources(arch).describe(), file=sys.stderr)
    if args.timing:
        for name, seconds in compiled.timings:
            print(f"{seconds * 1000:8.1f} ms  {name}", file=sys.stderr)
        print(f"{compiled.seconds * 1000:8.1f} ms  total", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Compile a spec, run it on random data on the GPU, check it, time it."""
    from affinec.runtime import current_arch, require_gpu, time_kernel

    spec = spec_from_args(args.kind, args)
    require_host_memory(spec)
    require_gpu()
    arch = args.arch or current_arch()
    config = config_from_args(args, spec)
    if config is None and args.passes is None:
        from affinec.tuning import compile_cached

        compiled = compile_cached(spec, arch)  # the tuned configuration, if cached
    else:
        compiled = compile_to_ptx(spec, config, pipeline=args.passes, arch=arch)
    kernel = compiled.runtime_kernel()
    inputs = random_inputs(spec, np.random.default_rng(args.seed))
    out = kernel(*inputs, poisoned_output(spec))
    error = relative_error(out, reference(spec, *inputs))
    tolerance = compiled.tolerance or TOLERANCE[spec.dtype]
    ok = error <= tolerance
    print(f"spec: {spec.to_text()}")
    print(
        f"compiled for {compiled.arch} in {compiled.seconds:.2f} s: grid "
        f"{compiled.launch.grid}, block {compiled.launch.block}"
    )
    if compiled.config is not None:
        print(f"config: {compiled.config.describe()} ({compiled.config_source})")
    print(
        f"relative error vs float64: {error:.2e} (tolerance "
        f"{tolerance:g}): {'ok' if ok else 'FAILED'}"
    )
    if ok:
        ms = time_kernel(kernel, inputs, repeat=args.repeat)
        print(
            f"time: {ms:.3f} ms (median of {args.repeat} batches), "
            f"{spec.flops / (ms * 1e-3) / 1e12:.2f} TFLOP/s"
        )
    return 0 if ok else 1


def require_host_memory(spec: Spec) -> None:
    """Refuse, before allocating, a run whose inputs, output and float64 reference
    would not fit in this machine's memory."""
    need = host_bytes(spec)
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise UsageError(
            f"running {spec.to_text()} needs about {need:,} bytes of host memory for "
            f"its inputs, output and float64 reference; this machine has {have:,}"
        )


def cmd_bench(args: argparse.Namespace) -> int:
    """The DESIGN.md convolutions against cuDNN (see affinec.benchmark)."""
    from affinec.benchmark import run_benchmarks

    return run_benchmarks(args.only, args.dtype, args.layout, args.json)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(DESIGN_CONVOLUTIONS),
        help="some of the convolutions (default: all five)",
    )
    parser.add_argument(
        "--dtype",
        nargs="+",
        choices=(*DTYPES, "tf32"),
        default=["f16", "f32"],
        help="storage types to run (default: f16 and f32; tf32: f32 on the tensor "
        "cores, against cuDNN's TF32)",
    )
    parser.add_argument(
        "--layout",
        choices=("nhwc", "nchw"),
        default="nhwc",
        help="our kernel's layout (cuDNN always gets channels_last)",
    )
    parser.add_argument("--json", help="also write the results to this JSON file")


def _tune_options(args: argparse.Namespace, arch: str):
    from affinec.tuning import TuneOptions

    return TuneOptions(
        budget_s=args.budget_s,
        top=args.top,
        explore=args.explore,
        finalists=args.finalists,
        max_candidates=args.max_candidates,
        jobs=args.jobs,
        arch=arch,
        seed=args.seed,
        progress=not args.no_progress and sys.stderr.isatty(),
        measure_cudnn=args.cudnn,
    ).validate()


def cmd_tune(args: argparse.Namespace) -> int:
    """`affinec tune --list`, or tune one spec (see affinec.tuning)."""
    from affinec.tuning import TuningCache

    cache = TuningCache(args.cache)
    if args.list:
        if args.kind:
            raise UsageError("--list shows the cache and takes no spec")
        print(format_cache(cache))
        return 0
    if not args.kind:
        raise UsageError(
            "give a spec to tune (affinec tune conv --n ... ) or --list to show "
            "the cache"
        )
    if args.dry_run:
        return _tune_dry_run(args, cache)
    from affinec.runtime import current_arch, require_gpu
    from affinec.tuning import cached_entry, tune_and_store

    # Every flag is checked before the GPU is asked for.
    _tune_options(args, args.arch or DEFAULT_ARCH)
    spec = spec_from_args(args.kind, args)
    require_gpu()
    arch = args.arch or current_arch()
    options = _tune_options(args, arch)
    if not args.force and (entry := cached_entry(spec, arch, cache)) is not None:
        print(f"spec: {spec.to_text()}")
        print(
            f"cached ({cache.path}): {entry.config.describe()}: {entry.ms:.4f} ms on "
            f"{entry.gpu}, tuned {entry.tuned_at} (--force tunes again)"
        )
        return 0
    log = _log_path(args, cache, spec)
    result = tune_and_store(spec, options, cache, log=log)
    print(result.report())
    print(f"log: {log}")
    if result.best is not None:
        print(f"cache: {cache.path}")
    _tune_plot(result, log)
    return 0 if result.best is not None else 1


def _log_path(args: argparse.Namespace, cache, spec: Spec):
    import hashlib
    from pathlib import Path

    folder = Path(args.log_dir) if args.log_dir else cache.path.parent / "logs"
    digest = hashlib.sha256(spec.to_text().encode()).hexdigest()[:10]
    return folder / f"{spec.kind}-{digest}.jsonl"


def _tune_plot(result, log) -> None:
    from affinec.tuning.plots import SpecTimes, plot_tuning, plots_available

    if not plots_available():
        print("plots: matplotlib is not installed (pip install 'affinec[plots]')")
        return
    path = plot_tuning(
        [
            SpecTimes(
                result.spec.describe(),  # pyright: ignore[reportAttributeAccessIssue]
                [r.to_json() for r in result.records],
                result.cudnn_ms,
            )
        ],
        log.with_suffix(".png"),
    )
    print(f"plot: {path}")


def _tune_dry_run(args: argparse.Namespace, cache) -> int:
    """Enumerate, compile and rank without a GPU; print the model's favourites."""
    from affinec.tuning import tune, write_log

    options = _tune_options(args, args.arch or "sm_90")
    spec = spec_from_args(args.kind, args)
    result = tune(spec, None, options)
    ranked = sorted(
        (r for r in result.records if r.rank is not None), key=lambda r: r.rank or 0
    )
    print(f"spec: {spec.to_text()}")
    print(f"{'rank':>4} {'pred. ms':>9} {'regs':>4} {'thr':>4} {'occ':>5}  config")
    for r in ranked[: options.top]:
        print(
            f"{r.rank:>4} {r.predicted_ms:9.4f} {r.registers:>4} {r.threads:>4} "
            f"{r.occupancy:5.2f}  {r.config.describe()}"
        )
    print(result.report())
    if args.log_dir:
        log = _log_path(args, cache, spec)
        write_log(result, log)
        print(f"log: {log}")
    return 0


def format_cache(cache) -> str:
    """What `affinec tune --list` prints: every entry, stale ones marked."""
    from affinec.tuning import compiler_version

    entries = cache.entries()
    current = compiler_version()
    if not entries:
        return f"the tuning cache {cache.path} holds no configurations"
    lines = [f"tuning cache {cache.path} (this compiler: {current})"]
    for e in sorted(entries, key=lambda e: (e.spec, e.gpu, e.tuned_at)):
        speedup = (
            f", {e.baseline_ms / e.ms:.2f}x config_for"
            if e.baseline_ms and e.ms
            else ""
        )
        cudnn = f", {e.cudnn_ms / e.ms:.2f}x cuDNN" if e.cudnn_ms and e.ms else ""
        stale = "" if e.compiler == current else f"  [stale: compiler {e.compiler}]"
        lines.append(e.spec)
        lines.append(
            f"    {e.gpu}, {e.arch}: {e.ms:.4f} ms{speedup}{cudnn}, {e.measured} "
            f"measured, tuned {e.tuned_at}{stale}"
        )
        lines.append(f"    {e.config.describe()}")
    return "\n".join(lines)


def add_tune_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `affinec tune KIND` beyond the spec's."""
    from affinec.tuning.space import MAX_CANDIDATES

    parser.add_argument(
        "--budget-s",
        type=float,
        default=120.0,
        help="wall time for tuning the spec, compiling included (default 120)",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=24,
        help="configurations measured in the cost model's order (default 24)",
    )
    parser.add_argument(
        "--explore",
        type=int,
        default=8,
        help="more measured at random from the rest of the ranking, to check the "
        "model (default 8)",
    )
    parser.add_argument(
        "--finalists",
        type=int,
        default=3,
        help="the fastest, timed again with the benchmark's full method (default 3)",
    )
    parser.add_argument(
        "--max-candidates",
        type=int,
        default=MAX_CANDIDATES,
        help="configurations compiled, chosen by the cost model (default "
        f"{MAX_CANDIDATES})",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="compiler processes (default 0: every core but one)",
    )
    parser.add_argument(
        "--arch",
        choices=ARCHS,
        help="GPU architecture (default: the current GPU's; sm_90 for --dry-run)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of inputs and picks")
    parser.add_argument(
        "--log-dir",
        help="where the JSON-lines log (and plot) goes (default: logs/ beside the "
        "cache)",
    )
    parser.add_argument(
        "--cudnn", action="store_true", help="also time cuDNN on the same inputs"
    )
    parser.add_argument(
        "--force", action="store_true", help="tune even if the cache has the spec"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: enumerate, compile and rank with the cost model only",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bars on stderr"
    )
    parser.add_argument(
        "--cache",
        default=argparse.SUPPRESS,
        help="the tuning cache file (default: $AFFINEC_TUNING_CACHE, else "
        "$XDG_CACHE_HOME/affinec/tuning.json)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="affinec",
        description="affinec: from a naive affine convolution to a GPU kernel",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = commands.add_parser("gen", help="print the naive IR of a spec")
    kinds = add_spec_subcommands(gen, "the naive IR of")
    for sub in kinds.choices.values():
        sub.add_argument("-o", "--output", help="write to FILE instead of stdout")
    gen.set_defaults(run=cmd_gen)

    check = commands.add_parser(
        "check",
        help="apply a pipeline and interpret every stage against the float64 reference",
    )
    check.add_argument("file", help="an .mlir file made by `affinec gen` ('-': stdin)")
    check.add_argument(
        "-p", "--passes", help="the pass pipeline (affinec-opt's syntax)"
    )
    check.add_argument(
        "--seed", type=_count(0), default=0, help="seed of the random inputs"
    )
    check.set_defaults(run=cmd_check)

    demo = commands.add_parser("demo", help="the default convolution, stage by stage")
    demo.set_defaults(run=cmd_demo)

    compile_ = commands.add_parser(
        "compile", help="compile a spec to PTX with the default pipeline"
    )
    for sub in add_spec_subcommands(compile_, "the PTX of").choices.values():
        add_compile_arguments(sub)
        sub.add_argument(
            "--resources",
            action="store_true",
            help="print what ptxas reports (registers, shared memory, spills) to "
            "stderr",
        )
        sub.add_argument(
            "--timing",
            action="store_true",
            help="print the time of each stage to stderr",
        )
        sub.add_argument(
            "-o", "--output", help="write the PTX to FILE instead of stdout"
        )
    compile_.set_defaults(run=cmd_compile)

    run = commands.add_parser(
        "run", help="compile a spec, run it on the GPU, check it and time it"
    )
    for sub in add_spec_subcommands(run, "run").choices.values():
        add_compile_arguments(sub)
        sub.add_argument("--repeat", type=_count(1), default=10, help="timed batches")
        sub.add_argument("--seed", type=_count(0), default=0, help="seed of the inputs")
    run.set_defaults(run=cmd_run)

    tune = commands.add_parser(
        "tune",
        help="find a spec's fastest configuration on the GPU and cache it "
        "(--list: show the cache)",
    )
    tune.add_argument(
        "--list", action="store_true", help="show the tuning cache, stale entries too"
    )
    tune.add_argument(
        "--cache",
        help="the tuning cache file (default: $AFFINEC_TUNING_CACHE, else "
        "$XDG_CACHE_HOME/affinec/tuning.json)",
    )
    tune_kinds = tune.add_subparsers(dest="kind", metavar="KIND")
    for kind in ("conv", "matmul"):
        sub = tune_kinds.add_parser(kind, help=f"tune a {kind}")
        SPEC_ARGUMENTS[kind](sub)
        add_tune_arguments(sub)
    tune.set_defaults(run=cmd_tune)

    bench = commands.add_parser(
        "bench", help="DESIGN.md's convolutions against cuDNN, on the GPU"
    )
    add_bench_arguments(bench)
    bench.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # `--help`, or a flag's error argparse has printed
        return e.code if isinstance(e.code, int) else 1
    try:
        return args.run(args)
    except (
        UsageError,
        NoCudaGPU,
        KernelArgumentError,
        SharedMemoryError,
        PipelineError,
        InterpreterError,
        ValueError,
        OSError,
        ParseError,
        DiagnosticException,
    ) as e:
        print(format_exception(e), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
