"""Hopper's kernel for a spec (`wgmma_config_for`): the wgmma route's tile, stages
and schedule, and the blocks a grid needs to fill the H100 (`MULTIPROCESSORS`),
which the grid-filling rule of `affinec.driver.config` shares.
"""

from __future__ import annotations

import math

from affinec.base.spec import ConvSpec, Spec, flattened_spec, flattens
from affinec.driver.kernel_config import KernelConfig
from affinec.hardware.chips import chip
from affinec.transforms.gpu.wgmma_plan import plan_of, route_refusal

MULTIPROCESSORS = 132
"""The H100 SXM's: the blocks a grid needs to fill the chip once."""

WGMMA_TILES = ((128, 128), (128, 64), (64, 64))
"""The tiles `wgmma_config_for` tries, largest first."""


def wgmma_config_for(spec: Spec, arch: str = "sm_90a") -> KernelConfig:
    """Hopper's kernel for a product or a convolution of f16 or bf16 on `arch` (a 1x1
    convolution through its flattened pixels, other NHWC ones tap by tap):
    of the tiles of `WGMMA_TILES` that compute at most a quarter more columns than
    there are (or the fewest), the largest that still gives every multiprocessor a
    block,
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


def wgmma_grid_blocks(spec: Spec, config: KernelConfig) -> int:
    """The blocks of Hopper's kernel `config` (`wgmma_config_for`'s) over `spec`."""
    routed = flattened_spec(spec) if config.flatten_pixels else spec
    grid = plan_of(routed, config.wgmma_tile).grid
    return grid[0] * grid[1]
