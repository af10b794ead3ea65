"""A configuration of `affinec-wgmma` reading both tiles by descriptor for a
convolution with taps (`wgmma_taps_ss_config`): the pass route's Hopper kernel of a
3x3 in the template's schedule, one tap and 64 channels a step; strided ones too
(a 3x3/2, a 1x1/2: one tap), each tap's tile the input's pixels at the stride.

The reduction is tiled `(1, 1, 64)`, so the taps are loops around the compute band
and the promotion copies, for each (tap, channel step), the input over the block's
pixel box at the tap's shifted origin (images x rows x columns x 64, zero-filled
past the image's edges: the padding) and the tap's 64 x N filter tile.
`affinec-wgmma` reads that input tile as one 2-D tile of the block's pixels x 64
channels, K-major (`wgmma_lowering_boxes`). At a stride of s the promotion's box
keeps every s-th input row and column (the footprint's lattice), and TMA loads it
as a box with element strides s (`traversal = [1, s, s, 1]`, the driver's box
spanning s times the pixels). Not `config_for`'s rule: a candidate to measure
(`scripts/gpu_wgmma_taps_ss.py`).
"""

from __future__ import annotations

from dataclasses import replace

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.kernel_config import KernelConfig
from affinec.driver.tile_config import own_tiles_config
from affinec.driver.wgmma_taps_config import MAX_ROWS, pixel_tile
from affinec.hardware.chips import chip
from affinec.transforms.gpu.wgmma_plan import pixel_box
from affinec.transforms.gpu.wgmma_tma_copies import MAX_BOX, MAX_ELEMENT_STRIDE

CHANNEL_STEP = 64
"""Channels a step: 128-byte rows of f16, one TMA box's swizzle span."""

MAX_STAGES = 4

SS_TILES = ((128, 128), (128, 64), (256, 128))
"""(pixels at most, output channels) of the blocks `ss_configs` gives."""


def wgmma_taps_ss_config(
    spec: Spec,
    rows: int = 128,
    columns: int = 128,
    *,
    box: tuple[int, int, int] | None = None,
    tma: bool = True,
    arch: str = "sm_90a",
) -> KernelConfig:
    """`affinec-wgmma`'s kernel of the NHWC/RSCK convolution with taps `spec`, both
    tiles read by descriptor: a block of at most `rows` pixels (`box`: images x
    output rows x output columns, else `pixel_tile`'s; the last warpgroup's rows
    past them idle) and `columns` output channels, a step of one tap and 64
    channels, as many stages (up to 4) as the chip's shared memory of one block
    holds beside the output's staging tile; with `tma`, the tiles loaded by TMA
    (`affinec-tma-copies`), each step's MMAs in flight where there are 3 stages or
    more. A ValueError names what stops the spec or the chip."""
    target = chip(arch)
    if not target.has("wgmma"):
        raise ValueError(f"wgmma needs a chip that has it (sm_90a), not {arch}")
    strided = isinstance(spec, ConvSpec) and tuple(spec.stride) != (1, 1)
    if not isinstance(spec, ConvSpec) or (spec.r * spec.s == 1 and not strided):
        raise ValueError(
            f"tiles of one tap a step are for convolutions with taps or strides, not "
            f"{spec.to_text()}"
        )
    if spec.layout != "nhwc" or spec.filter_layout != "rsck" or spec.groups != 1:
        raise ValueError(
            f"A's tile is a box of NHWC pixels and B a tap's C x K tile of an RSCK "
            f"filter, one group ({spec.to_text()})"
        )
    if spec.dtype not in ("f16", "bf16"):
        raise ValueError(f"wgmma reads f16 or bf16 tiles, not {spec.dtype}")
    if any(not 1 <= k <= MAX_ELEMENT_STRIDE for k in spec.stride):
        raise ValueError(
            f"a stride of {spec.stride}: the tile of a tap is a box of the input "
            f"with element strides of at most {MAX_ELEMENT_STRIDE} (TMA's)"
        )
    if spec.c % CHANNEL_STEP:
        raise ValueError(
            f"{spec.c} channels: a step reads {CHANNEL_STEP} (a multiple of "
            f"{CHANNEL_STEP} channels)"
        )
    if not 64 <= rows <= MAX_ROWS or columns % 8 or not 8 <= columns <= 256:
        raise ValueError(
            f"a block of {rows} pixels (64 to {MAX_ROWS}) and {columns} output "
            "channels (a multiple of 8 up to 256)"
        )
    images, height, width = box or pixel_tile(spec, rows)
    sh, sw = spec.stride
    if images * height * width > rows or max(images, height * sh, width * sw) > MAX_BOX:
        raise ValueError(
            f"a box of {images}x{height}x{width} pixels at strides {sh}x{sw}: at most "
            f"{rows}, spanning at most {MAX_BOX} input pixels along each dimension "
            "(TMA's boxes)"
        )
    if (images > 1 and (height, width) != (spec.out_h, spec.out_w)) or (
        height > spec.out_h or width > spec.out_w
    ):
        raise ValueError(
            f"a box of {images}x{height}x{width} pixels of {spec.out_h}x{spec.out_w} "
            "outputs: within one image, or whole images"
        )
    if height == 1 < spec.out_h and images == 1:
        # a tile of 1 along the rows leaves the band without its row dimension:
        # affinec-wgmma then sees no box of pixels, and refuses M < 64 rows
        raise ValueError(
            f"a box of one output row ({images}x{height}x{width}) of "
            f"{spec.out_h}x{spec.out_w} outputs: two rows or more"
        )
    base = own_tiles_config(spec, tf32=False, arch=arch)
    if not base.mma:
        raise ValueError(f"config_for puts {spec.to_text()} on the SIMT route")
    n = min(columns, -(-spec.k // 8) * 8)
    padded = -(-images * height * width // 64) * 64
    element = 2
    stage = (padded + n) * CHANNEL_STEP * element
    budget = target.max_shared_per_block - element * padded * n
    stages = min(MAX_STAGES, budget // stage)
    if stages < 1:
        raise ValueError(
            f"a step takes {stage} bytes of shared memory, more than the {budget} a "
            "block has left: fewer pixels or output channels"
        )
    return replace(
        base,
        tile_sizes=(images, height, width, n),
        reduction_tile_sizes=(1, 1, CHANNEL_STEP),
        pad_channels=0,
        coalesce_reduction=False,
        reassociate=True,
        tensor_core="wgmma",
        tma=tma,
        in_flight=tma and stages >= 3,
        stages=stages,
        stage_output=True,
    )


def ss_configs(spec: Spec, arch: str = "sm_90a") -> list[KernelConfig]:
    """`wgmma_taps_ss_config` for each of `SS_TILES` that takes `spec`, its box
    `pixel_tile`'s and (where it fits the image) `pixel_box`'s, by TMA; the first
    also by the promotion's cp.async copies (distinct)."""
    out: list[KernelConfig] = []
    for rows, columns in SS_TILES:
        boxes: list[tuple[int, int, int] | None] = [None]
        if isinstance(spec, ConvSpec):
            boxes.append((1, *pixel_box(spec.out_h, spec.out_w, rows)))
        for box in boxes:
            try:
                config = wgmma_taps_ss_config(spec, rows, columns, box=box, arch=arch)
            except ValueError:
                continue
            if config not in out:
                out.append(config)
    if out:
        cp_async = replace(out[0], tma=False, in_flight=False)
        out.append(cp_async)
    return out


__all__ = ["CHANNEL_STEP", "SS_TILES", "ss_configs", "wgmma_taps_ss_config"]
