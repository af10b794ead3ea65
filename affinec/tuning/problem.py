"""The implicit GEMM a spec describes, and what one configuration makes of it.

The search space and the cost model reason about the same few numbers: which output
dimensions are pixels (the GEMM's M) and which is the output channel (N), the
reduction (K) and its order, and for one `KernelConfig` the block tile, the blocks
of the grid, the reduction steps, and the elements a block copies into shared memory
per step (its footprint). They are computed here from the spec's contraction and the
configuration alone, without building IR, so that thousands of configurations cost
milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from affinec.base.element_types import storage_bytes
from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.driver.config import (
    SHARED_ROW_PADDING,
    KernelConfig,
    flattened_spec,
    step_bytes,
    window_extent,
)
from affinec.frontend.contraction import contraction_of
from affinec.hardware.chips import MMA_SHAPES, WARP_SIZE

MMA_M, MMA_N, MMA_K = MMA_SHAPES["f16"]
"""Rows (pixels), columns (output channels) and reduction depth of one m16n8k16
MMA (a channel step is padded with zeros to a multiple of the depth)."""


class NotTunable(ValueError):
    """The spec is not an implicit GEMM the tuner knows (an outer product)."""


@dataclass(frozen=True)
class Problem:
    """A convolution or matrix product seen as an implicit GEMM."""

    spec: Spec
    names: tuple[str, ...]
    """The output dimensions, outermost first (the order of `tile_sizes`)."""
    extents: tuple[int, ...]
    channel: int
    """The output dimension the filter indexes (the GEMM's N)."""
    pixels: tuple[int, ...]
    """The other output dimensions, innermost first (the GEMM's M)."""
    reduction_names: tuple[str, ...]
    """The reduction dimensions in the order the naive IR sums them."""
    reduction_extents: tuple[int, ...]
    reduction_channel: int | None
    """The reduction dimension that is the input channel (the MMA's k); None for a
    depthwise convolution, which sums its window alone."""
    element_bytes: int
    operand_elements: int
    """Elements of the inputs, the filter, the bias and the output together."""

    @property
    def macs(self) -> int:
        """Multiply-adds of the whole contraction."""
        return math.prod(self.extents) * math.prod(self.reduction_extents)

    @property
    def dtype(self) -> str:
        return self.spec.dtype

    @property
    def reduction_channels(self) -> int:
        """The input channels the reduction sums over (1 for a depthwise one)."""
        if self.reduction_channel is None:
            return 1
        return self.reduction_extents[self.reduction_channel]

    @property
    def innermost(self) -> int:
        """The output dimension contiguous in memory (the register tile's vector)."""
        return len(self.extents) - 1

    def dram_bytes(self) -> int:
        """Bytes every kernel must move at least once: inputs, filter, output."""
        return self.element_bytes * self.operand_elements


def problem_of(spec: Spec) -> Problem:
    """The implicit GEMM of `spec`; `NotTunable` for an outer product."""
    if not isinstance(spec, ConvSpec | MatmulSpec):
        raise NotTunable(
            f"the tuner takes convolutions and matrix products, not a {spec.kind}"
        )
    c = contraction_of(spec)
    names = tuple(n for n, _ in c.output_index)
    extents = tuple(e for _, e in c.output_index)
    reduction_names = tuple(n for n, _ in c.reduction_index)
    if isinstance(spec, ConvSpec):
        # a depthwise convolution's output channels are its groups (config_for's);
        # one of one input channel a group sums its window alone
        depthwise = spec.groups > 1 and spec.k == spec.groups
        channel = names.index("g" if depthwise else "k")
        pixels = tuple(names.index(n) for n in ("ow", "oh", "n"))
        reduction_channel = (
            reduction_names.index("c") if "c" in reduction_names else None
        )
    else:
        channel = names.index("j")
        pixels = (names.index("i"),)
        reduction_channel = reduction_names.index("p")
    return Problem(
        spec=spec,
        names=names,
        extents=extents,
        channel=channel,
        pixels=pixels,
        reduction_names=reduction_names,
        reduction_extents=tuple(e for _, e in c.reduction_index),
        reduction_channel=reduction_channel,
        element_bytes=storage_bytes(spec.dtype),
        operand_elements=sum(
            math.prod(a.shape) for a in (*c.factors, c.output, *c.epilogue_operands)
        ),
    )


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tile_efficiency(extent: int, tile: int) -> float:
    """The useful fraction of the tiles covering `extent` (1.0 when `tile` divides it)."""
    return extent / (ceil_div(extent, tile) * tile)


@dataclass(frozen=True)
class Geometry:
    """What one configuration makes of a problem: tiles, grid, steps, footprints."""

    route: str
    """`simt` (register tiles, shared memory), `mma` (tensor cores) or `global`
    (no shared memory)."""
    tiles: tuple[int, ...]
    """The block tile along each output dimension (clamped to the extents)."""
    reduction_extents: tuple[int, ...]
    """The reduction a block performs: the problem's, or one split's."""
    reduction_tiles: tuple[int, ...]
    blocks: int
    block_pixels: int
    block_channels: int
    steps: int
    """Reduction steps of one block (each a copy, a barrier, the math)."""
    step_depth: int
    """Reduction points of one step (the product of the reduction tiles)."""
    input_elements: int
    """Elements of the input a block copies per step."""
    filter_elements: int
    threads: int
    """Threads of a block as the configuration implies them (the launch may say
    otherwise for configurations that leave it to the passes)."""
    register_pixels: int = 1
    register_channels: int = 1
    warps: tuple[int, int] = (1, 1)
    mma_tiles: tuple[int, int] = (1, 1)
    """With `mma`: MMA tiles per warp along M and N."""
    channel_step: int = 1
    """Input channels of one step (the MMA's k before padding)."""
    stages: int = 1
    """Tiles of the reduction in flight (each its own shared buffers)."""
    coalesced_step_bytes: int = 0
    """With `coalesce_reduction`: the shared bytes of one step, as `config_for`
    counts them (`affinec.driver.config.step_bytes`); 0 otherwise."""
    dma: tuple[bool, bool] = (False, False)
    """Whether the input's and the filter's copies can be 16-byte asynchronous
    copies: the copy's rows (the step's channels, or the block's output channels)
    and the tensor's whole rows are multiples of 16 bytes."""

    @property
    def block_outputs(self) -> int:
        return self.block_pixels * self.block_channels

    @property
    def copy_elements(self) -> int:
        return self.input_elements + self.filter_elements

    def shared_bytes(self, element_bytes: int) -> int:
        """An estimate of the block's shared tiles, all stages: exact for the
        tensor-core route's tiles (the channel step padded to whole MMAs, each row
        padded by `SHARED_ROW_PADDING` against bank conflicts, as `config_for`
        counts them), a lower bound for the others (their padding depends on how
        the threads read them)."""
        if self.route == "global":
            return 0
        if self.route != "mma":
            return self.copy_elements * element_bytes * self.stages
        if self.coalesced_step_bytes:
            return self.coalesced_step_bytes * self.stages
        padded = ceil_div(self.channel_step, MMA_K) * MMA_K
        input_rows = self.input_elements // self.channel_step
        filter_rows = self.filter_elements // self.block_channels
        per_stage = input_rows * (padded * element_bytes + SHARED_ROW_PADDING) + (
            filter_rows
            * padded
            // self.channel_step
            * (self.block_channels * element_bytes + SHARED_ROW_PADDING)
        )
        return per_stage * self.stages


def reduction_tiles_of(problem: Problem, config: KernelConfig) -> tuple[int, ...]:
    """The reduction tiles the tiling pass uses: missing or oversized sizes are the
    whole extent; none given, the pass's default (the outermost dimension longer
    than 1 in tiles of up to 64 points, the others whole)."""
    extents = problem.reduction_extents
    sizes = list(config.reduction_tile_sizes)
    if not sizes:
        sizes = list(extents)
        for d, e in enumerate(extents):
            if e > 1:
                inner = math.prod(extents[d + 1 :])
                sizes[d] = max(1, min(e, 64 // max(inner, 1)))
                break
    sizes += list(extents[len(sizes) :])
    return tuple(min(t, e) for t, e in zip(sizes, extents, strict=True))


def split_problem(problem: Problem, splits: int) -> Problem:
    """What one of `splits` splits of `problem`'s channel reduction computes (the
    channels rounded up, as `affinec-split-reduction` pads them)."""
    if splits == 1:
        return problem
    if problem.reduction_channel is None:
        raise ValueError("a depthwise convolution has no channel reduction to split")
    extents = list(problem.reduction_extents)
    extents[problem.reduction_channel] = ceil_div(
        extents[problem.reduction_channel], splits
    )
    return replace(problem, reduction_extents=tuple(extents))


def as_compiled(problem: Problem, config: KernelConfig) -> Problem:
    """The problem `config` compiles: the matrix product of the flattened pixels
    with `flatten_pixels` (`flattened_spec`), else `problem`."""
    if not config.flatten_pixels or not isinstance(problem.spec, ConvSpec):
        return problem  # not flattened, or already
    return problem_of(flattened_spec(problem.spec))


def geometry(problem: Problem, config: KernelConfig) -> Geometry:
    """The geometry of `config` on `problem` (ValueError for a tile size that does not
    fit the problem: the passes would refuse it too). With `splits`, a block's
    reduction is one split's and the grid has `splits` times the blocks; with
    `flatten_pixels`, the problem is the product's."""
    problem = split_problem(as_compiled(problem, config), config.splits)
    extents = problem.extents
    if not config.tile_sizes:
        raise ValueError("the tuner's configurations give tile sizes")
    if len(config.tile_sizes) > len(extents):
        raise ValueError(
            f"{len(config.tile_sizes)} tile sizes for {len(extents)} output dimensions"
        )
    sizes = list(config.tile_sizes) + [1] * (len(extents) - len(config.tile_sizes))
    tiles = tuple(min(t, e) for t, e in zip(sizes, extents, strict=True))
    if any(t < 1 for t in tiles):
        raise ValueError(f"tile sizes must be positive, got {config.tile_sizes}")
    rtiles = reduction_tiles_of(problem, config)
    blocks = math.prod(ceil_div(e, t) for e, t in zip(extents, tiles, strict=True))
    blocks *= config.splits
    steps = math.prod(
        ceil_div(e, t) for e, t in zip(problem.reduction_extents, rtiles, strict=True)
    )
    block_pixels = math.prod(tiles[d] for d in problem.pixels)
    block_channels = tiles[problem.channel]
    input_elements, filter_elements = _footprints(problem, tiles, rtiles)
    route = "mma" if config.mma else ("simt" if config.promote else "global")
    register_pixels = register_channels = 1
    threads = 0
    warps, mma_tiles = (1, 1), (1, 1)
    if route == "mma":
        wm, wn = (tuple(config.warp_grid) + (1, 1))[:2]
        warps = (max(wm, 1), max(wn, 1))
        mma_tiles = (
            max(1, ceil_div(block_pixels, MMA_M * warps[0])),
            max(1, ceil_div(block_channels, MMA_N * warps[1])),
        )
        threads = WARP_SIZE * warps[0] * warps[1]
    elif config.register_tile and len(config.register_tile) == len(tiles):
        regs = config.register_tile
        register_pixels = math.prod(regs[d] for d in problem.pixels)
        register_channels = regs[problem.channel]
        threads = math.prod(
            ceil_div(t, r) for t, r in zip(tiles, regs, strict=True) if r > 0
        )
    else:
        threads = config.threads_per_block or min(256, block_pixels * block_channels)
    return Geometry(
        route=route,
        tiles=tiles,
        reduction_extents=problem.reduction_extents,
        reduction_tiles=rtiles,
        blocks=blocks,
        block_pixels=block_pixels,
        block_channels=block_channels,
        steps=steps,
        step_depth=math.prod(rtiles),
        input_elements=input_elements,
        filter_elements=filter_elements,
        threads=threads,
        register_pixels=register_pixels,
        register_channels=register_channels,
        warps=warps,
        mma_tiles=mma_tiles,
        channel_step=_channel_step(problem, rtiles),
        stages=stages_in_flight(config.stages, steps) if config.dma else 1,
        coalesced_step_bytes=_coalesced_step_bytes(problem, config, tiles, rtiles),
        dma=dma_copies(problem, config, tiles, rtiles),
    )


def _channel_step(problem: Problem, rtiles: tuple[int, ...]) -> int:
    """The input channels of one reduction step (1 for a depthwise convolution)."""
    if problem.reduction_channel is None:
        return 1
    return rtiles[problem.reduction_channel]


def stages_in_flight(stages: int, steps: int) -> int:
    """The stages `affine-pipeline-data-transfer` allocates for `steps` reduction
    tiles: none past the tiles (at least two when pipelined)."""
    return 1 if stages <= 1 else max(2, min(stages, steps))


def _coalesced_step_bytes(
    problem: Problem,
    config: KernelConfig,
    tiles: tuple[int, ...],
    rtiles: tuple[int, ...],
) -> int:
    spec = problem.spec
    if not (config.mma and config.coalesce_reduction and isinstance(spec, ConvSpec)):
        return 0
    out = dict(zip(problem.names, tiles, strict=True))
    red = dict(zip(problem.reduction_names, rtiles, strict=True))
    block = (out["k"], out["ow"], out["oh"], out["n"])
    return step_bytes(spec, block, red["r"], red["s"], red["c"], coalesced=True)


def dma_copies(
    problem: Problem,
    config: KernelConfig,
    tiles: tuple[int, ...],
    rtiles: tuple[int, ...],
) -> tuple[bool, bool]:
    """Which copies `affine-data-copy-generate{generate-dma}` can make 16-byte
    asynchronous copies of: rows of 16 bytes along a contiguous dimension, in the
    buffer and in the tensor (an estimate of the pass's own rule)."""
    if not (config.dma and (config.promote or config.mma)):
        return (False, False)
    spec = problem.spec
    elem = problem.element_bytes
    channel_step = _channel_step(problem, rtiles)
    block_channels = tiles[problem.channel]

    def rows(step: int, whole: int) -> bool:
        return (step * elem) % 16 == 0 and (whole * elem) % 16 == 0

    if isinstance(spec, ConvSpec):
        # a depthwise step's input channels are the block's
        inputs = block_channels if problem.reduction_channel is None else channel_step
        return (
            spec.layout == "nhwc" and rows(inputs, spec.c),
            spec.filter_layout == "rsck" and rows(block_channels, spec.k),
        )
    assert isinstance(spec, MatmulSpec)
    return rows(channel_step, spec.k), rows(block_channels, spec.n)


def _footprints(
    problem: Problem, tiles: tuple[int, ...], rtiles: tuple[int, ...]
) -> tuple[int, int]:
    """Elements of the input and of the filter one block step reads: the input the
    block's pixels see through one reduction tile (the halo of the taps included,
    the lattice of a strided step only), and the filter's tile."""
    spec = problem.spec
    out = dict(zip(problem.names, tiles, strict=True))
    red = dict(zip(problem.reduction_names, rtiles, strict=True))
    if isinstance(spec, ConvSpec):
        (sh, sw), (dh, dw) = spec.stride, spec.dilation
        rows = window_extent(out["oh"], red["r"], sh, dh)
        cols = window_extent(out["ow"], red["s"], sw, dw)
        filters = tiles[problem.channel]
        # a depthwise step reads the block's own channels, one a filter
        channels = red.get("c", filters)
        return (
            out["n"] * rows * cols * channels,
            red["r"] * red["s"] * red.get("c", 1) * filters,
        )
    return out["i"] * red["p"], red["p"] * out["j"]
