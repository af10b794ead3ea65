"""Hopper's part of the tuner's space: the `affinec-wgmma-gemm` kernels of a spec
(tiles x schedules x stages within the chip's shared memory, split-K where the
blocks are few), the tensor-core route's configurations on `affinec-wgmma`
(`tensor_core="wgmma"`), a convolution's window kernels (`window_configs`: the
descriptor route's blocks and the template's), and the few of each the search keeps
for the measurement.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import replace

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.config import KernelConfig, flattened_spec, wgmma_config_for
from affinec.driver.wgmma_taps_ss_config import ss_configs
from affinec.driver.wgmma_taps_ss_rule import ss_cost
from affinec.tuning.cost import H100, Prediction

WGMMA_CANDIDATES = 12
WGMMA_TILES = ((128, 256), (128, 128), (128, 64), (64, 256), (64, 128), (64, 64))
WGMMA_SCHEDULES = ("in-flight", "specialized", "cooperative")


def best_per_tile_and_schedule(
    scored: list[tuple[KernelConfig, Prediction]],
) -> list[tuple[KernelConfig, Prediction]]:
    """Hopper's kernels beside the others: the model's best stage count for each
    tile and schedule (its roofline is not calibrated on a measurement yet, so it
    keeps every shape of block for the measurement to decide)."""
    best: dict[tuple, tuple[KernelConfig, Prediction]] = {}
    for config, estimate in scored:
        key = (config.wgmma_tile, config.wgmma_schedule, config.splits)
        # the roofline does not see the pipeline: of equal estimates, more stages
        rank = (estimate.ms, -config.stages)
        if key not in best or rank < (best[key][1].ms, -best[key][0].stages):
            best[key] = (config, estimate)
    return sorted(best.values(), key=lambda ce: ce[1].ms)[:WGMMA_CANDIDATES]


def wgmma_configs(
    spec: Spec, capacity: int, split_counts: Sequence[int]
) -> Iterator[KernelConfig]:
    """Hopper's kernels for a product or a convolution the route takes (a 1x1 one
    through its flattened pixels): tiles x schedules x 2 to 4 stages, each within
    `capacity`, and split-K where the blocks are few."""
    from affinec.transforms.gpu.wgmma_plan import plan_of

    try:
        base = wgmma_config_for(spec)
    except ValueError:
        return
    routed = flattened_spec(spec) if base.flatten_pixels else spec
    for tile, schedule, stages in itertools.product(
        WGMMA_TILES, WGMMA_SCHEDULES, (2, 3, 4)
    ):
        plan = plan_of(routed, tile, stages, schedule)
        if plan.problems(capacity):
            continue
        yield replace(base, wgmma_tile=tile, wgmma_schedule=schedule, stages=stages)
        # few blocks: split-K, up to about two waves of the chip
        blocks = plan.grid[0] * plan.grid[1]
        for splits in split_counts:
            if blocks * splits > 2 * H100.multiprocessors:
                break
            split = plan_of(routed, tile, stages, schedule, splits=splits)
            if not split.problems(capacity):
                yield replace(
                    base, wgmma_tile=tile, wgmma_schedule=schedule, stages=stages,
                    splits=splits,
                )  # fmt: skip


WGMMA_PASS_CANDIDATES = 4
"""The tensor-core route's configurations on `affinec-wgmma` the search keeps (by the
model, which prices them as mma.sync's: not yet calibrated on a measurement)."""


def wgmma_pass_configs(configs: Iterator[KernelConfig]) -> Iterator[KernelConfig]:
    """Of the tensor-core route's `configs` (a product's, or a 1x1 convolution's as
    the product of its flattened pixels), those `affinec-wgmma` takes — block rows a
    multiple of a warpgroup's 64, columns a multiple of 8 up to 256, a reduction step
    a multiple of 16 — on that pass, each shape of block and stages once (the warps
    are the pass's: a warpgroup a 64 rows), with the promotion's cp.async copies and
    with TMA's loads (`tma`; those TMA cannot load are refused when compiled)."""
    seen = set()
    for c in configs:
        rows, columns = c.tile_sizes[0], c.tile_sizes[-1]
        step = c.reduction_tile_sizes[-1] if c.reduction_tile_sizes else 0
        if len(c.tile_sizes) != 2 or rows % 64 or columns % 8 or columns > 256:
            continue
        if step % 16 or c.tf32 or c.coalesce_reduction or c.pad_channels > 1:
            continue
        key = (
            c.tile_sizes,
            c.reduction_tile_sizes,
            c.stages,
            c.splits,
            c.flatten_pixels,
        )
        if key not in seen:
            seen.add(key)
            yield replace(c, tensor_core="wgmma")
            yield replace(c, tensor_core="wgmma", tma=True)


def best_wgmma_pass(
    scored: list[tuple[KernelConfig, Prediction]],
) -> list[tuple[KernelConfig, Prediction]]:
    """The `WGMMA_PASS_CANDIDATES` of `affinec-wgmma`'s configurations the model
    ranks first."""
    return sorted(scored, key=lambda ce: ce[1].ms)[:WGMMA_PASS_CANDIDATES]


WINDOW_CANDIDATES = 3
"""The descriptor route's blocks `window_configs` keeps, the cheapest by `ss_cost`."""


def window_configs(spec: Spec, arch: str) -> list[KernelConfig]:
    """A convolution with taps or strides on Hopper's two window kernels: the
    `WINDOW_CANDIDATES` blocks of `affinec-wgmma`'s descriptor route (by TMA) that
    `ss_cost` ranks first, of every block `ss_configs` gives (those of 64 channels
    and the small grids `ss_config_for` refuses among them: the measurement decides
    here), then the template's kernel (`wgmma_config_for`); none for other specs.
    `config_for` on sm_90a takes one of them where its rules do."""
    if not isinstance(spec, ConvSpec) or arch != "sm_90a":
        return []
    blocks = [c for c in ss_configs(spec, arch) if c.tma]
    found = sorted(blocks, key=lambda c: ss_cost(spec, c))[:WINDOW_CANDIDATES]
    if spec.r * spec.s > 1:
        with contextlib.suppress(ValueError):  # the template takes no tile of it
            found.append(wgmma_config_for(spec, arch))
    return found
