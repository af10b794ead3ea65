"""Hopper's kernel for a spec (`wgmma_config_for`): the wgmma route's tile, stages
and schedule, and the blocks a grid needs to fill the H100 (`MULTIPROCESSORS`),
which the grid-filling rule of `affinec.driver.config` shares.
"""

from __future__ import annotations

import math

from affinec.base.spec import ConvSpec, Spec, flattened_spec, flattens
from affinec.driver.kernel_config import KernelConfig
from affinec.hardware.chips import chip
from affinec.transforms.gpu.wgmma_plan import GemmKernel, plan_of, route_refusal

MULTIPROCESSORS = 132
"""The H100 SXM's: the blocks a grid needs to fill the chip once."""

WGMMA_TILES = ((128, 128), (128, 64), (64, 64))
"""The tiles `wgmma_config_for` tries, largest first."""


def wgmma_config_for(spec: Spec, arch: str = "sm_90a") -> KernelConfig:
    """Hopper's kernel for a product or a convolution of f16 or bf16 on `arch` (a 1x1
    convolution through its flattened pixels, other NHWC ones tap by tap):
    of the tiles of `WGMMA_TILES` that compute at most a quarter more columns than
    there are (or the fewest) and give every multiprocessor a block, the largest
    that computes at most `COMPUTED_SLACK` times the fewest outputs (a convolution's
    block is a box of one image's pixels: a 7 x 7 image in a box of 128 computes
    2.6 times its pixels, in one of 64 1.3 times), or the smallest where none fills
    the chip,
    4 stages (3 for the widest tile over at most 2 steps of K), MMAs in flight
    (timed on the H100 on 3x3s at batch 32, 2026-12-07: docs/BENCHMARKS.md); a
    ValueError naming what stops the spec or the chip."""
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
    plans = {t: plan_of(routed, t) for t in tiles}
    filling = [
        t for t in tiles if plans[t].grid[0] * plans[t].grid[1] >= MULTIPROCESSORS
    ]
    if filling:
        fewest = min(plan_outputs(plans[t]) for t in filling)
        tile = next(
            t for t in filling if plan_outputs(plans[t]) <= COMPUTED_SLACK * fewest
        )
    else:
        tile = tiles[-1]
    plan = plans[tile]
    return KernelConfig(
        wgmma=True,
        wgmma_tile=tile,
        stages=3 if tile == (128, 128) and plan.steps <= 2 else 4,
        wgmma_schedule="in-flight",
        flatten_pixels=flatten,
    )


COMPUTED_SLACK = 1.5
"""How many times the outputs of the tile that computes the fewest a larger tile
may compute and still be `wgmma_config_for`'s choice. From ResNet-50's 3x3s at
batch 32 (H100, 2026-12-07, `benchmarks/layer_sweep.py`): where a 128-row and a
64-row tile computed as much (14 x 14 and 28 x 28 images) the larger ran 1-35 %
faster; at 7 x 7, where the 128-row box computes twice what the 64-row one does,
the 64 x 64 tile ran 2.1x faster than the 128 x 64 one (24.7 against 51.5 us)."""


def plan_outputs(plan: GemmKernel) -> int:
    """The outputs the blocks of `plan` compute, those past the edges counted."""
    columns, rows, _ = plan.grid
    return columns * rows * plan.tile_m * plan.tile_n


def wgmma_grid_blocks(spec: Spec, config: KernelConfig) -> int:
    """The blocks of Hopper's kernel `config` (`wgmma_config_for`'s) over `spec`."""
    routed = flattened_spec(spec) if config.flatten_pixels else spec
    grid = plan_of(routed, config.wgmma_tile).grid
    return grid[0] * grid[1]
