"""`affinec`: generate, check and demonstrate.

    affinec gen conv --n 1 --c 8 --h 8 --w 8 --k 8 --r 3 --s 3 --pad 1   # naive IR
    affinec gen matmul --m 64 --n 64 --k 64
    affinec check conv.mlir -p 'affine-loop-tile{...}'  # interpret each stage vs numpy
    affinec demo                                         # the main job, stage by stage

Every user error is one `error: ...` line (located for IR) and exit code 1.

This module owns the parser and the commands; the flags several commands share (a
spec's, the knobs') are `affinec.tools.cli_flags`'s, `affinec tune` is `affinec.tools.cli_tune`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException, ParseError

from affinec.backend.errors import KernelArgumentError, NoCudaGPU, SharedMemoryError
from affinec.base.diagnostics import decode_source, format_exception, verify
from affinec.base.extras import MissingExtra
from affinec.base.locating_parser import parse_module
from affinec.base.spec import DTYPES, ConvSpec, Spec
from affinec.dialects.affinec import read_spec
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS
from affinec.driver.pipeline import Pipeline, PipelineError
from affinec.driver.pipeline_names import pipeline_text
from affinec.frontend.naive import build
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH
from affinec.ir.context import make_context
from affinec.tools.cli_flags import (
    KNOBS,
    SPEC_ARGUMENTS,
    UsageError,
    add_compile_arguments,
    add_conv_arguments,
    add_matmul_arguments,
    add_outer_arguments,
    add_spec_subcommands,
    config_from_args,
    spec_from_args,
)
from affinec.tools.cli_tune import (
    add_network_arguments,
    add_tune_arguments,
    cmd_tune,
    format_cache,
)
from affinec.tools.pipes import broken_pipe_exit

# The commands import what only they need (the interpreter, LLVM, numpy, the
# runtime) themselves: `affinec gen` and `--help` should not wait for them.
if TYPE_CHECKING:
    from affinec.driver.checking import StageResult


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its errors as every other error of `affinec`: one
    `error: ...` line and exit code 1 (argparse's own way is the usage text and
    exit code 2). Subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {self.prog}: {message} (see '{self.prog} --help')\n")

    def parse_known_args(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # Each parser names itself before it parses; a subcommand's parser, which
        # argparse runs inside its parent's, names itself last.
        namespace = argparse.Namespace() if namespace is None else namespace
        namespace.innermost_parser = self
        return super().parse_known_args(args, namespace)

    def parse_args(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> argparse.Namespace:
        """argparse's, with a flag no parser knows refused by the subcommand that
        was given it (`affinec gen conv: unrecognized arguments: --padding 1`)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parsed.innermost_parser.error(f"unrecognized arguments: {' '.join(extras)}")
        del parsed.innermost_parser
        return parsed


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
        return decode_source(sys.stdin.buffer.read(), "<stdin>"), "<stdin>"
    with open(path, "rb") as f:
        return decode_source(f.read(), path), path


def cmd_check(args: argparse.Namespace) -> int:
    from affinec.driver.checking import Checker

    text, name = read_source(args.file)
    pipeline = Pipeline.parse(args.passes or "")
    try:
        module = parse_module(make_context(), text, name)
        verify(module)
        pipeline = Pipeline.for_module(args.passes or "", module)
        # Input that records no spec (linalg, which affinec-lower-linalg turns into
        # the naive IR of its spec) is checked from the first stage that has one.
        passes = list(pipeline.passes)
        lead: list[ModulePass] = []
        while (
            passes and read_spec(module, required=False) is None and _has_linalg(module)
        ):
            lead.append(passes.pop(0))
            Pipeline([lead[-1]]).run(module)
        pipeline = Pipeline(passes)
        if read_spec(module, required=False) is None and _has_linalg(module):
            raise UsageError(
                "linalg input records no spec until affinec-lower-linalg turns it "
                "into the naive IR of one: start the pipeline with it (-p "
                "affinec-lower-linalg or -p affinec-lower-linalg,affinec-default)"
            )
        if read_spec(module, required=False) is None and lead:
            raise UsageError(
                f"the module records no spec after {pipeline_text(lead)} (its op is "
                "no spec affinec knows): affinec check compares every stage with the "
                "float64 reference of a spec"
            )
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

        first = "input" + (f" after {pipeline_text(lead)}" if lead else "")
        record(checker.check(first, module))
        if results[0].stopped is not None:
            # Nothing to compare the passes with (and each would run as long).
            print("FAILED: the input itself does not run; no pass was checked")
            return 1

        def after(p: ModulePass, m: ModuleOp, seconds: float) -> None:
            record(checker.check_pass(p, m))

        pipeline.run(module, callback=after)
    except (ParseError, DiagnosticException) as e:
        print(format_exception(e, {name: text}), file=sys.stderr)
        return 1
    ok = all(r.ok for r in results)
    print(checker.verdict(ok))
    return 0 if ok else 1


def _has_linalg(module: ModuleOp) -> bool:
    return any(op.dialect_name() == "linalg" for op in module.walk())


def cmd_demo(args: argparse.Namespace) -> int:
    from affinec.tools.demo import run_demo

    return 0 if run_demo() else 1


def cmd_compile(args: argparse.Namespace) -> int:
    """`affinec compile KIND --flags...`: the PTX of the spec, to `-o` or stdout."""
    from affinec.backend.ptxas import assemble
    from affinec.driver.compiler import compile_to_ptx

    spec = spec_from_args(args.kind, args)
    arch = args.arch or DEFAULT_ARCH
    compiled = compile_to_ptx(
        spec, config_from_args(args, spec, arch), pipeline=args.passes, arch=arch
    )
    _write(compiled.ptx, args.output)
    for note in compiled.remarks:
        print(note, file=sys.stderr)
    if args.resources:
        for launch in compiled.launches:
            print(
                f"{launch.kernel}: grid {launch.grid_text}, block {launch.block}, "
                f"{launch.dynamic_shared_memory} bytes dynamic shared memory",
                file=sys.stderr,
            )
        # PTX for an architecture runs on it and on newer ones.
        for arch in ARCHS[ARCHS.index(compiled.arch) :]:
            found = assemble(compiled.ptx, arch)
            for launch in compiled.launches:
                print(found[launch.kernel].describe(), file=sys.stderr)
    if args.sass:
        from affinec.backend.sass import sass

        _write("\n".join(sass(compiled.ptx, compiled.arch)) + "\n", args.sass)
    if args.timing:
        for name, seconds in compiled.timings:
            print(f"{seconds * 1000:8.1f} ms  {name}", file=sys.stderr)
        print(f"{compiled.seconds * 1000:8.1f} ms  total", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Compile a spec, run it on random data on the GPU, check it, time it."""
    import numpy as np

    from affinec.backend.runtime import current_arch, require_gpu
    from affinec.backend.timing import time_kernel
    from affinec.driver.compiler import compile_to_ptx
    from affinec.frontend.reference import (
        poisoned_output,
        random_inputs,
        reference,
        relative_error,
        verdict,
    )

    spec = spec_from_args(args.kind, args)
    batches = getattr(args, "batches", None) or []
    if batches and not (isinstance(spec, ConvSpec) and spec.dynamic_batch):
        raise UsageError("--batches runs a kernel of any batch: add --dynamic-batch")
    if any(b < 1 for b in batches):
        raise UsageError(f"--batches: every batch must be at least 1, got {batches}")
    runs = [replace(spec, n=b) for b in batches] or [spec]  # pyright: ignore
    for each in runs:
        require_host_memory(each)
    require_gpu()
    arch = args.arch or current_arch()
    config = config_from_args(args, spec, arch)
    if config is None and args.passes is None:
        from affinec.tuning import compile_cached

        compiled = compile_cached(spec, arch)  # the tuned configuration, if cached
    else:
        compiled = compile_to_ptx(spec, config, pipeline=args.passes, arch=arch)
    kernel = compiled.runtime_kernel()
    print(f"spec: {spec.to_text()}")
    geometry = "; then ".join(
        f"grid {r.grid_text}, block {r.block}" for r in compiled.launches
    )
    print(f"compiled for {compiled.arch} in {compiled.seconds:.2f} s: {geometry}")
    if compiled.config is not None:
        print(f"config: {compiled.config.describe()} ({compiled.config_source})")
    ok = True
    for each in runs:  # one kernel; with --batches, each batch in turn
        inputs = random_inputs(each, np.random.default_rng(args.seed))
        out = kernel(*inputs, poisoned_output(each))
        checked = verdict(
            each, relative_error(out, reference(each, *inputs)), compiled.tolerance
        )
        ok = ok and checked.ok
        at = f"batch {each.n}: " if batches else ""  # pyright: ignore
        print(f"{at}against float64: {checked.describe()}")
        if checked.ok:
            ms = time_kernel(kernel, inputs, repeat=args.repeat)
            print(
                f"{at}time: {ms:.4f} ms (median of {args.repeat} batches), "
                f"{each.flops / (ms * 1e-3) / 1e12:.3g} TFLOP/s"
            )
    return 0 if ok else 1


def require_host_memory(spec: Spec) -> None:
    """Refuse, before allocating, a run whose inputs, output and float64 reference
    would not fit in this machine's memory."""
    from affinec.frontend.reference import host_bytes

    need = host_bytes(spec)
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise UsageError(
            f"running {spec.to_text()} needs about {need:,} bytes of host memory for "
            f"its inputs, output and float64 reference; this machine has {have:,}"
        )


def cmd_bench(args: argparse.Namespace) -> int:
    """The five benchmark convolutions against cuDNN (see affinec.driver.benchmark)."""
    from affinec.driver.benchmark import run_benchmarks

    return run_benchmarks(
        args.only, args.dtype, args.layout, args.json, args.wgmma, args.arch
    )


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
    parser.add_argument(
        "--wgmma",
        action="store_true",
        help="compile the convolutions the wgmma route takes on it, for sm_90a "
        "(an H100: TMA, mbarriers, warpgroup MMA)",
    )
    parser.add_argument(
        "--arch",
        choices=ARCHS,
        help="the target to compile for (default: the GPU's, sm_90a on an H100)",
    )
    parser.add_argument("--json", help="also write the results to this JSON file")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="affinec",
        description="affinec: from a naive affine convolution to a GPU kernel",
    )
    from affinec import __version__

    parser.add_argument("--version", action="version", version=f"affinec {__version__}")
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
        sub.add_argument(
            "--sass",
            metavar="FILE",
            help="write the GPU instructions ptxas makes of the PTX (cuobjdump's "
            "SASS, one a line, without addresses) to FILE; no GPU needed",
        )
    compile_.set_defaults(run=cmd_compile)

    run = commands.add_parser(
        "run", help="compile a spec, run it on the GPU, check it and time it"
    )
    for sub in add_spec_subcommands(run, "run").choices.values():
        add_compile_arguments(sub)
        sub.add_argument("--repeat", type=_count(1), default=10, help="timed batches")
        sub.add_argument("--seed", type=_count(0), default=0, help="seed of the inputs")
        if sub.prog.endswith(" conv"):
            sub.add_argument(
                "--batches",
                type=int,
                nargs="+",
                metavar="B",
                help="with --dynamic-batch: run the one compiled kernel at each batch",
            )
    run.set_defaults(run=cmd_run)

    tune = commands.add_parser(
        "tune",
        # its flags may come before the kind: no abbreviations (`--c` is the spec's)
        allow_abbrev=False,
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
    add_tune_arguments(tune, given_before=True)
    tune_kinds = tune.add_subparsers(dest="kind", metavar="KIND")
    for kind in ("conv", "matmul"):
        sub = tune_kinds.add_parser(kind, help=f"tune a {kind}")
        SPEC_ARGUMENTS[kind](sub)
        add_tune_arguments(sub, given_before=False)
    add_network_arguments(
        tune_kinds.add_parser(
            "network", help="tune every distinct convolution of a network"
        )
    )
    tune.set_defaults(run=cmd_tune)

    bench = commands.add_parser(
        "bench", help="the benchmark convolutions against cuDNN, on the GPU"
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
    except BrokenPipeError:
        # the reader of the output went away (`affinec gen ... | head`)
        return broken_pipe_exit()
    except (
        UsageError,
        NoCudaGPU,
        KernelArgumentError,
        SharedMemoryError,
        PipelineError,
        ValueError,
        OSError,
        ParseError,
        DiagnosticException,
        MissingExtra,
    ) as e:
        print(format_exception(e), file=sys.stderr)
    return 1


__all__ = [
    "KNOBS",
    "SPEC_ARGUMENTS",
    "ArgumentParser",
    "UsageError",
    "add_bench_arguments",
    "add_compile_arguments",
    "add_conv_arguments",
    "add_matmul_arguments",
    "add_outer_arguments",
    "add_spec_subcommands",
    "add_tune_arguments",
    "build_parser",
    "cmd_bench",
    "cmd_check",
    "cmd_compile",
    "cmd_demo",
    "cmd_gen",
    "cmd_run",
    "cmd_tune",
    "config_from_args",
    "format_cache",
    "main",
    "read_source",
    "require_host_memory",
    "spec_from_args",
]

if __name__ == "__main__":
    sys.exit(main())
