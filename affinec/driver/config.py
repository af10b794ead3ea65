"""The configuration a spec gets when nobody asks for one (`config_for`): the
default pipeline's knobs (`KernelConfig`, defined in `affinec.driver.kernel_config` and
offered here with the rule that fills them) set by rules of thumb measured on the
H100, for the SIMT route, the tensor cores and Hopper's kernels.
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
from affinec.driver.kernel_config import UNPROMOTED, KernelConfig, with_knobs
from affinec.frontend.contraction import contraction_of
from affinec.hardware.chips import MMA_SHAPES, Chip, chip

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
    `MMA_MIN_CHANNELS` input channels take the tensor cores (`_tensor_core_config`);
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
        channel = names.index("j")
        pixels = [names.index("i")]
    else:
        return KernelConfig(promote=False)
    if tensor_cores_take(spec) and (
        tf32
        or (
            spec.dtype != "f32"
            and (_channels(spec) >= MMA_MIN_CHANNELS or _coalescible(spec))
        )
    ):
        return _tensor_core_config(spec, extents, channel, pixels, tf32, budget)
    padded = padded_channels(spec)
    if padded != getattr(spec, "c", padded):
        assert isinstance(spec, ConvSpec)
        config = _tensor_core_config(
            replace(spec, c=padded), extents, channel, pixels, tf32, budget
        )
        return replace(config, pad_channels=padded)

    tiles = [1] * len(extents)
    registers = [1] * len(extents)
    tiles[channel] = _tile(extents[channel], BLOCK_CHANNELS)
    registers[channel] = _divisor_at_most(tiles[channel], REGISTER_CHANNELS)
    room = BLOCK_PIXELS
    for k, d in enumerate(pixels):
        limit = min(room, 16) if k == 0 and len(pixels) > 1 else room
        tiles[d] = _tile(extents[d], limit)
        room = max(1, room // tiles[d])
    # Pixels of one thread: along the innermost pixel dimension first.
    want = REGISTER_PIXELS
    for d in pixels:
        registers[d] = _divisor_at_most(tiles[d], want)
        want = max(1, want // registers[d])
    threads = 1
    for t, r in zip(tiles, registers, strict=True):
        threads *= t // r
    while threads > MAX_THREADS:
        # Give the thread more of the outermost pixel dimension that has some.
        grown = False
        for d in reversed(pixels):
            r = _divisor_at_most(tiles[d], registers[d] * 2)
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
        r = _divisor_at_most(tiles[d], registers[d] // 2)
        threads = threads * registers[d] // r
        registers[d] = r
    return KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=_reduction_tiles(spec),
        register_tile=tuple(registers),
    )


MMA_BLOCK_PIXELS = 128
MMA_BLOCK_CHANNELS = 64
MMA_STEP_BYTES = 128
"""Bytes of input channels a step of the tensor-core route copies when the step is
one filter tap: 64 f16 channels (four k=16 MMAs), 32 tf32 ones. On the H100
(1x1-256-64, three stages): f16 0.040 ms in 64-channel steps, 0.048 in 32-channel
ones; tf32 0.096 ms in 32-channel steps, 0.119 in one stage of 64."""
MMA_PADDED_STAGES = 2
"""Stages of a step whose channels are padded to the MMA's k (fewer than k): its
copies are mostly zero-fill, and a third stage only costs blocks per multiprocessor
(ResNet-50's first layer in tf32: 1.07 ms in two stages, 1.28 in three)."""
MMA_WINDOW_STEP = 16
"""Input channels a step copies when the step spans filter taps: the input tile's
halo is copied once for all of them, not once a tap (H100, 2026-11-23, the 3x3
convolutions in f16: 0.628 -> 0.528 ms with 64 channels, 0.533 -> 0.418 ms with 256,
0.044 -> 0.041 ms with 128 (one filter row a step))."""
MMA_WARP_GRID = (2, 2)
"""Four warps a block, each 64 pixels x 32 channels of a 128 x 64 tile (per-tap and
coalesced steps, products). Two warps of 128 x 32 were faster on the large benchmark
convolutions (H100, 2026-11-23: 3x3 64-channel 1.08 ms against 1.34 with 2 x 2), but
where a layer has about one block a multiprocessor they leave two of its four
schedulers without a warp. Fitted on MobileNetV2 and VGG-16 at batch 32
(`benchmarks/layer_sweep.py`, H100, 2026-12-06, `docs/results/gpu/2026-12-06/`):
MobileNetV2's convolutions 1.084 -> 0.947 ms (cuDNN 0.586), its coalesced stem
68.4 -> 30.2 us, its deep 1x1 projections up to 2x faster, its shallow ones within
6 %; VGG-16 (window steps only) unchanged. Reported on ResNet-50, which the choice
never saw: batch 32 1.962 -> 1.593 ms, batch 1 0.453 -> 0.418 (cuDNN 0.999, 0.417)."""
MMA_TF32_WARP_GRID = (1, 2)
"""tf32's grid: two warps measured faster (2026-11-23); four not timed in tf32."""
MMA_WINDOW_PIXELS = 256
MMA_WINDOW_WARP_GRID = (2, 2)
"""Window steps: four warps over 256 pixels, each 128 x 32 as with two; the taps
unrolled. H100 (2026-11-23, docs/results/sweep/sweep-v8*.log, f16): the 3x3
64-channel convolution 0.424 -> 0.380 ms, 256-512 0.388 -> 0.357, 3x3-128 0.032 ->
0.029. The 1x1 (per-tap steps) and ResNet-50's first layer (coalesced) were slower
in 256-pixel blocks (0.032 -> 0.035, 0.222 -> 0.255): they keep 128 pixels a block
(`MMA_WARP_GRID`)."""
STAGED_OUTPUT = True
"""The tensor-core route stores its output through shared memory (`stage_output`,
16 bytes a thread, in the bytes of the dead tiles) in 16-bit types. On the H100
(2026-11-23, docs/results/sweep/sweep-staged*.log and sweep-overlay.log, f16, ms),
paired 4-byte stores -> staged: ResNet-50's first layer 0.215 -> 0.185, the 1x1
0.032 -> 0.029-0.031, 3x3-128 0.030 -> 0.027, the 3x3-64 0.379 -> 0.313 and the
256-512 0.358 -> 0.350 (window steps, two stages; before the staged tile took the
tiles' bytes, its own 32 KB made them slower: 0.386, 0.362). tf32's f32 output does
not gain (conv1 0.412 -> 0.446)."""
MMA_STAGES = 3
MMA_MIN_CHANNELS = 16
"""Fewer input channels than one MMA's k leave the tensor cores mostly multiplying
zeros (ResNet-50's first layer, 4 channels: 7.4 ms against 1.5 ms on the SIMT route,
H100, 2026-11-23): such specs take the SIMT route."""
MMA_SHARED_BYTES = 80 * 1024
"""The tensor-core route's budget for a block's shared tiles, all stages (past 48
KiB they are dynamic shared memory): two steps over a 3x3 window, three 64-channel
taps of a 1x1. Measured on the H100 (2026-11-23, docs/BENCHMARKS.md): a third window
stage cost 5-15 % (fewer blocks per multiprocessor), a second one gained 0-3 %."""
COALESCED_STAGES = 2
"""Steps in flight for a coalesced convolution (one filter row a step). ResNet-50's
first layer in f16 on the H100 (2026-11-23, docs/results/sweep/): 0.388 ms in two
stages, 0.401 in three, 0.438 with the whole window in one step (no overlap in a
block)."""
MMA_K_BYTES = MMA_SHAPES["f16"][2] * 2
"""Bytes of one MMA's k (m16n8k16's 16 halves, m16n8k8's 8 tf32 words): the least a
tap's channels take in a shared tile."""
SHARED_ROW_PADDING = 16
"""Bytes `affinec-plan-shared-memory` adds to a tensor-core tile's rows: a 16-byte
shift a row keeps ldmatrix's eight rows in distinct banks. tf32's filter tiles are
read as 32-bit words four rows at a time and take twice that."""


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
    channels = _channels(routed)
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


def _short_flattened_product(spec: Spec, tf32: bool, arch: str) -> KernelConfig | None:
    """A 1x1 convolution over at most `SHORT_REDUCTION` channels as the product of
    its flattened pixels, unsplit, on `MMA_BLOCK_PIXELS` x `MMA_BLOCK_CHANNELS`
    tiles, or `SMALL_PRODUCT_ROWS`-row ones where the product has few blocks
    (`SMALL_PRODUCT_WAVES`); None for other specs. Fitted on
    MobileNetV2 (batch 1 and 32), reported on ResNet-50, which the choice never saw
    (H100, 2026-12-06, docs/BENCHMARKS.md)."""
    if not (isinstance(spec, ConvSpec) and flattens(spec) and not tf32):
        return None
    if _channels(spec) > SHORT_REDUCTION:
        return None
    product = flattened_spec(spec)
    flat = config_for(product, arch=arch, splits=1, flatten_pixels=False)
    if not flat.mma:
        return None
    blocks = -(-product.m // MMA_BLOCK_PIXELS) * -(-product.n // MMA_BLOCK_CHANNELS)
    small = blocks < SMALL_PRODUCT_WAVES * MULTIPROCESSORS
    rows = SMALL_PRODUCT_ROWS if small else MMA_BLOCK_PIXELS
    return replace(
        flat,
        tile_sizes=(rows, MMA_BLOCK_CHANNELS),
        warp_grid=MMA_WARP_GRID,
        flatten_pixels=True,
    )


def _output_tiles(spec: Spec, config: KernelConfig) -> list[tuple[int, int]]:
    """Each output dimension's extent and `config`'s tile along it (at most the
    extent; 1 where no tile size is given)."""
    extents = [e for _, e in contraction_of(spec).output_index]
    sizes = list(config.tile_sizes) + [1] * (len(extents) - len(config.tile_sizes))
    return [(e, min(t, e)) for e, t in zip(extents, sizes, strict=True)]


def grid_blocks(spec: Spec, config: KernelConfig) -> int:
    """The blocks of `config`'s tiles over `spec`'s outputs (one split's grid)."""
    return math.prod(-(-e // t) for e, t in _output_tiles(spec, config))


def computed_outputs(spec: Spec, config: KernelConfig) -> int:
    """The outputs `config`'s blocks compute, the tiles' idle rows and columns
    counted (a partial tile is computed whole)."""
    return math.prod(-(-e // t) * t for e, t in _output_tiles(spec, config))


def _grouped(spec: Spec) -> bool:
    return getattr(spec, "groups", 1) > 1


def tensor_cores_take(spec: Spec) -> bool:
    """Whether the tensor-core route takes `spec`'s layouts: a grouped convolution
    in NHWC with RSCK filters only (its group's channels then stay the tiles'
    innermost dimension; in the other layouts affine-data-copy-generate does not
    make them so yet)."""
    if not _grouped(spec):
        return True
    assert isinstance(spec, ConvSpec)
    return spec.layout == "nhwc" and spec.filter_layout == "rsck"


def _channels(spec: Spec) -> int:
    """The extent of the reduction's channel dimension (the MMA's k): a group's
    channels in a grouped convolution."""
    return spec.group_channels if isinstance(spec, ConvSpec) else spec.k  # pyright: ignore


def _tensor_core_config(
    spec: Spec,
    extents: list[int],
    channel: int,
    pixels: list[int],
    tf32: bool,
    budget: int,
) -> KernelConfig:
    """The tensor-core route: in f16 and bf16 a step over the filter's window
    (`_window_reduction`) takes `MMA_WINDOW_PIXELS` x `MMA_BLOCK_CHANNELS` outputs a
    block on `MMA_WINDOW_WARP_GRID` warps, its taps unrolled, where its tiles fit;
    other steps (`_mma_reduction`, which steps over the window too in tf32, and
    `_coalesced_reduction`) `MMA_BLOCK_PIXELS` on `MMA_WARP_GRID`. The output goes
    through shared memory (but tf32's), as `STAGED_OUTPUT` says."""
    config = KernelConfig(reassociate=True, mma=True, tf32=tf32)
    # tf32 loads its fragments register by register: unrolled taps spill
    if isinstance(spec, ConvSpec) and not (tf32 or _coalescible(spec)):
        tiles, block = _mma_tiles(extents, channel, pixels, MMA_WINDOW_PIXELS)
        if window := _window_reduction(spec, block, budget):
            return replace(
                config,
                tile_sizes=tiles,
                reduction_tile_sizes=window[0],
                stages=window[1],
                warp_grid=MMA_WINDOW_WARP_GRID,
                unroll_taps=True,
                stage_output=STAGED_OUTPUT,
            )
    tiles, block = _mma_tiles(extents, channel, pixels, MMA_BLOCK_PIXELS)
    if _coalescible(spec):
        assert isinstance(spec, ConvSpec)
        reduction_tiles, stages = _coalesced_reduction(spec, block, budget)
    else:
        reduction_tiles, stages = _mma_reduction(spec, block, budget)
    return replace(
        config,
        tile_sizes=tiles,
        reduction_tile_sizes=reduction_tiles,
        coalesce_reduction=_coalescible(spec),
        warp_grid=MMA_TF32_WARP_GRID if tf32 else MMA_WARP_GRID,
        stages=stages,
        stage_output=STAGED_OUTPUT and not tf32,
    )


def _mma_tiles(
    extents: list[int], channel: int, pixels: list[int], block_pixels: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A block tile of about `block_pixels` x `MMA_BLOCK_CHANNELS` (columns first,
    up to 32 of them), and the block as (output channels, columns, rows, images)."""
    tiles = [1] * len(extents)
    tiles[channel] = _tile(extents[channel], MMA_BLOCK_CHANNELS)
    room = block_pixels
    for k, d in enumerate(pixels):
        limit = min(room, 32) if k == 0 and len(pixels) > 1 else room
        tiles[d] = _tile(extents[d], limit)
        room = max(1, room // tiles[d])
    return tuple(tiles), (tiles[channel], *(tiles[d] for d in pixels))


def _window_reduction(
    spec: ConvSpec, block: tuple[int, ...], budget: int
) -> tuple[tuple[int, ...], int] | None:
    """A step over the filter's whole window, or one filter row of it,
    `MMA_WINDOW_STEP` channels at a time, where the channels need no padding and
    its tiles fit in shared memory; None otherwise."""
    element = storage_bytes(spec.dtype)
    if not (
        spec.r * spec.s > 1
        and spec.c % MMA_WINDOW_STEP == 0  # no channels padded to the MMA's k
        and block[0] * element % 16 == 0  # filter rows of whole 16-byte chunks
    ):
        return None
    step = MMA_WINDOW_STEP
    for rows in (spec.r, 1):
        stages = _stages_that_fit(step_bytes(spec, block, rows, spec.s, step), budget)
        if stages:
            return _conv_reduction_tiles(spec, rows, spec.s, step), stages
    return None


def _mma_reduction(
    spec: Spec, block: tuple[int, ...], budget: int
) -> tuple[tuple[int, ...], int]:
    """The reduction step of the tensor-core route and the tiles in flight (the MMA
    sums in its own order, so any step will do): the filter's window where it fits
    (`_window_reduction`), else one tap and `MMA_STEP_BYTES` of channels,
    `MMA_STAGES` in flight."""
    element = storage_bytes(spec.dtype)
    if isinstance(spec, MatmulSpec):
        return (_divisor_at_most(spec.k, MMA_STEP_BYTES // element),), MMA_STAGES
    assert isinstance(spec, ConvSpec)
    if window := _window_reduction(spec, block, budget):
        return window
    step = _divisor_at_most(spec.c, MMA_STEP_BYTES // element)
    stages = max(1, _stages_that_fit(step_bytes(spec, block, 1, 1, step), budget))
    if step * element < MMA_K_BYTES:
        stages = min(stages, MMA_PADDED_STAGES)
    return _conv_reduction_tiles(spec, 1, 1, step), stages


def _coalescible(spec: Spec) -> bool:
    """A convolution with fewer channels than one MMA's k whose filter rows'
    columns x channels make one (`affinec-coalesce-reduction`): contiguous in the
    shared tiles (unit dilation along the columns), the channel loop inside the
    column loop (RSCK filters), and each output pixel's row of them starting on 16
    bytes (`ldmatrix`)."""
    if not isinstance(spec, ConvSpec) or spec.s == 1 or spec.dilation[1] != 1:
        return False
    if spec.filter_layout != "rsck" or spec.groups > 1:
        return False
    element = storage_bytes(spec.dtype)
    return (
        spec.c * element < MMA_K_BYTES and spec.stride[1] * spec.c * element % 16 == 0
    )


def padded_channels(spec: Spec) -> int:
    """The channels a 16-bit convolution with too few to coalesce as they are is
    padded to (`affinec-pad-channels`) so that its rows of k start on 16 bytes, at
    most doubling its work (ResNet-50's first layer: 3 as 4); else its own."""
    if (
        not isinstance(spec, ConvSpec)
        or spec.dtype == "f32"
        or _grouped(spec)
        or _coalescible(spec)
    ):
        return getattr(spec, "c", 0)
    for multiple in (2, 4, 8):
        padded = -(-spec.c // multiple) * multiple
        if padded <= 2 * spec.c and _coalescible(replace(spec, c=padded)):
            return padded
    return spec.c


def _coalesced_reduction(
    spec: ConvSpec, block: tuple[int, ...], budget: int
) -> tuple[tuple[int, ...], int]:
    """The reduction step of a coalesced convolution: one filter row a step,
    `COALESCED_STAGES` in flight where they fit in shared memory."""
    stages = _stages_that_fit(step_bytes(spec, block, 1, spec.s, spec.c, True), budget)
    return _conv_reduction_tiles(spec, 1, spec.s, spec.c), max(
        1, min(stages, COALESCED_STAGES)
    )


def _conv_reduction_tiles(
    spec: ConvSpec, rows: int, columns: int, channels: int
) -> tuple[int, ...]:
    """Reduction tile sizes in the filter's loop order (r, s, c or c, r, s)."""
    if spec.filter_layout == "rsck":
        return (rows, columns, channels)
    return (channels, rows, columns)


def step_bytes(
    spec: ConvSpec,
    block: tuple[int, ...],
    rows: int,
    columns: int,
    step: int,
    coalesced: bool = False,
) -> int:
    """Shared bytes of one step over `rows` x `columns` filter taps for a block tile
    of (output channels, columns, rows, images): the input tile with its halo, and
    the filter's taps, each row padded (exact for rows of whole 16-byte chunks).
    `coalesced`: the columns' channels are one k (affinec-coalesce-reduction)."""
    channels, out_columns, out_rows, images = block
    element = storage_bytes(spec.dtype)

    input_rows = images * window_extent(
        out_rows, rows, spec.stride[0], spec.dilation[0]
    )
    input_columns = window_extent(
        out_columns, columns, spec.stride[1], spec.dilation[1]
    )
    filter_padding = SHARED_ROW_PADDING * (2 if element == 4 else 1)
    if coalesced:
        k = MMA_K_BYTES // element
        padded = -(-columns * step // k) * k
        row = (input_columns * step + padded - columns * step) * element
        inputs = input_rows * (row + SHARED_ROW_PADDING)
        return inputs + rows * padded * (channels * element + filter_padding)
    pixels = input_rows * input_columns
    # Channels are padded to the MMA's k (16 f16/bf16, 8 tf32: 32 bytes either way).
    step = max(step, MMA_K_BYTES // element)
    inputs = pixels * (step * element + SHARED_ROW_PADDING)
    filters = rows * columns * step * (channels * element + filter_padding)
    return inputs + filters


def window_extent(tile: int, taps: int, stride: int, dilation: int) -> int:
    """Input rows (or columns) a block of `tile` outputs reads through `taps` filter
    taps: the lattice the accesses read, as affine-data-copy-generate's footprint
    keeps it (every `stride`-th row when a step has one tap)."""
    step = math.gcd(stride, dilation) if taps > 1 else stride
    return ((tile - 1) * stride + (taps - 1) * dilation) // step + 1


def shared_budget(target: Chip) -> int:
    """The tensor-core route's shared-memory budget on `target`: `MMA_SHARED_BYTES`
    (measured on the H100, where two such blocks share a multiprocessor), at most
    half of what a multiprocessor of `target` has, so that two blocks still fit
    (unmeasured on chips with less shared memory than the H100)."""
    return min(MMA_SHARED_BYTES, target.shared_per_block_of(2))


def _stages_that_fit(step_bytes: int, budget: int) -> int:
    """The most tiles in flight (up to `MMA_STAGES`) whose steps fit in the route's
    shared-memory `budget`; 0 when not even one does."""
    return min(MMA_STAGES, budget // step_bytes)


def _reduction_tiles(spec: Spec, step_limit: int = REDUCTION_STEP) -> tuple[int, ...]:
    """A step of the reduction that keeps its order: the dimensions cut into several
    tiles come first, in tiles of 1 but the last of them, the others whole."""
    if isinstance(spec, MatmulSpec):
        return (_divisor_at_most(spec.k, step_limit),)
    assert isinstance(spec, ConvSpec)
    step = _divisor_at_most(spec.c, step_limit)
    if spec.filter_layout == "rsck":  # reduction order r, s, c
        if spec.c <= step_limit and step_limit == REDUCTION_STEP:
            return (1, spec.s, spec.c)  # one filter row of taps per step
        return (1, 1, step)
    return (step, spec.r, spec.s)  # order c, r, s


def _tile(n: int, limit: int) -> int:
    """A tile of at most `limit` along an extent `n`: a divisor when one is not much
    smaller (no partial tiles), else `limit` itself."""
    best = min(n, limit)
    d = _divisor_at_most(n, best)
    return d if 2 * d > best else best


def _divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of `n` not above `limit` (at least 1)."""
    for d in range(min(n, max(limit, 1)), 0, -1):
        if n % d == 0:
            return d
    return 1


WGMMA_TILES = ((128, 128), (128, 64), (64, 64))
"""The tiles `wgmma_config_for` tries, largest first."""


def wgmma_config_for(spec: Spec, arch: str = "sm_90a") -> KernelConfig:
    """Hopper's kernel for a product or a convolution of f16 or bf16 on `arch` (a 1x1
    convolution through its flattened pixels, other NHWC ones tap by tap):
    of the tiles of `WGMMA_TILES` that compute at most a quarter more columns than
    there are (or the fewest), the largest that still gives every multiprocessor a
    block,
    4 stages (3 for the widest tile over at most 2 steps of K), MMAs in flight. A
    first rule, not yet measured; a ValueError naming what stops the spec or the
    chip."""
    from affinec.transforms.gpu.wgmma_plan import plan_of, route_refusal

    target = chip(arch)
    if not target.has("wgmma"):
        raise ValueError(f"wgmma needs a chip that has it (sm_90a), not {arch}")
    flatten = isinstance(spec, ConvSpec) and flattens(spec)
    routed = flattened_spec(spec) if flatten else spec
    why = route_refusal(routed)
    if why is not None:
        raise ValueError(f"the wgmma route needs {why} ({spec.to_text()})")
    columns = plan_of(routed, WGMMA_TILES[0]).n

    def wasted(tile: tuple[int, int]) -> float:  # columns computed over those kept
        return math.ceil(columns / tile[1]) * tile[1] / columns

    least = min(wasted(t) for t in WGMMA_TILES)
    tiles = [t for t in WGMMA_TILES if wasted(t) <= max(1.25, least)]
    for tile in tiles:
        plan = plan_of(routed, tile)
        if plan.grid[0] * plan.grid[1] >= MULTIPROCESSORS:
            break
    return KernelConfig(
        wgmma=True,
        wgmma_tile=tile,
        stages=3 if tile == (128, 128) and plan.steps <= 2 else 4,
        wgmma_schedule="in-flight",
        flatten_pixels=flatten,
    )


MULTIPROCESSORS = 132
"""The H100 SXM's: the blocks a grid needs to fill the chip once."""


__all__ = [
    "DEFAULT_PLANNING_ARCH",
    "UNPROMOTED",
    "KernelConfig",
    "config_for",
    "flattened_spec",
    "flattens",
    "split_spec",
    "wgmma_config_for",
    "with_knobs",
]
