"""The configuration a spec gets when nobody asks for one (`config_for`): the
default pipeline's knobs (`KernelConfig`, defined in `affinec.driver.kernel_config` and
offered here with the rule that fills them) set by rules of thumb measured on the
H100, for the SIMT route, the tensor cores and Hopper's kernels.

This module holds the rule itself, the SIMT route's tiles, and the grid filling
(`filling_config_for`: flattened pixels and split-K where a grid leaves the chip
idle). The tensor-core route's tiles, steps and stages are
`affinec.driver.mma_config`'s, Hopper's kernel `affinec.driver.wgmma_config`'s; their
public names are offered here too.
"""

from __future__ import annotations

import math
from dataclasses import replace

from affinec.base.element_types import storage_bytes
from affinec.base.spec import (  # noqa: F401 (flattened_spec ...: public here too)
    ConvSpec,
    MatmulSpec,
    Spec,
    flattened_spec,
    flattens,
    split_spec,
)
from affinec.driver.grid_geometry import computed_outputs, grid_blocks
from affinec.driver.kernel_config import UNPROMOTED, KernelConfig, with_knobs
from affinec.driver.mma_config import (  # noqa: F401 (the route's rules: public here too)
    COALESCED_STAGES,
    MMA_BLOCK_CHANNELS,
    MMA_BLOCK_PIXELS,
    MMA_K_BYTES,
    MMA_MIN_CHANNELS,
    MMA_PADDED_STAGES,
    MMA_SHARED_BYTES,
    MMA_STAGES,
    MMA_STEP_BYTES,
    MMA_TF32_WARP_GRID,
    MMA_WARP_GRID,
    MMA_WINDOW_PIXELS,
    MMA_WINDOW_STEP,
    MMA_WINDOW_WARP_GRID,
    SHARED_ROW_PADDING,
    STAGED_OUTPUT,
    coalescible,
    divisor_at_most,
    padded_channels,
    reduction_channels,
    shared_budget,
    step_bytes,
    tensor_core_config,
    tensor_cores_take,
    tile_at_most,
    tile_pixels,
    window_extent,
)
from affinec.driver.wgmma_config import (  # noqa: F401 (public here too)
    MULTIPROCESSORS,
    WGMMA_TILES,
    wgmma_config_for,
    wgmma_grid_blocks,
)
from affinec.frontend.contraction import contraction_of, is_depthwise
from affinec.hardware.chips import chip
from affinec.transforms.gpu.thread_plan import VECTOR_BYTES

DEFAULT_PLANNING_ARCH = "sm_90"
"""The chip `config_for` plans for unless told: the H100, where its constants were
measured."""


# -- the configuration of a spec --------------------------------------------------------------

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


def takes_any_batch(config: KernelConfig) -> bool:
    """Whether `config` compiles a convolution of any batch: one image a block,
    and none of the routes that tile the batch otherwise (split-K's workspace,
    flattened pixels, wgmma's kernel)."""
    return config.tile_sizes[:1] in ((), (1,)) and not (
        config.flatten_pixels or config.splits > 1 or config.wgmma
    )


def batch_config_for(
    spec: ConvSpec, *, tf32: bool = False, arch: str = DEFAULT_PLANNING_ARCH
) -> KernelConfig:
    """The configuration of a convolution of any batch: `config_for`'s for the
    fixed batch `spec.n` where it takes one image a block (the grid then grows with
    the batch and nothing in a block depends on it), else `config_for`'s for one
    image (the configuration of the batch bucket below every other)."""
    fixed = config_for(
        replace(spec, dynamic_batch=False), tf32=tf32, arch=arch, splits=1
    )
    if takes_any_batch(fixed):
        return fixed
    return config_for(
        replace(spec, n=1, dynamic_batch=False), tf32=tf32, arch=arch, splits=1
    )


def config_for(
    spec: Spec,
    *,
    tf32: bool = False,
    arch: str = DEFAULT_PLANNING_ARCH,
    splits: int | None = None,
    flatten_pixels: bool | None = None,
    wgmma: bool = False,
) -> KernelConfig:
    """A good configuration for `spec` without measuring. f16 and bf16 with at least
    `MMA_MIN_CHANNELS` input channels take the tensor cores (`tensor_core_config`);
    so does f32 with `tf32` (opt-in: tf32 rounds the operands). Other convolutions
    and products take the SIMT kernel of a register-tiled implicit GEMM
    (`BLOCK_PIXELS` x `BLOCK_CHANNELS` outputs a block, `REGISTER_PIXELS` x
    `REGISTER_CHANNELS` a thread) with a reduction step that keeps the order of
    summation. Tiles divide the extents where they can. Other specs (the outer
    product) get the passes' own defaults. The shared-memory budget is `arch`'s
    (`shared_budget`). With `splits`, the reduction is split (`split_spec`): the
    blocks are as the spec's, the reduction's steps those of one split. With
    `flatten_pixels`, the configuration is the product's (`flattened_spec`). With
    `wgmma`, Hopper's kernel (`wgmma_config_for`). A spec of any batch
    (`dynamic_batch`) is configured for its `n` with one image a block
    (`batch_config_for`). Left unsaid, `splits` and `flatten_pixels` are chosen
    to fill the chip (`filling_config_for`); `splits=1, flatten_pixels=False` is
    the grid of the spec's own tiles."""
    if splits is None and flatten_pixels is None and not wgmma:
        return filling_config_for(spec, tf32=tf32, arch=arch)
    splits = 1 if splits is None else splits
    flatten_pixels = bool(flatten_pixels)
    if splits < 1:
        raise ValueError(f"splits must be 1 or more, got {splits}")
    if isinstance(spec, ConvSpec) and spec.dynamic_batch:
        if wgmma or splits > 1 or flatten_pixels:
            raise ValueError(
                "a convolution of any batch (batch=dynamic) compiles with one image "
                "a block: no wgmma, splits or flatten-pixels yet"
            )
        return batch_config_for(spec, tf32=tf32, arch=arch)
    if wgmma:
        return replace(wgmma_config_for(spec, arch), splits=splits)
    if flatten_pixels:
        product = config_for(flattened_spec(spec), tf32=tf32, arch=arch, splits=splits)
        return replace(product, flatten_pixels=True)
    if splits > 1:
        one = split_spec(spec, splits)  # one split's steps on the spec's own grid
        config = config_for(one, tf32=tf32, arch=arch, splits=1, flatten_pixels=False)
        if config.pad_channels > 1 or config.coalesce_reduction:
            raise ValueError(
                f"splits={splits} leaves a split too few channels for the tensor "
                "cores' k (they would be padded or coalesced): split fewer"
            )
        return replace(config, splits=splits)
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


# -- filling the chip ------------------------------------------------------------------------

SPLIT_COUNTS = (2, 4, 8, 16)
"""The split counts `filling_config_for` chooses from."""
MIN_SPLIT_CHANNELS = 64
"""The fewest channels one split keeps: below, its partial sums cost more to write
and add than the blocks gain."""


def filling_config_for(
    spec: Spec, *, tf32: bool = False, arch: str = DEFAULT_PLANNING_ARCH
) -> KernelConfig:
    """`config_for`'s configuration with the grid filled: a tensor-core
    configuration whose blocks leave most multiprocessors idle takes fewer idle
    ones. A 1x1 convolution is compiled over its flattened pixels when the
    product's tiles compute fewer outputs than the image's (small images at a
    batch: a 7x7 image in 128-pixel tiles computes 79 % idle rows); then, while
    the grid is under one block a multiprocessor (`MULTIPROCESSORS`), the channel
    reduction is split in as many as fill it (`SPLIT_COUNTS`), each split keeping
    `MIN_SPLIT_CHANNELS` channels or more (split-K for a grid of less than one
    wave). Other configurations are `config_for`'s as they are."""
    base = config_for(spec, tf32=tf32, arch=arch, splits=1, flatten_pixels=False)
    if not base.mma or base.pad_channels > 1 or base.coalesce_reduction:
        return base
    if isinstance(spec, ConvSpec) and spec.dynamic_batch:
        return base
    if warpgroups := _warpgroup_product(spec, tf32, arch) or _warpgroup_window(
        spec, tf32, arch
    ):
        return warpgroups
    if short_product := _short_flattened_product(spec, tf32, arch):
        return short_product
    flatten = False
    if isinstance(spec, ConvSpec) and flattens(spec):
        product = flattened_spec(spec)
        flat = config_for(product, tf32=tf32, arch=arch, splits=1, flatten_pixels=False)
        flatten = computed_outputs(product, flat) < computed_outputs(spec, base)
    if flatten:
        base = replace(flat, flatten_pixels=True)
    routed = flattened_spec(spec) if flatten else spec
    blocks = grid_blocks(routed, base)
    channels = reduction_channels(routed)
    splits = 1
    for s in SPLIT_COUNTS:
        if blocks * s > MULTIPROCESSORS or channels // s < MIN_SPLIT_CHANNELS:
            break
        splits = s
    if splits == 1:
        return base
    return config_for(spec, tf32=tf32, arch=arch, splits=splits, flatten_pixels=flatten)


SHORT_REDUCTION = 576
"""The most channels a 1x1 convolution reduces over for `filling_config_for` to
compile it as the product of its flattened pixels, unsplit: over so few channels
(nine 64-channel steps), a split's partial sums cost more than idle
multiprocessors do. Fitted on MobileNetV2 at batch 1 and 32 (H100, 2026-12-06,
`benchmarks/layer_sweep.py`): its 1x1s over 96-576 channels ran fastest flattened
and unsplit, those over 960 split (6.0 against 8.6 us at batch 1)."""
SMALL_PRODUCT_WAVES = 2
"""A flattened product whose `MMA_BLOCK_PIXELS`-row tiles would give the chip
fewer blocks than this many a multiprocessor takes `SMALL_PRODUCT_ROWS`-row tiles:
twice the blocks, each on four warps of 32 x 32."""
SMALL_PRODUCT_ROWS = 64


WGMMA_PRODUCT_TILES = ((128, 128), (128, 64))
"""The block tiles of a product `filling_config_for` puts on `affinec-wgmma`, the
first whose grid fills the chip: two warpgroups of 64 rows, 128 columns each, or 64
where 128 leave multiprocessors idle and the reduction is `NARROW_TILE_MIN_REDUCTION`
or longer. Fitted on ResNet-50's 1x1s at batch 32 (H100, 2026-12-07,
`benchmarks/layer_sweep.py`: the 1x1 1024-256 at 14 x 14, 98 blocks of 128 x 128, ran
12.2 us in 196 of 128 x 64 against 18.3 on `mma.sync`); reported on ResNet-50 at
batch 16 (docs/BENCHMARKS.md)."""
NARROW_TILE_MIN_REDUCTION = 256
"""The fewest channels a product reduces over for its 128 x 64 tile: a block then
does half the work of a 128 x 128 one, and over fewer than four steps of 64 the
pipeline's fill and drain are most of it. MobileNetV2's 1x1 160-960 at 7 x 7, batch
32 (three steps), ran 10.7 us on it against 6.9 on `mma.sync`; its 320-1280 (five
steps) 6.7 against 10.7 (H100, 2026-12-07)."""
WGMMA_PRODUCT_STAGES = 4
"""Its steps in flight: each step waits for its warpgroup MMAs before the next
copy is issued, so more copies in flight hide more of the wait. Fitted on
ResNet-50's 1x1 layers at batch 32 (H100, 2026-12-06,
`scripts/gpu_wgmma_pipeline.py`): 3 stages lost to 4 on five of the eight layers the
rule takes (1x1 1024->256 at 14^2: 20.5 against 14.4 us)."""
WGMMA_MIN_CHANNELS = 128
"""The fewest channels on each side of a product (reduced and produced) for
`affinec-wgmma`: below, a block's work is a step or two of a 64-wide tile, and
ResNet-50's 1x1s of 64 channels ran no faster on it than on `mma.sync`."""


def _warpgroup_product(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """On sm_90a, a product or a 1x1 convolution over its flattened pixels on
    `affinec-wgmma` in `WGMMA_PRODUCT_TILES` tiles, `WGMMA_PRODUCT_STAGES` in flight,
    the promotion's copies loaded by TMA with the MMAs in flight
    (`warpgroup_product_config`), where its tiles give every multiprocessor a
    block (a smaller grid is left to the split reduction of `filling_config_for`);
    None otherwise. Fitted on ResNet-50's 1x1s at batch 32 (their sum 0.717 -> 0.667 ms
    predicted from the layers taken), reported on products and on ResNet-50 at
    batch 8 and 16, which the fit never saw (docs/BENCHMARKS.md)."""
    if arch != "sm_90a" or tf32:
        return None
    product = _wgmma_product(spec, arch)
    if product is None:
        return None
    for tile in WGMMA_PRODUCT_TILES:
        if tile != WGMMA_PRODUCT_TILES[0] and product.k < NARROW_TILE_MIN_REDUCTION:
            return None
        config = _product_kernel(product, tile, flatten=product is not spec)
        if grid_blocks(product, config) >= MULTIPROCESSORS:
            return config
    return None


def warpgroup_product_config(
    spec: Spec, tile: tuple[int, int], arch: str = "sm_90a"
) -> KernelConfig | None:
    """A product, or a 1x1 convolution over its flattened pixels, on
    `affinec-wgmma` in `tile` (rows, columns) blocks, `WGMMA_PRODUCT_STAGES` TMA
    stages with the MMAs in flight; None where the spec is no such product, either
    side of it has fewer than `WGMMA_MIN_CHANNELS`, or `config_for` would not put
    it on the tensor cores."""
    product = _wgmma_product(spec, arch)
    if product is None:
        return None
    return _product_kernel(product, tile, flatten=product is not spec)


def _wgmma_product(spec: Spec, arch: str) -> MatmulSpec | None:
    """The product `affinec-wgmma` would compute for `spec` (a 1x1 convolution's over
    its flattened pixels), where both its sides have `WGMMA_MIN_CHANNELS` or more
    and `config_for` puts it on the tensor cores; None otherwise."""
    if isinstance(spec, ConvSpec) and flattens(spec):
        product = flattened_spec(spec)
    elif isinstance(spec, MatmulSpec):
        product = spec
    else:
        return None
    assert isinstance(product, MatmulSpec)
    if min(product.k, product.n) < WGMMA_MIN_CHANNELS:
        return None
    if not config_for(product, arch=arch, splits=1, flatten_pixels=False).mma:
        return None
    return product


def _product_kernel(
    product: MatmulSpec, tile: tuple[int, int], *, flatten: bool
) -> KernelConfig:
    return KernelConfig(
        tile_sizes=tile,
        reduction_tile_sizes=(MMA_STEP_BYTES // storage_bytes(product.dtype),),
        mma=True,
        tensor_core="wgmma",
        tma=True,
        in_flight=True,
        stages=WGMMA_PRODUCT_STAGES,
        stage_output=True,
        flatten_pixels=flatten,
    )


def _warpgroup_window(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """On sm_90a, a convolution with filter taps (a 3x3, strided or not) of
    `WGMMA_MIN_CHANNELS` or more channels in and out on Hopper's kernel
    (`wgmma_config_for`: TMA tap by tap, MMAs in flight), where its tiles give
    every multiprocessor a block; None otherwise, and where that kernel does not
    take the spec. Fitted on VGG-16's 3x3s at batch 32 (H100, 2026-12-07,
    `scripts/gpu_wgmma_taps.py`): it beat `mma.sync` on the six of 128 channels
    or more (1.2-1.7x) and lost on the two of 64. Reported on ResNet-50 (same
    machine, before and after): 1.435 -> 1.389 ms at batch 32, unchanged at batch
    1; VGG-16 at batch 1 not yet timed with it (docs/BENCHMARKS.md)."""
    if arch != "sm_90a" or tf32 or not isinstance(spec, ConvSpec):
        return None
    if spec.r * spec.s == 1 or spec.groups != 1:
        return None
    if min(spec.c, spec.k) < WGMMA_MIN_CHANNELS:
        return None
    try:
        config = wgmma_config_for(spec, arch)
    except ValueError:
        return None
    if wgmma_grid_blocks(spec, config) < MULTIPROCESSORS:
        return None
    return config


def _short_flattened_product(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """A 1x1 convolution over at most `SHORT_REDUCTION` channels as the product of
    its flattened pixels, unsplit, on `MMA_BLOCK_PIXELS` x `MMA_BLOCK_CHANNELS`
    tiles, or `SMALL_PRODUCT_ROWS`-row ones where the product has few blocks
    (`SMALL_PRODUCT_WAVES`); None for other specs. Fitted on
    MobileNetV2 (batch 1 and 32), reported on ResNet-50, which the choice never saw
    (H100, 2026-12-06, docs/BENCHMARKS.md)."""
    if not (isinstance(spec, ConvSpec) and flattens(spec) and not tf32):
        return None
    if reduction_channels(spec) > SHORT_REDUCTION:
        return None
    product = flattened_spec(spec)
    flat = config_for(product, arch=arch, splits=1, flatten_pixels=False)
    if not flat.mma:
        return None
    wide = replace(
        flat,
        tile_sizes=(MMA_BLOCK_PIXELS, MMA_BLOCK_CHANNELS),
        warp_grid=MMA_WARP_GRID,
        flatten_pixels=True,
    )
    if grid_blocks(product, wide) < SMALL_PRODUCT_WAVES * MULTIPROCESSORS:
        return replace(wide, tile_sizes=(SMALL_PRODUCT_ROWS, MMA_BLOCK_CHANNELS))
    return wide


__all__ = [
    "DEFAULT_PLANNING_ARCH",
    "UNPROMOTED",
    "KernelConfig",
    "config_for",
    "flattened_spec",
    "flattens",
    "split_spec",
    "wgmma_config_for",
    "warpgroup_product_config",
    "with_knobs",
]
