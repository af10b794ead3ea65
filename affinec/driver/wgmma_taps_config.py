"""A configuration of `affinec-wgmma` with A from registers for a convolution with
taps (`wgmma_taps_config`): the pass route's Hopper kernel of a 3x3 (or any RSCK)
convolution, beside `config_for`'s mma.sync kernel and the template route's. Not
`config_for`'s rule: a candidate to measure (`scripts/gpu_wgmma_taps.py`).
"""

from __future__ import annotations

from dataclasses import replace

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.kernel_config import KernelConfig
from affinec.driver.mma_config import MMA_STAGES, step_bytes
from affinec.driver.tile_config import own_tiles_config
from affinec.hardware.chips import chip

TAPS_TILES = ((128, 128, 16), (256, 64, 32), (256, 128, 16))
"""(rows, columns, channels a step) of the configurations `taps_configs` gives: up
to two warpgroups of 64 rows x 128 columns, four of 64 or 128 columns (a step of
16 channels keeps each tap's filter tile, and so the stages, small)."""

MAX_ROWS = 512
"""The most rows of a block (8 warpgroups of 64)."""


def pixel_tile(spec: ConvSpec, rows: int) -> tuple[int, int, int]:
    """(images, output rows, output columns) of a block of at most `rows` pixels
    (and more than half as many) that leaves the fewest warpgroup rows idle over
    the whole output (a block's pixels rounded up to warpgroups of 64, tiles cut
    short at the edges), the fewest input pixels per output on ties (the halo)."""
    n, height, width = spec.n, spec.out_h, spec.out_w
    widths = {width} | {w for w in (8, 16, 28, 32, 56, 64, 112, 128) if w < width}
    best: tuple[float, float, tuple[int, int, int]] | None = None
    for w in sorted(widths):
        for h in range(1, height + 1):
            for images in range(1, n + 1) if (h, w) == (height, width) else (1,):
                pixels = images * h * w
                if pixels > rows or 2 * pixels <= rows:
                    continue
                blocks = -(-n // images) * -(-height // h) * -(-width // w)
                idle = blocks * -(-pixels // 64) * 64 / (n * height * width)
                window = ((h - 1) * spec.stride[0] + spec.dilated_r) * (
                    (w - 1) * spec.stride[1] + spec.dilated_s
                )
                key = (round(idle, 2), window / (h * w), (images, h, w))
                if best is None or key[:2] < best[:2]:
                    best = key
    if best is None:
        return 1, 1, min(width, rows)
    return best[2]


def wgmma_taps_config(
    spec: Spec,
    rows: int = 128,
    columns: int = 128,
    channels: int = 32,
    *,
    arch: str = "sm_90a",
) -> KernelConfig:
    """`affinec-wgmma`'s kernel with A from registers for the NHWC/RSCK convolution
    `spec`: `config_for`'s mma.sync configuration on one block (its channel padding,
    coalesced taps, phases of a strided input), with a block of at most `rows`
    pixels (`pixel_tile`) and `columns` output channels, a step of all the taps
    over `channels` channels (the taps as `config_for` splits them where it
    coalesces them), as many stages (up to 3) as the chip's shared memory of one
    block holds. A ValueError names what stops the spec or the chip."""
    target = chip(arch)
    if not target.has("wgmma"):
        raise ValueError(f"wgmma needs a chip that has it (sm_90a), not {arch}")
    if not isinstance(spec, ConvSpec) or spec.r * spec.s == 1:
        raise ValueError(
            f"A from registers is for convolutions with taps, not {spec.to_text()}"
        )
    if spec.layout != "nhwc" or spec.filter_layout != "rsck" or spec.groups != 1:
        raise ValueError(
            "A from registers takes NHWC input and RSCK filters, one group "
            f"({spec.to_text()})"
        )
    if not 64 <= rows <= MAX_ROWS or columns % 8 or not 8 <= columns <= 256:
        raise ValueError(
            f"a block of {rows} rows (64 to {MAX_ROWS}) and {columns} columns (a "
            "multiple of 8 up to 256)"
        )
    if channels % 16 or channels <= 0:
        raise ValueError(f"a step of {channels} channels: a multiple of 16")
    base = own_tiles_config(spec, tf32=False, arch=arch)
    if not base.mma:
        raise ValueError(f"config_for puts {spec.to_text()} on the SIMT route")
    images, height, width = pixel_tile(spec, rows)
    n = min(columns, -(-spec.k // 8) * 8)
    if base.coalesce_reduction:
        reduction = base.reduction_tile_sizes
        taps, step = reduction[0], base.reduction_tile_sizes[-1]
    else:
        c = max(spec.c, base.pad_channels)
        step = min(channels, -(-c // 16) * 16)
        reduction = (spec.r, spec.s, step)
        taps = spec.r
    block = (n, width, height, images)
    stage = step_bytes(spec, block, taps, spec.s, step, base.coalesce_reduction)
    budget = target.max_shared_per_block - 2 * images * height * width * n
    stages = min(MMA_STAGES, budget // stage)
    if stages < 1:
        raise ValueError(
            f"a step takes {stage} bytes of shared memory, more than the "
            f"{budget} a block has left: fewer rows, columns or channels"
        )
    return replace(
        base,
        tile_sizes=(images, height, width, n),
        reduction_tile_sizes=reduction,
        reassociate=True,
        tensor_core="wgmma",
        tma=False,
        stages=stages,
        stage_output=True,
    )


def taps_configs(spec: Spec, arch: str = "sm_90a") -> list[KernelConfig]:
    """`wgmma_taps_config` for each of `TAPS_TILES` that takes `spec` (distinct)."""
    out: list[KernelConfig] = []
    for rows, columns, channels in TAPS_TILES:
        try:
            config = wgmma_taps_config(spec, rows, columns, channels, arch=arch)
        except ValueError:
            continue
        if config not in out:
            out.append(config)
    return out


__all__ = ["TAPS_TILES", "pixel_tile", "taps_configs", "wgmma_taps_config"]
