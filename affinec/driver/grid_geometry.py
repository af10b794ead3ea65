"""How a configuration's tiles cover a spec's outputs: the blocks of its grid and
the outputs they compute, a partial tile counted whole (`grid_blocks`,
`computed_outputs`), which `config_for`'s rules compare.
"""

from __future__ import annotations

import math

from affinec.base.spec import Spec
from affinec.driver.kernel_config import KernelConfig
from affinec.frontend.contraction import contraction_of


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


__all__ = ["computed_outputs", "grid_blocks"]
