"""The hand-written Hopper matrix product, the test bed of the Hopper levels: the
kernel `affinec-wgmma-gemm` makes (`affinec.transforms.gpu.wgmma_text`, where the
kernel is described) with an f32 output, no epilogue and the names the tests use.

`matmul_module(m, n, k, stages, tile_m, tile_n)` is a module with a host function
`@matmul(%a, %b, %out)` (A m × k and B k × n of f16, out m × n of f32) that makes
the two tensor maps and launches a grid of blocks, one warpgroup each (two when
warp-specialized), one `tile_m` × `tile_n` tile of the output a block.
"""

from __future__ import annotations

from affinec.transforms.gpu.wgmma_plan import BK, GemmKernel
from affinec.transforms.gpu.wgmma_text import gemm_module_text

WARPGROUP = 128


def matmul_module(
    m: int = 64,
    n: int = 64,
    k: int = 64,
    stages: int = 1,
    tile_m: int | None = None,
    tile_n: int | None = None,
    in_flight: bool = False,
    warp_specialized: bool = False,
) -> str:
    """The module's text (MLIR's syntax); a ValueError for shapes it cannot take.

    With `in_flight`, each step's MMAs stay in flight while the next step waits for
    its tiles (`waitGroup = 1`): the stage a step read is free only after the next
    step's MMAs are issued, so it is reloaded one step later (2 stages at least).
    With `warp_specialized`, a loading warpgroup and a multiplying one hand stages
    back and forth on mbarriers."""
    schedule = (
        "specialized" if warp_specialized else "in-flight" if in_flight else "waited"
    )
    return gemm_module_text(
        GemmKernel(
            m,
            n,
            k,
            "f16",
            "f32",
            (),
            tile_m or m,
            tile_n or n,
            stages,
            schedule,
            function="matmul",
            names=("a", "b", "out"),
        )  # fmt: skip
    )


__all__ = ["BK", "WARPGROUP", "matmul_module"]
