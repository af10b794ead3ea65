"""Which block `affinec-wgmma`'s descriptor route gives a convolution with taps or
strides (`ss_config_for`): `config_for`'s rule for those of `MIN_CHANNELS` or more
channels on sm_90a, fitted on the H100's timings of that route.

The candidates are the blocks `ss_configs` times, of 128 output channels
(`RULE_TILES`): `SS_TILES`' pixels at most (the box `pixel_tile` or `pixel_box`
picks) by their output channels. Each is costed as the waves of blocks the chip
runs one after the other times a block's work, rows and columns each with a fixed
part that does not shrink with the tile (the pipeline's fill and drain, the
epilogue):

    cost = ceil(blocks / 132) * (rows + BLOCK_ROWS) * (columns + BLOCK_COLUMNS)

with `rows` the box's pixels rounded up to warpgroups of 64; the cheapest wins, on
ties the box whose window reads the fewest input pixels per output, then the
larger; a choice of fewer than `MIN_BLOCKS` blocks is refused. Fitted on the
stride-1 3x3s of 128 channels or more of ResNet-50 and VGG-16 at batch 32 (H100,
2026-12-07, `scripts/gpu_wgmma_taps_ss.py`): it picks the fastest measured block of
all nine (`BLOCK_ROWS` 32 to 48 do; 0 and 64 miss two each). On ResNet-50's strided
layers, which the fit never saw, it picks the fastest measured block of each of the
five it takes and refuses the sixth (the 3x3/2 512 at 14 x 14: 64 blocks), on which
Hopper's template kernel was faster. Whole networks with and without it: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import math

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.grid_geometry import grid_blocks
from affinec.driver.kernel_config import KernelConfig
from affinec.driver.wgmma_config import MULTIPROCESSORS
from affinec.driver.wgmma_taps_config import pixel_tile
from affinec.driver.wgmma_taps_ss_config import SS_TILES, wgmma_taps_ss_config
from affinec.transforms.gpu.wgmma_plan import pixel_box

BLOCK_ROWS = 48
"""A block's work that does not shrink with its pixels, in rows of the tile."""

BLOCK_COLUMNS = 16
"""A block's work that does not shrink with its output channels, in columns."""

MIN_CHANNELS = 128
"""The fewest channels in and out the rule takes: at 64 the route was timed on two
layers only (0.89x and 1.03x `config_for`'s mma.sync kernel)."""

RULE_TILES = tuple(tile for tile in SS_TILES if tile[1] == 128)
"""The blocks the rule chooses from: `SS_TILES` of 128 output channels. Of 64, a
warpgroup's MMA reads as many bytes of shared memory a step for half the products,
and the route lost with them where the rule took them (H100, 2026-12-07,
`benchmarks/layer_sweep.py`): ResNet-50's 3x3 512 at 7 x 7, batch 32, 27.5 against
the template's 29.2 us; VGG-16's 3x3 256 at 56 x 56, batch 1, 21.1 against 13.8."""

MIN_BLOCKS = 112
"""The fewest blocks the rule's choice may have: ResNet-50's 1x1/2 1024 -> 2048 at
14 x 14, batch 32, ran 18.2 us on 112 blocks of 5 images' 7 x 7 pixels by 128
channels (0.85 of a wave) against 32.9 on the template's kernel, and its 3x3s of 128
channels at 28 x 28 fastest on 128 blocks (H100, 2026-12-07,
`scripts/gpu_wgmma_taps_ss.py`); no grid of fewer was timed."""


def ss_cost(spec: ConvSpec, config: KernelConfig) -> tuple[int, float, int]:
    """(waves x a block's rows x its columns, the input pixels its window reads per
    output pixel, the box's pixels negated): the rule's order of the candidates,
    the cheapest first; on ties the smaller halo, then the larger box."""
    images, height, width, columns = config.tile_sizes
    pixels = images * height * width
    rows = math.ceil(pixels / 64) * 64
    waves = math.ceil(grid_blocks(spec, config) / MULTIPROCESSORS)
    window = ((height - 1) * spec.stride[0] + spec.dilated_r) * (
        (width - 1) * spec.stride[1] + spec.dilated_s
    )
    cost = waves * (rows + BLOCK_ROWS) * (columns + BLOCK_COLUMNS)
    return cost, round(window / (height * width), 3), -pixels


def ss_config_for(spec: Spec, arch: str = "sm_90a") -> KernelConfig:
    """The descriptor route's configuration of the convolution with taps or strides
    `spec` (of `MIN_CHANNELS` or more channels in and out) whose cost `ss_cost` is
    least, of the blocks of `RULE_TILES`, where its grid has `MIN_BLOCKS` or more; a
    ValueError naming what stops it otherwise."""
    if (
        not isinstance(spec, ConvSpec)
        or spec.r * spec.s == 1
        and tuple(spec.stride) == (1, 1)
    ):
        raise ValueError(
            "the descriptor route's rule is for convolutions with taps or strides"
        )
    if min(spec.c, spec.k) < MIN_CHANNELS:
        raise ValueError(
            f"{spec.c} channels in, {spec.k} out: the rule takes {MIN_CHANNELS} or more"
        )
    candidates: list[KernelConfig] = []
    reasons: list[str] = []
    for rows, columns in RULE_TILES:
        boxes = {pixel_tile(spec, rows), (1, *pixel_box(spec.out_h, spec.out_w, rows))}
        for box in sorted(boxes):
            try:
                config = wgmma_taps_ss_config(spec, rows, columns, box=box, arch=arch)
            except ValueError as e:
                reasons.append(str(e))
                continue
            if config not in candidates:
                candidates.append(config)
    if not candidates:
        raise ValueError(reasons[0] if reasons else "no block takes the spec")
    best = min(candidates, key=lambda c: ss_cost(spec, c))
    blocks = grid_blocks(spec, best)
    if blocks < MIN_BLOCKS:
        raise ValueError(f"{blocks} blocks: fewer than {MIN_BLOCKS}")
    return best


__all__ = [
    "BLOCK_COLUMNS",
    "BLOCK_ROWS",
    "MIN_BLOCKS",
    "ss_config_for",
    "ss_cost",
]
