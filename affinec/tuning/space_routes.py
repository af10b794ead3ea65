"""The configurations of each route that `affinec.tuning.space.search_space` draws
from: the SIMT route's (`simt_configs`) and the tensor cores' (`mma_configs`), and
the knob choices they take their products over (block tiles and their pixel
shapes, register tiles, reduction steps, stages, unrolling, output staging), as
`affinec.tuning.space` describes them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from affinec.driver.config import KernelConfig
from affinec.driver.mma_config import divisor_at_most
from affinec.hardware.chips import WARP_SIZE
from affinec.tuning.problem import (
    MMA_M,
    MMA_N,
    Problem,
    ceil_div,
    dma_copies,
    tile_efficiency,
)

MIN_TILE_EFFICIENCY = 0.875
"""A tile whose partial last tile wastes more than an eighth is not a near-divisor."""
BLOCK_PIXELS = (32, 256)
MAX_PIXEL_TILE = 64
"""Along one pixel dimension of a convolution (the block's other pixel dimensions
then have room)."""
SHAPES_PER_SIZE = 3
"""Pixel shapes kept per size class (powers of two)."""
CHANNEL_TILES = (16, 32, 64, 128)
THREADS = (64, 512)
REGISTER_OUTPUTS = (4, 64)
REGISTER_SIZES = (1, 2, 4, 8)
UNROLL_STEPS = (0, 2, 4)
SIMT_STEP = (4, 72)
"""Reduction points per step on the SIMT route."""
MMA_CHANNEL_STEPS = (16, 32, 64)
MMA_STAGES = (1, 2, 3, 4, 6, 8)
"""Tiles in flight on the tensor-core route (`affine-pipeline-data-transfer`; 8 is
cp.async's most groups in flight): deep pipelines of short steps are what cuDNN's
own mma.sync kernels run with few blocks (5 to 10 stages of 32-channel steps)."""
SIMT_STAGES = (1, 2)
WARPS = (1, 2, 3, 4)
MAX_MMA_TILES = 32
"""MMA tiles per warp (4 accumulators each per lane): `affinec-mma-sync`'s limit."""


# -- the two routes --------------------------------------------------------------------------


def simt_configs(problem: Problem) -> Iterator[KernelConfig]:
    """SIMT configurations: block tiles x register tiles x reduction steps that
    keep the order of summation x unrolled steps x stages (two only where the
    copies can be 16-byte asynchronous ones)."""
    reductions = _reduction_choices(problem)
    for tiles in _block_tiles(problem, mma=False):
        for registers in _register_tiles(problem, tiles):
            for rtiles in reductions:
                dma = any(dma_copies(problem, KernelConfig(), tiles, rtiles))
                for unroll in _unrolls(rtiles):
                    for stages in SIMT_STAGES if dma else SIMT_STAGES[:1]:
                        yield KernelConfig(
                            tile_sizes=tiles,
                            reduction_tile_sizes=rtiles,
                            register_tile=registers,
                            unroll_steps=unroll,
                            stages=stages,
                        )


def mma_configs(problem: Problem, coalesced: bool = False) -> Iterator[KernelConfig]:
    """Tensor-core configurations; `coalesced`: the filter rows' columns x channels
    as the MMA's k (affinec-coalesce-reduction), one filter row or the whole window
    a step."""
    reductions = (
        _coalesced_reductions(problem) if coalesced else _mma_reductions(problem)
    )
    every_pixel = math.prod(problem.extents[d] for d in problem.pixels)
    for tiles in _block_tiles(problem, mma=True):
        pixels = math.prod(tiles[d] for d in problem.pixels)
        channels = tiles[problem.channel]
        low = _min_threads(problem)
        for wm in WARPS:
            for wn in WARPS:
                mt = ceil_div(pixels, MMA_M * wm)
                nt = ceil_div(channels, MMA_N * wn)
                used = pixels * channels / (mt * MMA_M * wm * nt * MMA_N * wn)
                # A block of all the problem's pixels (a 7x7 image at batch 1)
                # cannot waste less than its last MMA row's padding.
                least = MIN_TILE_EFFICIENCY
                if pixels == every_pixel and mt * wm == ceil_div(pixels, MMA_M):
                    least *= pixels / (ceil_div(pixels, MMA_M) * MMA_M)
                if (
                    mt * nt > MAX_MMA_TILES
                    or not low <= WARP_SIZE * wm * wn <= THREADS[1]
                    or used < least
                ):
                    continue
                for rtiles in reductions:
                    steps = math.prod(
                        ceil_div(e, t)
                        for e, t in zip(problem.reduction_extents, rtiles, strict=True)
                    )
                    # Stages past the steps would compile to the same kernel.
                    depths = [s for s in MMA_STAGES if s <= max(2, steps)]
                    for stages, unroll, staged in itertools.product(
                        depths,
                        _tap_unrolls(problem, rtiles, coalesced),
                        _output_stagings(problem),
                    ):
                        yield KernelConfig(
                            tile_sizes=tiles,
                            reduction_tile_sizes=rtiles,
                            reassociate=True,
                            coalesce_reduction=coalesced,
                            mma=True,
                            warp_grid=(wm, wn),
                            unroll_taps=unroll,
                            stages=stages,
                            stage_output=staged,
                        )


SMALL_PROBLEM = 64 * 256
"""Outputs of a problem too small to fill blocks of 64 threads (tests' specs)."""
MIN_BLOCK_OUTPUTS = 1024


def _min_threads(problem: Problem) -> int:
    """64 threads a block, or one warp for very small problems."""
    return THREADS[0] if math.prod(problem.extents) >= SMALL_PROBLEM else 32


# -- block tiles -----------------------------------------------------------------------------


def tile_choices(extent: int, limit: int) -> list[int]:
    """Tiles along `extent` up to `limit`: its divisors, and powers of two that are
    near-divisors (the last tile wastes at most an eighth)."""
    top = min(extent, limit)
    out = {t for t in range(1, top + 1) if extent % t == 0}
    p = 1
    while p <= top:
        if tile_efficiency(extent, p) >= MIN_TILE_EFFICIENCY:
            out.add(p)
        p *= 2
    return sorted(out)


def _block_tiles(problem: Problem, mma: bool) -> list[tuple[int, ...]]:
    """Pixel shapes x channel tiles of at least `MIN_BLOCK_OUTPUTS` outputs (fewer
    for small problems), as `tile_sizes`."""
    out = []
    least = min(MIN_BLOCK_OUTPUTS, math.prod(problem.extents) // 16)
    for shape in _pixel_shapes(problem, mma):
        for channels in _channel_tiles(problem, mma):
            if math.prod(shape.values()) * channels < least:
                continue
            tiles = [1] * len(problem.extents)
            for d, t in shape.items():
                tiles[d] = t
            tiles[problem.channel] = channels
            out.append(tuple(tiles))
    return out


def _pixel_shapes(problem: Problem, mma: bool) -> list[dict[int, int]]:
    """Tiles of the pixel dimensions (innermost first: the inner two freely, an
    outer one only when the inner ones are whole), 32 to 256 pixels, the least
    wasteful few per size class."""
    dims = problem.pixels
    extents = problem.extents
    total = math.prod(extents[d] for d in dims)
    low, high = min(BLOCK_PIXELS[0], total), BLOCK_PIXELS[1]
    limit = high if len(dims) == 1 else MAX_PIXEL_TILE
    shapes: list[dict[int, int]] = []

    def extend(k: int, shape: dict[int, int], whole: bool) -> None:
        size = math.prod(shape.values())
        if k == len(dims):
            if low <= size <= high:
                shapes.append(dict(shape))
            return
        d = dims[k]
        choices = tile_choices(extents[d], limit) if k < 2 or whole else [1]
        for t in choices:
            if size * t > high:
                break
            shape[d] = t
            extend(k + 1, shape, whole and t == extents[d])
            del shape[d]

    extend(0, {}, True)
    if mma:
        shapes = [
            s
            for s in shapes
            if tile_efficiency(math.prod(s.values()), MMA_M) >= MIN_TILE_EFFICIENCY
            or math.prod(s.values()) == total
        ]

    def waste(shape: dict[int, int]) -> tuple[float, int, float]:
        efficiency = math.prod(tile_efficiency(extents[d], t) for d, t in shape.items())
        inner = shape[dims[0]]
        aspect = abs(math.log(inner / shape[dims[1]])) if len(dims) > 1 else 0.0
        return (-efficiency, -inner, aspect)

    classes: dict[int, list[dict[int, int]]] = {}
    for s in shapes:
        classes.setdefault(round(math.log2(math.prod(s.values()))), []).append(s)
    return [
        s
        for group in classes.values()
        for s in sorted(group, key=waste)[:SHAPES_PER_SIZE]
    ]


def _channel_tiles(problem: Problem, mma: bool) -> list[int]:
    k = problem.extents[problem.channel]
    out = {
        t
        for t in CHANNEL_TILES
        if t <= k and tile_efficiency(k, t) >= MIN_TILE_EFFICIENCY
    }
    if k <= CHANNEL_TILES[-1]:
        out.add(k)
    if mma:
        out = {
            t for t in out if tile_efficiency(t, MMA_N) >= MIN_TILE_EFFICIENCY or t == k
        }
    return sorted(out)


# -- thread work -------------------------------------------------------------------------------


def _register_tiles(problem: Problem, tiles: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Register tiles of 4 to 64 outputs a thread that leave 64 to 512 threads: up
    to 8 output channels, and up to 8 pixels taken along the innermost pixel
    dimension first, each a divisor of the block tile."""
    channels = tiles[problem.channel]
    low = _min_threads(problem)
    out: list[tuple[int, ...]] = []
    for rk in REGISTER_SIZES:
        if rk > channels or channels % rk:
            continue
        for want in REGISTER_SIZES:
            registers = [1] * len(tiles)
            registers[problem.channel] = rk
            left = want
            for d in problem.pixels:
                registers[d] = divisor_at_most(tiles[d], left)
                left = max(1, left // registers[d])
            outputs = math.prod(registers)
            threads = math.prod(
                ceil_div(t, r) for t, r in zip(tiles, registers, strict=True)
            )
            if (
                REGISTER_OUTPUTS[0] <= outputs <= REGISTER_OUTPUTS[1]
                and low <= threads <= THREADS[1]
                and tuple(registers) not in out
            ):
                out.append(tuple(registers))
    return out


def _reduction_choices(problem: Problem) -> list[tuple[int, ...]]:
    """SIMT reduction steps that keep the order of summation: dimensions before the
    cut in tiles of 1, the cut one in near-divisor tiles, the rest whole; 4 to 72
    points a step."""
    extents = problem.reduction_extents
    total = math.prod(extents)
    sizes: set[tuple[int, ...]] = set()
    for j, e in enumerate(extents):
        for t in tile_choices(e, e):
            sizes.add((1,) * j + (t,) + tuple(extents[j + 1 :]))
    return [
        s
        for s in sorted(sizes)
        if min(SIMT_STEP[0], total) <= math.prod(s) <= SIMT_STEP[1]
    ]


def _mma_reductions(problem: Problem) -> list[tuple[int, ...]]:
    """Tensor-core steps, in any order (`reassociate`: the MMA sums in its own order
    anyway): one filter tap and 16, 32 or 64 channels (near-divisors of the
    channels, in 16-byte rows), and for a filter of several taps one filter row or
    the whole window (the input tile's halo copied once for all its taps) and 16 or
    32 channels, as `config_for` steps it."""
    extents = problem.reduction_extents
    names = problem.reduction_names
    assert problem.reduction_channel is not None  # the tensor cores sum channels
    channels = extents[problem.reduction_channel]
    steps = [
        step
        for step in MMA_CHANNEL_STEPS
        if step <= channels
        and step % 8 == 0
        and (
            channels % step == 0
            or tile_efficiency(channels, step) >= MIN_TILE_EFFICIENCY
        )
    ]
    whole = dict(zip(names, extents, strict=True))
    windows: list[dict[str, int]] = [{}]
    if "r" in whole and whole["r"] * whole["s"] > 1:
        windows += [{"s": whole["s"]}, {"r": whole["r"], "s": whole["s"]}]
    out: list[tuple[int, ...]] = []
    for window in windows:
        for step in steps if not window else steps[:2]:
            sizes = {name: window.get(name, 1) for name in names}
            sizes[names[problem.reduction_channel]] = step
            tiles = tuple(sizes[name] for name in names)
            if tiles not in out:
                out.append(tiles)
    return out


def _output_stagings(problem: Problem) -> list[bool]:
    """Whether to stage the output through shared memory: both ways for 16-bit
    outputs (H100: 10-16 % faster for three of the benchmark convolutions, 1-2 %
    slower for two), never for f32 ones (tf32's conv1 8 % slower)."""
    return [False, True] if problem.element_bytes == 2 else [False]


def _tap_unrolls(
    problem: Problem, rtiles: tuple[int, ...], coalesced: bool
) -> list[bool]:
    """Whether to unroll a step's taps: both ways when the step spans several taps
    outside the k loop (H100: the 3x3 64-channel convolution 8 % faster unrolled,
    the 256-512 one 3 % slower)."""
    names = problem.reduction_names
    looped = "r" if coalesced else "rs"  # coalescing makes the columns part of k
    taps = math.prod(t for n, t in zip(names, rtiles, strict=True) if n in looped)
    return [False, True] if taps > 1 else [False]


def _coalesced_reductions(problem: Problem) -> list[tuple[int, ...]]:
    """One filter row a step, or the whole window (columns and channels whole)."""
    names = problem.reduction_names
    whole = dict(zip(names, problem.reduction_extents, strict=True))
    return [
        tuple(rows if n == "r" else whole[n] for n in names)
        for rows in sorted({1, whole["r"]})
    ]


def _unrolls(rtiles: tuple[int, ...]) -> list[int]:
    """Steps of the innermost reduction loop unrolled together: none, or 2 or 4
    dividing its tile."""
    last = rtiles[-1]
    return [u for u in UNROLL_STEPS if u == 0 or (u <= last and last % u == 0)]
