"""The flags `affinec`'s subcommands share: a spec's (`conv`, `matmul`, `outer`, and
the subcommands that take them) and a `KernelConfig`'s knobs (`compile`, `run`), with
the spec and configuration they describe; and `UsageError`, how a command reports a
mistake on its command line.

`affinec.tools.cli` builds the parser from these pieces.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from affinec.base.spec import (
    DTYPES,
    EPILOGUES,
    FILTER_LAYOUTS,
    LAYOUTS,
    ConvSpec,
    MatmulSpec,
    OuterSpec,
    Spec,
)
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH, chip

if TYPE_CHECKING:
    from affinec.driver.config import KernelConfig

# affinec.driver.config (and the wgmma planner) load in the functions that read the
# knobs: `affinec gen`, `check` and `--help` start without the configurations


class UsageError(Exception):
    """A mistake on the command line or in its input, reported as `error: ...`."""


# -- spec flags ---------------------------------------------------------------------------


EPILOGUE_HELP = (
    f"{', '.join(EPILOGUES)}, or steps in this order, comma-separated: "
    "scale,bias,residual then relu or relu6 (out = act(sum * scale + bias + "
    "residual); scale and bias one per output channel, residual shaped as the "
    "output)"
)


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
    p.add_argument(
        "--epilogue",
        default="none",
        metavar="STEPS",
        help=EPILOGUE_HELP,
    )
    p.add_argument(
        "--groups",
        type=int,
        default=1,
        help="groups of channels: each filter sees C/G of them (G = C = K: depthwise)",
    )
    p.add_argument(
        "--dynamic-batch",
        action="store_true",
        help="one kernel for any batch (memref<?x...>, the grid sized at launch); "
        "--n is then the batch it is configured and checked for",
    )


def add_matmul_arguments(p: argparse.ArgumentParser) -> None:
    for name in ("m", "n", "k"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--dtype", choices=DTYPES, default="f32")
    p.add_argument(
        "--epilogue",
        default="none",
        metavar="STEPS",
        help=EPILOGUE_HELP,
    )


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
            groups=args.groups,
            dynamic_batch=args.dynamic_batch,
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
        article = "an" if kind[0] in "aeiou" else "a"
        add(kinds.add_parser(kind, help=f"{help_prefix} {article} {kind}"))
    return kinds


# -- knob flags ---------------------------------------------------------------------------


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
        "--pad-channels",
        type=int,
        help="pad the channel loop with zeros to a multiple of N (3 channels as 4: "
        "the tensor cores' coalesced k)",
    )
    knobs.add_argument(
        "--coalesce-reduction",
        action="store_true",
        default=None,
        help="a filter row's columns x channels as one reduction loop (the tensor "
        "cores' k for few channels)",
    )
    knobs.add_argument(
        "--stages",
        type=int,
        help="reduction tiles in flight at once (1: copy, then compute)",
    )
    knobs.add_argument(
        "--splits",
        type=int,
        help="split the channel reduction into N partial sums, each its own blocks, "
        "added by a second kernel (split-K: for layers of few blocks)",
    )
    knobs.add_argument(
        "--flatten-pixels",
        action="store_true",
        default=None,
        help="compile a 1x1, stride-1, unpadded NHWC convolution as the matrix "
        "product of its flattened pixels (the other knobs are the product's)",
    )
    knobs.add_argument(
        "--mma",
        action="store_true",
        default=None,
        help="accumulate on tensor cores (f16, bf16; f32 with --tf32)",
    )
    knobs.add_argument(
        "--tensor-core",
        choices=("mma.sync", "wgmma"),
        help="with --mma: the tensor cores' instruction, warp-level mma.sync or "
        "(sm_90a) warpgroup MMA in the same pipeline (affinec-wgmma)",
    )
    knobs.add_argument(
        "--tma",
        action="store_true",
        default=None,
        help="with --tensor-core wgmma: load the tiles by TMA, each stage completing "
        "on an mbarrier (affinec-tma-copies), instead of cp.async copies",
    )
    knobs.add_argument(
        "--in-flight",
        action="store_true",
        default=None,
        help="with --tensor-core wgmma: leave warpgroup MMAs in flight while the "
        "next ones' operands load (with --tma: 3 stages or more)",
    )
    knobs.add_argument(
        "--warp-specialize",
        action="store_true",
        default=None,
        help="with --tensor-core wgmma --tma: a producer warpgroup issues the TMA "
        "loads, the others only multiply (affinec-warp-specialize, setmaxnreg)",
    )
    knobs.add_argument(
        "--wgmma",
        action="store_true",
        default=None,
        help="on sm_90a: the product as a Hopper kernel (TMA, mbarrier stages, "
        "wgmma); f16/bf16 matrix products and 1x1 convolutions",
    )
    knobs.add_argument(
        "--wgmma-tile",
        type=_sizes,
        help="with --wgmma: a block's tile of the output, ROWS,COLUMNS",
    )
    knobs.add_argument(
        "--wgmma-schedule",
        choices=("waited", "in-flight", "specialized", "cooperative"),
        help="with --wgmma: MMAs waited for each step, left in flight, a loading "
        "and a multiplying warpgroup, or a loading one and two multiplying 64 rows "
        "each (128x256 tiles)",
    )
    knobs.add_argument(
        "--warp-grid",
        type=_sizes,
        help="with --mma: warps along the block's pixels and output channels",
    )
    knobs.add_argument(
        "--unroll-taps",
        action="store_true",
        default=None,
        help="with --mma: unroll a step's filter taps (the next tap's fragment "
        "loads overlap this tap's MMAs)",
    )
    knobs.add_argument(
        "--stage-output",
        action="store_true",
        default=None,
        help="with --mma: store the output through shared memory, 16 bytes a thread",
    )
    knobs.add_argument(
        "--split-phases",
        action="store_true",
        default=None,
        help="store a shared tile read with a stride (a strided window's input "
        "columns) by phase, even then odd, where that costs fewer bank conflicts",
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
    "coalesce_reduction",
    "pad_channels",
    "stages",
    "splits",
    "flatten_pixels",
    "wgmma",
    "wgmma_tile",
    "wgmma_schedule",
    "mma",
    "tensor_core",
    "tma",
    "in_flight",
    "warp_specialize",
    "warp_grid",
    "unroll_taps",
    "stage_output",
    "split_phases",
    "tf32",
    "vector_width",
    "fma",
    "threads_per_block",
    "index_bitwidth",
)


def config_from_args(
    args: argparse.Namespace, spec: Spec, arch: str
) -> KernelConfig | None:
    """The `KernelConfig` the knob flags describe, or None when none is given (the
    compiler then picks one for the spec). `--tf32`, `--splits`, `--flatten-pixels`
    and `--tensor-core`, alone or together, give the configuration `config_for` picks
    for the spec on tf32 tensor cores of `arch`, with its reduction split, as the
    product of its flattened pixels, or on the tensor-core instruction named; `--wgmma`, its Hopper kernel, with the
    knobs given (`_wgmma_config`)."""
    from affinec.driver.config import KernelConfig, config_for, with_knobs

    given = {k: getattr(args, k) for k in KNOBS if getattr(args, k) is not None}
    if given.get("wgmma"):
        return _wgmma_config(given, spec, arch)
    alone = {
        "tf32",
        "splits",
        "flatten_pixels",
        "tensor_core",
        "tma",
        "in_flight",
        "warp_specialize",
    }
    if given and set(given) <= alone and given.get("tf32", True):
        try:
            config = config_for(
                spec,
                tf32=given.get("tf32", False),
                arch=arch,
                splits=given.get("splits", 1),
                flatten_pixels=given.get("flatten_pixels", False),
            )
            if "tensor_core" in given:  # config_for's tiles, on that instruction
                if not config.mma:
                    raise UsageError(
                        f"--tensor-core {given['tensor_core']}: config_for puts this "
                        f"{spec.dtype} spec on the SIMT route, without tensor cores "
                        "(f16 or bf16 operands take them; or give --mma and its knobs)"
                    )
                config = with_knobs(config, tensor_core=given["tensor_core"])
            return _with_tma(config, given)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return _with_tma(with_knobs(KernelConfig(), **given), given) if given else None


def _with_tma(config: KernelConfig, given: dict[str, object]) -> KernelConfig:
    """`config` with `--tma`'s loads and `--in-flight`'s MMAs where given; refused,
    saying why, where the configuration's tensor cores are not `affinec-wgmma`'s
    (nothing else loads by TMA or leaves warpgroup MMAs in flight)."""
    asked = {k: True for k in ("tma", "in_flight", "warp_specialize") if given.get(k)}
    if not asked:
        return config
    from affinec.driver.config import with_knobs

    if not (config.mma and config.tensor_core == "wgmma"):
        flags = " and ".join("--" + k.replace("_", "-") for k in asked)
        verb, them = ("apply", "them") if len(asked) > 1 else ("applies", "it")
        raise UsageError(
            f"{flags} {verb} to the tiles and MMAs of affinec-wgmma: give {them} "
            "with --tensor-core wgmma (on sm_90a)"
        )
    return with_knobs(config, **asked)


def _wgmma_config(given: dict[str, object], spec: Spec, arch: str) -> KernelConfig:
    """`--wgmma` and the knobs given with it: `config_for`'s Hopper kernel for the
    spec, those knobs changed. Without `--stages`, the stages are `config_for`'s,
    or as many as the tile's and the schedule's shared memory leaves room for on
    `arch`, never fewer than the schedule needs (2 with MMAs in flight)."""
    from affinec.driver.config import config_for, with_knobs

    try:
        base = config_for(spec, arch=arch, wgmma=True, splits=given.get("splits", 1))  # pyright: ignore[reportArgumentType]
    except ValueError as e:
        raise UsageError(str(e)) from None
    config = with_knobs(base, **given)
    if "stages" in given:
        return config
    return replace(config, stages=_wgmma_stages(config, spec, arch, most=base.stages))


def _wgmma_stages(config: KernelConfig, spec: Spec, arch: str, most: int) -> int:
    """The most stages, up to `most` and to the steps of K a block takes, whose
    tiles fit a block's shared memory on `arch` in `config`'s tile and schedule;
    the least the schedule takes (2 with MMAs in flight) if none does, and the
    pass then says why."""
    from affinec.driver.config import flattened_spec
    from affinec.transforms.gpu.wgmma_plan import plan_of, route_refusal

    least = 1 if config.wgmma_schedule == "waited" else 2
    routed = flattened_spec(spec) if config.flatten_pixels else spec
    if (
        len(config.wgmma_tile) != 2
        or min(config.wgmma_tile) < 1
        or route_refusal(routed) is not None
    ):
        return max(most, least)  # refused by the pass, in its words
    tile = (config.wgmma_tile[0], config.wgmma_tile[1])
    kernel = plan_of(routed, tile, most, config.wgmma_schedule, splits=config.splits)
    room = chip(arch).max_shared_per_block
    for stages in range(max(min(most, kernel.steps), least), least, -1):
        if replace(kernel, stages=stages).shared_bytes <= room:
            return stages
    return least
