"""The warp bands of the `affinec-mma-sync` rewrite: the thread band that replaces
each of the accumulator's bands (zeroing, accumulation, write-back), its threads
numbered as the warps that tile the block's M x N and their lanes (`warp_band`),
and the band's dimensions that are neither M nor N, pinned to their one iteration
(`constant_ivs`).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, StringAttr
from xdsl.ir import Block, SSAValue
from xdsl.ir.affine import AffineExpr

from affinec.dialects import affine
from affinec.dialects.affinec import MAPPING, THREAD
from affinec.transforms.gpu.bands import Band
from affinec.transforms.gpu.mma_fragments import Builder
from affinec.transforms.gpu.mma_plan import WARP, MmaPlan


def warp_band(
    plan: MmaPlan, like: affine.ParallelOp
) -> tuple[Builder, dict[str, SSAValue]]:
    """A thread band of the plan's threads before `like`, with the lane and warp
    coordinates of its thread."""
    body = Block(arg_types=[IndexType()])
    tx = body.args[0]
    tx.name_hint = "tx"
    band = affine.ParallelOp.from_extents([plan.threads], body)
    band.attributes = {k: v for k, v in like.attributes.items() if k != MAPPING} | {
        MAPPING: StringAttr(THREAD)
    }
    band.location = like.location
    like.parent_block().insert_op_before(band, like)  # pyright: ignore
    b = Builder(body)
    d0 = AffineExpr.dimension(0)
    wn = plan.warps[1]
    ids = {
        "lane": b.apply(d0 % WARP, [tx], "lane"),
        "wm": b.apply((d0 // WARP) // wn if wn > 1 else d0 // WARP, [tx], "wm"),
        "wn": b.apply((d0 // WARP) % wn, [tx], "wn"),
    }
    return b, ids


def constant_ivs(plan: MmaPlan, band: Band, b: Builder) -> dict[int, SSAValue]:
    """The band's dimensions of one iteration (neither M nor N), as constants."""
    values = {}
    for d, dim in enumerate(band.dims):
        if d in plan.m_dims or d == plan.n_dim:
            continue
        c = b.add(arith.ConstantOp(IntegerAttr(dim.lower or 0, IndexType())))
        values[d] = c.results[0]
    return values
