"""The configuration a spec gets when nobody asks for one (`config_for`): the
default pipeline's knobs (`KernelConfig`, defined in `affinec.driver.kernel_config` and
offered here with the rule that fills them) set by rules of thumb measured on the
H100, for the SIMT route, the tensor cores and Hopper's kernels.

This module holds the rule's options (splits, flattened pixels, a batch of any
size) and the grid filling (`filling_config_for`: Hopper's kernels on sm_90a,
flattened pixels and split-K where a grid leaves the chip idle). The configuration
of a spec's own tiles is `affinec.driver.tile_config`'s (the SIMT route's, the
depthwise route's), the tensor-core route's tiles, steps and stages
`affinec.driver.mma_config`'s, Hopper's kernels `affinec.driver.wgmma_config`'s,
`affinec.driver.wgmma_taps_ss_rule`'s and `affinec.driver.wgmma_taps_config`'s;
their public names are offered here too.
"""

from __future__ import annotations

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
from affinec.driver.tile_config import (  # noqa: F401 (the own tiles' rules: public here too)
    BLOCK_CHANNELS,
    BLOCK_PIXELS,
    DEPTHWISE_ROW_PIXELS,
    DEPTHWISE_STAGES,
    MAX_THREADS,
    MIN_THREADS,
    REDUCTION_STEP,
    REGISTER_CHANNELS,
    REGISTER_PIXELS,
    WARP_THREADS,
    channel_vector,
    depthwise_config,
    own_tiles_config,
    strided_depthwise_config,
)
from affinec.driver.wgmma_config import (  # noqa: F401 (public here too)
    MULTIPROCESSORS,
    WGMMA_TILES,
    wgmma_config_for,
    wgmma_grid_blocks,
)
from affinec.driver.wgmma_taps_ss_rule import ss_config_for

DEFAULT_PLANNING_ARCH = "sm_90"
"""The chip `config_for` plans for unless told: the H100, where its constants were
measured."""


# -- the configuration of a spec --------------------------------------------------------------


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
    return own_tiles_config(spec, tf32=tf32, arch=arch)


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
    if one_wave := _one_wave_product(spec, tf32, arch):
        return one_wave
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


WIDE_PRODUCT_TILE = (128, 256)
"""The block tile of a long, compute-bound product (`_warpgroup_product`): two
warpgroups of 64 rows by 256 columns, 48 KB of shared memory a step for twice the
MMAs of a 128 x 128 tile's 32 KB, in `WIDE_PRODUCT_STAGES` TMA stages loaded by a
producer warpgroup of its own (`warp_specialize`), as measured: 2048^3 0.0337 ->
0.0275 ms, 8192 x 8192 x 1024 0.2719 -> 0.2331, 4096 x 2048 x 4096 0.1233 -> 0.0977
(cuBLAS 0.0273, 0.1964, 0.0905; H100, 2026-12-07,
`scripts/gpu_warp_specialize.py --products`)."""
WIDE_PRODUCT_STAGES = 3
WIDE_TILE_MIN_REDUCTION = 512
"""The fewest channels a product reduces over for `WIDE_PRODUCT_TILE`: over 128 or
256, a block's eight steps or fewer leave its fill and epilogue most of the time,
and ResNet-50's 1x1s over them ran slower in it (H100, 2026-12-07: 128 -> 512 at
28 x 28, batch 32, 20.1 against 19.1 us; 256 -> 1024 at 14 x 14, 15.0 against
14.1)."""
WIDE_TILE_MIN_INTENSITY = 235
"""The fewest flops a product does per byte of its operands and result (each moved
once) for `WIDE_PRODUCT_TILE`: the H100's warpgroup MMAs (about 700 TFLOP/s
measured) and its memory (2.98 TB/s) take as long at 235. Below, the product waits
on memory, and the wide tile's fewer shared-memory loads per MMA gain nothing:
ResNet-50's 1x1 512 -> 256 at 28 x 28, batch 32 (170 flops a byte, 196 blocks),
ran 24.0 against 22.6 us in it (H100, 2026-12-07)."""
WIDE_TILE_MIN_BLOCKS = 96
"""The fewest blocks of `WIDE_PRODUCT_TILE` a product needs for it: ResNet-50's
1x1 2048 -> 512 at 7 x 7, batch 32 (26 blocks) ran 24.4 against 19.9 us, its 1024
-> 256 at 14 x 14 (49) 16.7 against 11.9, its 1024 -> 512 at 14 x 14 (98) 17.7
against 20.1 (H100, 2026-12-07)."""


def _warpgroup_product(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """On sm_90a, a product or a 1x1 convolution over its flattened pixels on
    `affinec-wgmma`, the promotion's copies loaded by TMA with the MMAs in flight:
    in `WIDE_PRODUCT_TILE` where it reduces over `WIDE_TILE_MIN_REDUCTION`
    channels or more, does `WIDE_TILE_MIN_INTENSITY` flops a byte or more and has
    `WIDE_TILE_MIN_BLOCKS` of those tiles (fitted on three products and ResNet-50's
    1x1s at batch 32, reported on 4096^3 and 4096 x 4096 x 1024: 0.74 -> 0.90 and
    0.72 -> 0.88 of cuBLAS); else in `WGMMA_PRODUCT_TILES` tiles,
    `WGMMA_PRODUCT_STAGES` in flight (`warpgroup_product_config`), where its tiles
    give every multiprocessor a block (a smaller grid is left to the split
    reduction of `filling_config_for`); None otherwise. The 128-row tiles were
    fitted on ResNet-50's 1x1s at batch 32 (their sum 0.717 -> 0.667 ms predicted
    from the layers taken), reported on products and on ResNet-50 at batch 8 and
    16, which the fit never saw (docs/BENCHMARKS.md)."""
    if arch != "sm_90a" or tf32:
        return None
    product = _wgmma_product(spec, arch)
    if product is None:
        return None
    if (
        product.k >= WIDE_TILE_MIN_REDUCTION
        and product.n >= WIDE_PRODUCT_TILE[1]
        and arithmetic_intensity(product) >= WIDE_TILE_MIN_INTENSITY
    ):
        wide = _product_kernel(
            product,
            WIDE_PRODUCT_TILE,
            flatten=product is not spec,
            stages=WIDE_PRODUCT_STAGES,
            warp_specialize=True,
        )
        if grid_blocks(product, wide) >= WIDE_TILE_MIN_BLOCKS:
            return wide
    for tile in WGMMA_PRODUCT_TILES:
        if tile != WGMMA_PRODUCT_TILES[0] and product.k < NARROW_TILE_MIN_REDUCTION:
            return None
        config = _product_kernel(product, tile, flatten=product is not spec)
        if grid_blocks(product, config) >= MULTIPROCESSORS:
            return config
    return None


def arithmetic_intensity(product: MatmulSpec) -> float:
    """The flops of `product` per byte of A, B and C, each moved once."""
    m, n, k = product.m, product.n, product.k
    return 2 * m * n * k / (storage_bytes(product.dtype) * (m * k + k * n + m * n))


def warpgroup_product_config(
    spec: Spec,
    tile: tuple[int, int],
    arch: str = "sm_90a",
    min_channels: int = WGMMA_MIN_CHANNELS,
) -> KernelConfig | None:
    """A product, or a 1x1 convolution over its flattened pixels, on
    `affinec-wgmma` in `tile` (rows, columns) blocks, `WGMMA_PRODUCT_STAGES` TMA
    stages with the MMAs in flight; None where the spec is no such product, either
    side of it has fewer than `min_channels` (`config_for`'s rule:
    `WGMMA_MIN_CHANNELS`), or `config_for` would not put it on the tensor cores."""
    product = _wgmma_product(spec, arch, min_channels)
    if product is None:
        return None
    return _product_kernel(product, tile, flatten=product is not spec)


def _wgmma_product(
    spec: Spec, arch: str, min_channels: int = WGMMA_MIN_CHANNELS
) -> MatmulSpec | None:
    """The product `affinec-wgmma` would compute for `spec` (a 1x1 convolution's over
    its flattened pixels), where both its sides have `min_channels` or more and
    `config_for` puts it on the tensor cores; None otherwise."""
    if isinstance(spec, ConvSpec) and flattens(spec):
        product = flattened_spec(spec)
    elif isinstance(spec, MatmulSpec):
        product = spec
    else:
        return None
    assert isinstance(product, MatmulSpec)
    if min(product.k, product.n) < min_channels:
        return None
    if not config_for(product, arch=arch, splits=1, flatten_pixels=False).mma:
        return None
    return product


def _product_kernel(
    product: MatmulSpec,
    tile: tuple[int, int],
    *,
    flatten: bool,
    stages: int = WGMMA_PRODUCT_STAGES,
    warp_specialize: bool = False,
) -> KernelConfig:
    return KernelConfig(
        tile_sizes=tile,
        reduction_tile_sizes=(MMA_STEP_BYTES // storage_bytes(product.dtype),),
        mma=True,
        tensor_core="wgmma",
        tma=True,
        in_flight=True,
        stages=stages,
        warp_specialize=warp_specialize,
        stage_output=True,
        flatten_pixels=flatten,
    )


def _warpgroup_window(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """On sm_90a, a convolution with filter taps or strides of `WGMMA_MIN_CHANNELS`
    or more channels in and out on one of Hopper's window kernels, where its blocks
    give every multiprocessor one: `affinec-wgmma`'s descriptor route in the block
    `ss_config_for` picks where that rule takes the spec, else (a convolution with
    taps) the template's kernel (`wgmma_config_for`: TMA tap by tap, MMAs in
    flight); None otherwise.

    The template's kernel was fitted on VGG-16's 3x3s at batch 32 (H100,
    2026-12-07, `scripts/gpu_wgmma_taps.py`: 1.2-1.7x `mma.sync` on the six of 128
    channels or more, slower on the two of 64). The descriptor route's rule was
    fitted on the stride-1 3x3s of ResNet-50 and VGG-16 at batch 32 and reported,
    against the template's and `mma.sync` kernels in the same run, on both networks
    at batch 8 and 16 and on ResNet-50's strided layers, which the fit never saw
    (H100, 2026-12-07, `benchmarks/layer_sweep.py`, docs/BENCHMARKS.md)."""
    if arch != "sm_90a" or tf32 or not isinstance(spec, ConvSpec):
        return None
    if spec.groups != 1 or min(spec.c, spec.k) < WGMMA_MIN_CHANNELS:
        return None
    try:
        return ss_config_for(spec, arch)
    except ValueError:
        pass
    if spec.r * spec.s == 1:
        return None
    try:
        config = wgmma_config_for(spec, arch)
    except ValueError:
        return None
    if wgmma_grid_blocks(spec, config) < MULTIPROCESSORS:
        return None
    return config


ONE_WAVE_TILES = (((64, 32), (2, 1)), ((64, 64), (2, 2)))
"""The tiles (rows, columns) and warp grids `_one_wave_product` tries, the smaller
first."""


def _one_wave_product(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """A 1x1 convolution over more channels than `_short_flattened_product` takes
    as the product of its flattened pixels, unsplit, on the first of
    `ONE_WAVE_TILES` whose grid fits one wave of the chip and fills at least half of
    it (a projection over few pixels: MobileNetV2's 960 -> 160 at 7 x 7, batch 32,
    1568 rows by 160 columns, 125 blocks of 64 x 32); None where neither does, and
    the reduction is split to fill the chip instead (`filling_config_for`). Fitted on
    MobileNetV2's 1x1s at batch 32 (H100, 2026-12-06, `benchmarks/layer_sweep.py`):
    the fastest tile of the two it takes (960 -> 160: 64 x 32, 8.3 us against 20.1
    split; 960 -> 320: 64 x 64, 9.7 against 11.1). Reported on EfficientNet-B0 and at
    batch 8 and 16, which the fit never saw (docs/BENCHMARKS.md)."""
    if not (isinstance(spec, ConvSpec) and flattens(spec) and not tf32):
        return None
    product = flattened_spec(spec)
    flat = config_for(product, arch=arch, splits=1, flatten_pixels=False)
    if not flat.mma or flat.pad_channels > 1 or flat.coalesce_reduction:
        return None
    for tile, warps in ONE_WAVE_TILES:
        config = replace(flat, tile_sizes=tile, warp_grid=warps, flatten_pixels=True)
        if MULTIPROCESSORS // 2 <= grid_blocks(product, config) <= MULTIPROCESSORS:
            return config
    return None


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
