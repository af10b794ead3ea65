"""The compiler: a spec (or its IR) to PTX and what it takes to launch it.

    from affinec.compiler import compile_to_ptx
    kernel = compile_to_ptx(ConvSpec(n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=1))
    kernel.ptx                  # PTX text (sm_80 unless arch="sm_90")
    kernel.name                 # its entry point, "conv_kernel"
    kernel.launch               # LaunchRecord: grid, block, shared memory, arguments
    kernel.resources()          # registers, shared memory, spills (ptxas -v)
    kernel.runtime_kernel()     # affinec.runtime.Kernel, ready to call on a GPU

`affinec compile conv ...` is `run_compile_command`; `add_compile_arguments` adds its
flags (`--arch`, tile options, `--resources`) to a subcommand that already has the
spec's flags.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from affinec.diagnostics import PassError
from affinec.dialects.affinec import SPEC, LaunchRecord
from affinec.emitter import ARCHS, DEFAULT_ARCH, emit
from affinec.gpu_pipelines import default_pipeline
from affinec.pipeline import Pipeline, pass_text
from affinec.ptxas import Resources, assemble
from affinec.spec import Spec, parse_spec
from affinec.transforms.gpu.outlining import find_kernels

if TYPE_CHECKING:
    from affinec.runtime import Kernel


@dataclass
class CompiledKernel:
    """One compiled kernel: PTX, entry point, launch record, and how it was made."""

    ptx: str
    name: str
    """The PTX entry point (`.entry`), as `launch.kernel`."""
    launch: LaunchRecord
    """Grid, block, dynamic shared memory and the arguments, in parameter order."""
    module: ModuleOp
    """The final IR (llvm + nvvm level; the host function keeps its gpu.launch_func)."""
    arch: str
    llvm_ir: str
    """The LLVM IR the PTX was compiled from (before LLVM's optimizations)."""
    pipeline: str
    spec: Spec | None = None
    timings: list[tuple[str, float]] = field(default_factory=list)
    """Seconds per stage: each pass, then `llvm-ir` and `ptx`."""

    @property
    def seconds(self) -> float:
        return sum(t for _, t in self.timings)

    def resources(self, arch: str | None = None) -> Resources:
        """What ptxas reports for the kernel (assembling it for `arch`)."""
        return assemble(self.ptx, arch or self.arch)[self.name]

    def runtime_kernel(self) -> Kernel:
        """The kernel as `affinec.runtime` launches it."""
        from affinec.runtime import Kernel, Parameter

        parameters = [
            Parameter(a.name, a.shape, a.dtype, output=a.name in self.launch.outputs)
            for a in self.launch.arguments
        ]
        return Kernel(
            self.ptx,
            self.name,
            self.launch.grid,
            self.launch.block,
            parameters,
            self.launch.dynamic_shared_memory,
            info={
                "spec": self.spec.to_text() if self.spec else None,
                "pipeline": self.pipeline,
                "arch": self.arch,
            },
        )


def compile_to_ptx(
    spec_or_module: Spec | ModuleOp,
    pipeline: str | None = None,
    arch: str = DEFAULT_ARCH,
    *,
    tile_sizes: Sequence[int] | None = None,
    reduction_tile_sizes: Sequence[int] | None = None,
    separate: bool = False,
    threads_per_block: int = 0,
    index_bitwidth: int = 64,
    opt_level: int = 3,
    check: bool = False,
    callback: Callable[[ModulePass, ModuleOp, float], None] | None = None,
) -> CompiledKernel:
    """Compile a spec (built by the frontend) or a module (naive IR, or any level the
    pipeline continues from) to PTX for `arch`.

    `pipeline` defaults to the default pipeline with the given tile options. A module
    is rewritten in place. With `check`, every pass is interpreted against the one
    before (slow: small specs only); `callback(pass, module, seconds)` is called
    after every pass, as `Pipeline.run` calls it. Errors: `PipelineError`, `PassError` (located),
    `EmitterError`, and ValueError for a module with no or several kernels.
    """
    if arch not in ARCHS:
        raise ValueError(
            f"unknown GPU architecture '{arch}' (expected one of {', '.join(ARCHS)})"
        )
    if isinstance(spec_or_module, ModuleOp):
        module = spec_or_module
        spec = _spec_of(module)
    else:
        from affinec.frontend import build

        spec = spec_or_module
        module = build(spec)
    text = pipeline or default_pipeline(
        tile_sizes,
        reduction_tile_sizes,
        separate=separate,
        threads_per_block=threads_per_block,
        index_bitwidth=index_bitwidth,
    )
    timings: list[tuple[str, float]] = []

    def after(p: ModulePass, m: ModuleOp, seconds: float) -> None:
        timings.append((pass_text(p), seconds))
        if callback is not None:
            callback(p, m, seconds)

    Pipeline.parse(text).run(module, check=check, callback=after)
    kernels = find_kernels(module)
    if len(kernels) != 1:
        raise ValueError(
            f"the pipeline left {len(kernels)} kernels; the compiler handles exactly one"
        )
    kernel, record = kernels[0]
    if record is None:
        raise PassError(kernel, "the kernel has no launch record (affinec.launch)")
    start = time.perf_counter()
    emitted = emit(module, arch, opt_level)
    timings.append(("llvm-ir + ptx", time.perf_counter() - start))
    return CompiledKernel(
        ptx=emitted.ptx,
        name=record.kernel,
        launch=record,
        module=module,
        arch=arch,
        llvm_ir=emitted.llvm_ir,
        pipeline=text,
        spec=spec,
        timings=timings,
    )


def _spec_of(module: ModuleOp) -> Spec | None:
    attr = module.attributes.get(SPEC)
    return parse_spec(attr.data) if isinstance(attr, StringAttr) else None


# --------------------------------------------------------------------------------------
# affinec compile
# --------------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    return sizes


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """`affinec compile KIND`'s own flags (the spec's flags are added separately)."""
    parser.add_argument(
        "--arch",
        choices=ARCHS,
        help=f"GPU architecture (default: {DEFAULT_ARCH} for `compile`, the current "
        "GPU's for `run`)",
    )
    parser.add_argument(
        "--tile-sizes",
        type=_sizes,
        help="block tile along each output dimension, outermost first "
        "(default: about 256 points, 16 along the innermost two)",
    )
    parser.add_argument(
        "--reduction-tile-sizes",
        type=_sizes,
        help="tile along each reduction dimension (default: up to 64 points)",
    )
    parser.add_argument(
        "--separate",
        action="store_true",
        help="separate full tiles (no bounds checks) from partial ones",
    )
    parser.add_argument(
        "--threads-per-block",
        type=int,
        default=0,
        help="threads of each block (default: the block tile's size, at most 256)",
    )
    parser.add_argument(
        "--index-bitwidth",
        type=int,
        choices=(32, 64),
        default=64,
        help="width of index arithmetic in the kernel (default %(default)s)",
    )
    parser.add_argument(
        "-p",
        "--passes",
        help="a pass pipeline instead of the default one (affinec-opt's syntax)",
    )
    parser.add_argument(
        "--resources",
        action="store_true",
        help="print what ptxas reports (registers, shared memory, spills) to stderr",
    )
    parser.add_argument(
        "--timing", action="store_true", help="print the time of each stage to stderr"
    )
    parser.add_argument(
        "-o", "--output", help="write the PTX to FILE instead of stdout"
    )


def run_compile_command(args: argparse.Namespace) -> int:
    """`affinec compile KIND --flags...`: the PTX of the spec, to `-o` or stdout."""
    from affinec.cli import spec_from_args

    spec = spec_from_args(getattr(args, "kind", "conv"), args)
    compiled = compile_to_ptx(
        spec,
        args.passes,
        args.arch or DEFAULT_ARCH,
        tile_sizes=args.tile_sizes,
        reduction_tile_sizes=args.reduction_tile_sizes,
        separate=args.separate,
        threads_per_block=args.threads_per_block,
        index_bitwidth=args.index_bitwidth,
    )
    if args.output:
        with open(args.output, "w") as f:
            f.write(compiled.ptx)
    else:
        sys.stdout.write(compiled.ptx)
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
