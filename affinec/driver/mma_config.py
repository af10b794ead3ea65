"""The tensor-core route's configuration (`tensor_core_config`): its block tiles,
reduction steps and stages in flight, set by constants measured on the H100, the
shared-memory bytes of a step (`step_bytes`, `window_extent`) and the route's
budget on a chip (`shared_budget`); which specs the route takes (`tensor_cores_take`,
`coalescible`, `padded_channels`); and the tile sizes the SIMT rule of
`affinec.driver.config` shares (`tile_at_most`, `divisor_at_most`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from affinec.base.element_types import storage_bytes
from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.driver.kernel_config import KernelConfig
from affinec.hardware.chips import MMA_SHAPES, Chip

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


def reduction_channels(spec: Spec) -> int:
    """The extent of the reduction's channel dimension (the MMA's k): a group's
    channels in a grouped convolution."""
    return spec.group_channels if isinstance(spec, ConvSpec) else spec.k  # pyright: ignore


def tensor_core_config(
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
    if isinstance(spec, ConvSpec) and not (tf32 or coalescible(spec)):
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
                # a strided tile stored by phase where the bank model says it
                # costs fewer wavefronts (the planner decides)
                split_phases=any(step > 1 for step in spec.stride),
            )
    tiles, block = _mma_tiles(extents, channel, pixels, MMA_BLOCK_PIXELS)
    if coalescible(spec):
        assert isinstance(spec, ConvSpec)
        reduction_tiles, stages = _coalesced_reduction(spec, block, budget)
    else:
        reduction_tiles, stages = _mma_reduction(spec, block, budget)
    return replace(
        config,
        tile_sizes=tiles,
        reduction_tile_sizes=reduction_tiles,
        coalesce_reduction=coalescible(spec),
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
    tiles[channel] = tile_at_most(extents[channel], MMA_BLOCK_CHANNELS)
    tile_pixels(tiles, extents, pixels, block_pixels, 32)
    return tuple(tiles), (tiles[channel], *(tiles[d] for d in pixels))


def tile_pixels(
    tiles: list[int], extents: list[int], pixels: list[int], room: int, columns: int
) -> None:
    """Fill `tiles` along the pixel dimensions `pixels` (innermost first) with a block
    of about `room` pixels: at most `columns` along the innermost where there are
    several, the rest of the room to the next."""
    for k, d in enumerate(pixels):
        limit = min(room, columns) if k == 0 and len(pixels) > 1 else room
        tiles[d] = tile_at_most(extents[d], limit)
        room = max(1, room // tiles[d])


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
        return (divisor_at_most(spec.k, MMA_STEP_BYTES // element),), MMA_STAGES
    assert isinstance(spec, ConvSpec)
    if window := _window_reduction(spec, block, budget):
        return window
    step = divisor_at_most(spec.c, MMA_STEP_BYTES // element)
    stages = max(1, _stages_that_fit(step_bytes(spec, block, 1, 1, step), budget))
    if step * element < MMA_K_BYTES:
        stages = min(stages, MMA_PADDED_STAGES)
    return _conv_reduction_tiles(spec, 1, 1, step), stages


def coalescible(spec: Spec) -> bool:
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
        or coalescible(spec)
    ):
        return getattr(spec, "c", 0)
    for multiple in (2, 4, 8):
        padded = -(-spec.c // multiple) * multiple
        if padded <= 2 * spec.c and coalescible(replace(spec, c=padded)):
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


# -- tile sizes (the SIMT rule of affinec.driver.config takes them too) ----------------------


def tile_at_most(n: int, limit: int) -> int:
    """A tile of at most `limit` along an extent `n`: a divisor when one is not much
    smaller (no partial tiles), else `limit` itself."""
    best = min(n, limit)
    d = divisor_at_most(n, best)
    return d if 2 * d > best else best


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of `n` not above `limit` (at least 1)."""
    for d in range(min(n, max(limit, 1)), 0, -1):
        if n % d == 0:
            return d
    return 1
