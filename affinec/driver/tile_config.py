"""The configuration of a spec on its own tiles (`own_tiles_config`): `config_for`'s
rule before the grid is filled, unsplit and unflattened. f16 and bf16 with at least
`MMA_MIN_CHANNELS` input channels take the tensor cores (`tensor_core_config`);
so does f32 with `tf32`. Other convolutions and products take the SIMT kernel of a
register-tiled implicit GEMM; a depthwise convolution its own vectors
(`depthwise_config`).

Below `affinec.driver.config`, so that the rules which start from this configuration
and change a few of its knobs (Hopper's window kernels,
`affinec.driver.wgmma_taps_config` and `affinec.driver.wgmma_taps_ss_config`) can
be chosen by `config_for` without importing it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from affinec.base.element_types import storage_bytes
from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.driver.grid_geometry import grid_blocks
from affinec.driver.kernel_config import KernelConfig
from affinec.driver.mma_config import (
    MMA_MIN_CHANNELS,
    coalescible,
    divisor_at_most,
    padded_channels,
    reduction_channels,
    shared_budget,
    tensor_core_config,
    tensor_cores_take,
    tile_at_most,
    tile_pixels,
)
from affinec.driver.wgmma_config import MULTIPROCESSORS
from affinec.frontend.contraction import contraction_of, is_depthwise
from affinec.hardware.chips import chip
from affinec.transforms.gpu.thread_plan import VECTOR_BYTES

BLOCK_CHANNELS = 64
"""Output channels (the GEMM's N) per block."""
BLOCK_PIXELS = 128
"""Output pixels (the GEMM's M) per block, about."""
REGISTER_CHANNELS = 8
REGISTER_PIXELS = 8
MAX_THREADS = 256
MIN_THREADS = 64
REDUCTION_STEP = 8
"""Input channels (the GEMM's K) copied into shared memory per step."""


def own_tiles_config(spec: Spec, *, tf32: bool, arch: str) -> KernelConfig:
    """`config_for(spec, splits=1, flatten_pixels=False)` of a spec of a fixed
    batch: the configuration of the spec's own tiles, its budget of shared memory
    `arch`'s (`shared_budget`); a ValueError where `tf32` cannot take the spec."""
    if tf32 and not tensor_cores_take(spec):
        raise ValueError(
            "tf32 takes the tensor cores, which take a grouped convolution in NHWC "
            "with RSCK filters only"
        )
    if tf32 and is_depthwise(spec):
        raise ValueError(
            "tf32 takes the tensor cores, whose k is a reduction's channels: a "
            "depthwise convolution sums its window alone (the SIMT route takes it)"
        )
    if tf32 and spec.dtype != "f32":
        raise ValueError(
            f"tf32 takes f32 operands on the tensor cores, not {spec.dtype}"
        )
    budget = shared_budget(chip(arch))
    c = contraction_of(spec)
    names = [n for n, _ in c.output_index]
    extents = [e for _, e in c.output_index]
    if isinstance(spec, ConvSpec):
        # a depthwise convolution's output channels are its groups (one filter a
        # group): the block tiles and vectorizes those
        depthwise = spec.groups > 1 and spec.k == spec.groups
        channel = names.index("g" if depthwise else "k")
        pixels = [names.index(n) for n in ("ow", "oh", "n")]  # innermost first
    elif isinstance(spec, MatmulSpec):
        depthwise = False
        channel = names.index("j")
        pixels = [names.index("i")]
    else:
        return KernelConfig(promote=False)
    if tensor_cores_take(spec) and (
        tf32
        or (
            spec.dtype != "f32"
            and (reduction_channels(spec) >= MMA_MIN_CHANNELS or coalescible(spec))
        )
    ):
        return tensor_core_config(spec, extents, channel, pixels, tf32, budget)
    padded = padded_channels(spec)
    if padded != getattr(spec, "c", padded):
        assert isinstance(spec, ConvSpec)
        config = tensor_core_config(
            replace(spec, c=padded), extents, channel, pixels, tf32, budget
        )
        return replace(config, pad_channels=padded)

    if is_depthwise(spec):
        assert isinstance(spec, ConvSpec)
        return depthwise_config(spec)
    tiles, registers = _simt_tiles(extents, channel, pixels)
    return KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=_reduction_tiles(spec),
        register_tile=tuple(registers),
    )


def _simt_tiles(
    extents: list[int], channel: int, pixels: list[int]
) -> tuple[list[int], list[int]]:
    """The SIMT route's block tile and register tile over output dimensions of
    `extents`: `BLOCK_PIXELS` x `BLOCK_CHANNELS` outputs a block, `REGISTER_PIXELS`
    x `REGISTER_CHANNELS` a thread, between `MIN_THREADS` and `MAX_THREADS`
    threads, divisors of the extents where they can be."""
    tiles = [1] * len(extents)
    registers = [1] * len(extents)
    tiles[channel] = tile_at_most(extents[channel], BLOCK_CHANNELS)
    registers[channel] = divisor_at_most(tiles[channel], REGISTER_CHANNELS)
    tile_pixels(tiles, extents, pixels, BLOCK_PIXELS, 16)
    # Pixels of one thread: along the innermost pixel dimension first.
    want = REGISTER_PIXELS
    for d in pixels:
        registers[d] = divisor_at_most(tiles[d], want)
        want = max(1, want // registers[d])
    threads = 1
    for t, r in zip(tiles, registers, strict=True):
        threads *= t // r
    while threads > MAX_THREADS:
        # Give the thread more of the outermost pixel dimension that has some.
        grown = False
        for d in reversed(pixels):
            r = divisor_at_most(tiles[d], registers[d] * 2)
            if r > registers[d]:
                threads = threads * registers[d] // r
                registers[d] = r
                grown = True
                break
        if not grown:
            break
    while threads < MIN_THREADS:
        # A small block: fewer outputs a thread, more threads.
        d = max(range(len(registers)), key=lambda k: registers[k])
        if registers[d] == 1:
            break
        r = divisor_at_most(tiles[d], registers[d] // 2)
        threads = threads * registers[d] // r
        registers[d] = r
    return tiles, registers


DEPTHWISE_STAGES = 2
"""A depthwise convolution reduces over its window's taps alone (one channel a
group): it takes the whole window a step, this many in flight, rather than a tap
(a copy and a barrier each). Fitted on MobileNetV2 (H100, 2026-12-06,
`benchmarks/layer_sweep.py`, f16): its depthwise layers 0.527 -> 0.409 ms at batch 32,
0.119 -> 0.096 at batch 1; reported on EfficientNet-B0's, 3x3 and 5x5 (0.698 -> 0.531,
0.149 -> 0.145), docs/BENCHMARKS.md."""

DEPTHWISE_ROW_PIXELS = 8
"""Output pixels of one row a thread of a depthwise convolution computes (NHWC):
with the row's filter taps unrolled, neighbouring pixels read the same input
columns, which LLVM then loads and converts once (8 pixels of a 3x3 window read 10
columns a row instead of 24: MobileNetV2's 3x3 32 at 112^2 issues 13 16-byte
shared loads and 104 conversions a filter row instead of 27 and 216). Chosen from
the PTX, then timed (H100, 2026-12-07, `scripts/gpu_depthwise.sh`, batch 32):
MobileNetV2's depthwise layers 0.411 -> 0.240 ms (cuDNN 0.247), EfficientNet-B0's
0.486 -> 0.283 (cuDNN 0.301), against the channels strided across the block
(`strided_depthwise_config`, the tuner's 'depthwise strided'); docs/BENCHMARKS.md."""


def depthwise_config(spec: ConvSpec, *, fill: bool = True) -> KernelConfig:
    """A depthwise convolution's configuration: the whole window a step
    (`DEPTHWISE_STAGES` in flight). In NHWC, where the channels are contiguous,
    each thread owns one vector of channels (16 bytes, or the widest power of two
    that divides the channels: `channel_vector`) by `DEPTHWISE_ROW_PIXELS` pixels of
    one row, the row's taps unrolled: its input comes as 16-byte shared loads, its
    output goes as one 16-byte store a pixel, and its taps share the columns they
    read. The block takes a multiple of the vector that divides the channels, at
    most `BLOCK_CHANNELS`, by about `BLOCK_PIXELS` pixels, fewer while the grid
    leaves multiprocessors idle (with `fill`). In NCHW, or where the channels are
    odd, the SIMT route's tiles (`strided_depthwise_config`)."""
    if not is_depthwise(spec):
        raise ValueError(f"not a depthwise convolution: {spec.to_text()}")
    width = channel_vector(spec)
    if spec.layout != "nhwc" or width == 1:
        return strided_depthwise_config(spec)
    names = [n for n, _ in contraction_of(spec).output_index]
    extents = [e for _, e in contraction_of(spec).output_index]
    n, oh, ow, g = (names.index(x) for x in ("n", "oh", "ow", "g"))
    tiles = [1] * len(extents)
    registers = [1] * len(extents)
    registers[g] = width
    chunks = divisor_at_most(spec.c // width, max(1, BLOCK_CHANNELS // width))
    tiles[g] = chunks * width
    tiles[ow] = registers[ow] = tile_at_most(extents[ow], DEPTHWISE_ROW_PIXELS)
    tile_pixels(
        tiles, extents, [oh, n], max(1, BLOCK_PIXELS // tiles[ow]), BLOCK_PIXELS
    )
    # Fill the chip where the grid is small: fewer images, then rows a block (down
    # to a warp's worth of threads), fewer pixels a thread, fewer channels a block.
    for d in (n, oh, ow, g) if fill else ():
        step = width if d == g else 1
        while (
            grid_blocks(spec, KernelConfig(tile_sizes=tuple(tiles))) < MULTIPROCESSORS
        ):
            smaller = step * divisor_at_most(extents[d] // step, tiles[d] // step // 2)
            threads = math.prod(t // r for t, r in zip(tiles, registers, strict=True))
            if d == ow:  # the thread's row shrinks with the block's
                threads *= tiles[d] // smaller
            if smaller >= tiles[d] or threads * smaller // tiles[d] < WARP_THREADS:
                break
            tiles[d] = smaller
            if d == ow:
                registers[d] = smaller
    return KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=(spec.r, spec.s),
        register_tile=tuple(registers),
        stages=DEPTHWISE_STAGES,
        vector_width=width,
        unroll_steps=spec.s,
    )


WARP_THREADS = 32
"""The fewest threads `depthwise_config` leaves a block while it fills the chip."""


def strided_depthwise_config(spec: ConvSpec) -> KernelConfig:
    """`config_for`'s configuration of a depthwise convolution (and
    `depthwise_config`'s in NCHW): the SIMT route's tiles, the whole window a step;
    in NHWC each thread's channels strided across the block (`vector_width=1`), in
    NCHW its pixels in vectors where its row allows (the passes' own width)."""
    names = [n for n, _ in contraction_of(spec).output_index]
    extents = [e for _, e in contraction_of(spec).output_index]
    pixels = [names.index(x) for x in ("ow", "oh", "n")]
    tiles, registers = _simt_tiles(extents, names.index("g"), pixels)
    return KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=(spec.r, spec.s),
        register_tile=tuple(registers),
        stages=DEPTHWISE_STAGES,
        vector_width=1 if spec.layout == "nhwc" else 0,
    )


def channel_vector(spec: ConvSpec) -> int:
    """The elements of a depthwise thread's vector of channels: 16 bytes of them,
    or the widest power of two below that divides the channels (its vectors then
    start at multiples of their size, aligned)."""
    width = VECTOR_BYTES // storage_bytes(spec.dtype)
    while spec.c % width:
        width //= 2
    return width


def _reduction_tiles(spec: Spec, step_limit: int = REDUCTION_STEP) -> tuple[int, ...]:
    """A step of the reduction that keeps its order: the dimensions cut into several
    tiles come first, in tiles of 1 but the last of them, the others whole."""
    if isinstance(spec, MatmulSpec):
        return (divisor_at_most(spec.k, step_limit),)
    assert isinstance(spec, ConvSpec)
    step = divisor_at_most(spec.c, step_limit)
    if spec.filter_layout == "rsck":  # reduction order r, s, c
        if spec.c <= step_limit and step_limit == REDUCTION_STEP:
            return (1, spec.s, spec.c)  # one filter row of taps per step
        return (1, 1, step)
    return (step, spec.r, spec.s)  # order c, r, s
