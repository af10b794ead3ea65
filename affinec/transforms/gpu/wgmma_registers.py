"""`affinec-wgmma` where the block's A is no 2-D tile: a filter's taps, pixels in
several band dimensions (a convolution's output rows and columns), a stride. A
then comes from registers, B (the filter tile of each tap) from shared memory.

Each warp of a warpgroup loads its 16 rows x k16 of A as `affinec-mma-sync` loads
its A fragments (`Operands.ldmatrix_a`: `ldmatrix` x4 at each lane's pixel row of
the promoted input window, a tap a shifted read of it, a stride a strided one), a
layout that is `wgmma`'s register A of the warp's rows. The steps of a compute
band become one `affinec.warpgroup_mma_registers` per iteration of the taps left
outside it: the innermost taps whose k16 steps fit the registers left for A
(`steps_that_fit`) go into the op (B's tiles of those taps read one after the
other), the outer ones stay loops around it, their runs waited for one by one or
(`in_flight`) each left in flight while the next one's fragments load:

    affine.parallel (%tx) = (0) to (256) {               // 2 warpgroups
      affine.for %r1 = 0 to 3 {                           // taps left outside
        %a0 = nvgpu.ldmatrix %input_shared[.., %oh + %r1, %ow + 0, %ka] ...
        ...                                               // s = 0..2, k by 16
        affinec.warpgroup_mma_registers %fragments, (%a0, .., %a5),
            %filter_shared[%stage, %r1] {taps = 1 : i64} : ...
      }
    } {affinec.mapping = "thread"}

The filter tile must hold its taps as outer dimensions of a K x N tile (RSCK),
each indexed by its tap loop alone from 0 by 1: then the tiles of the taps in the
op follow each other, one descriptor's offset apart. Zeroing and write-back are
`affinec-wgmma`'s (the fragments of `mma.sync`'s layout); the tiles' k padding is
`affinec-mma-sync`'s (`pad_tiles`).
"""

from __future__ import annotations

import itertools
import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, nvvm
from affinec.dialects.affinec_wgmma import WGMMA_STEP, WarpgroupMmaRegistersOp
from affinec.dialects.nvvm_target import chip_of
from affinec.ir.ranges import value_range
from affinec.transforms.affine.analysis import is_defined_inside
from affinec.transforms.gpu.mma import clone_taps
from affinec.transforms.gpu.mma_fragments import Builder, Operands
from affinec.transforms.gpu.mma_k_padding import zero_past_channel_bound
from affinec.transforms.gpu.mma_plan import ComputeBand, MmaPlan
from affinec.transforms.gpu.mma_warp_bands import constant_ivs, warp_band
from affinec.transforms.gpu.thread_bands import erase_op

MAX_STEPS = 18
"""The A fragments one op holds at most (4 registers each a thread): a 3x3 filter's
taps over 32 channels."""

OTHER_REGISTERS = 48
"""A thread's registers besides the accumulator and A's fragments (addresses,
indices, descriptors), as ptxas allocated them on 3x3 kernels."""


def steps_that_fit(plan: MmaPlan) -> int:
    """The A fragments one op may hold: `MAX_STEPS`, fewer where the block's
    threads leave each too few registers for them beside its accumulator (a block
    of 512 threads has 128 each), at least one step of 16 channels of K."""
    chip = chip_of(plan.analysis.grid.op)
    registers = min(
        chip.max_registers_per_thread,
        chip.registers_per_multiprocessor // plan.threads,
    )
    left = registers - plan.block_n // 2 - OTHER_REGISTERS
    return max(1, min(MAX_STEPS, left // 4))


def needs_registers(plan: MmaPlan) -> bool:
    """Whether the block's A is read otherwise than as one 2-D tile of the band's
    rows (taps, or pixels in several band dimensions)."""
    return any(c.taps for c in plan.compute) or len(plan.m_dims) != 1


def check_registers(plan: MmaPlan, c: ComputeBand) -> None:
    """All the register route needs of the compute band `c`; a `PassError` at the
    op at fault otherwise."""
    load = c.b.load
    if c.b.k_contiguous:
        raise PassError(
            load,
            "wgmma with A from registers reads the filter as K x N tiles (output "
            "channels innermost: RSCK); this filter tile is N x K",
        )
    if plan.k_padded // WGMMA_STEP > MAX_STEPS:
        raise PassError(
            c.channel,
            f"a reduction step of {plan.k_padded} channels: A from registers takes "
            f"at most {MAX_STEPS * WGMMA_STEP} a step",
        )
    band = c.band
    n_dim = band.dims[plan.n_dim]
    if n_dim.lower != 0 or n_dim.step != 1:
        raise PassError(band.op, "wgmma needs the band's N from 0 by 1")
    m = load.map.data
    t = load.memref.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    taps = len(c.taps)
    n_iv = band.op.induction_variables[plan.n_dim]
    ivs = [lp.induction_variable for lp in c.taps]
    want = [*ivs, c.channel.induction_variable, n_iv]
    inner = m.results[len(m.results) - len(want) :]
    if len(m.results) < len(want) or any(
        v not in load.indices or e != AffineExpr.dimension(list(load.indices).index(v))
        for e, v in zip(inner, want, strict=True)
    ):
        raise PassError(
            load,
            "wgmma with A from registers reads the filter as its taps' K x N tiles: "
            "each tap, the channels and the output channels a dimension of the tile "
            "indexed by its loop alone, in the loops' order",
        )
    for lp, extent in zip(c.taps, shape[len(shape) - 2 - taps : -2], strict=True):
        r = value_range(lp.induction_variable)
        if r != (0, extent - 1) or lp.step.value.data != 1:
            raise PassError(
                lp,
                f"a tap loop over {r} of a filter tile of {extent} taps: wgmma with "
                "A from registers takes each tap loop over its whole tile from 0 by 1",
            )
    r = value_range(c.channel.induction_variable)
    if shape[-2] > plan.k_padded or (r is not None and r[0] != 0):
        raise PassError(
            c.channel,
            f"the channel loop reads {r} of a filter tile of {shape[-2]} channels: "
            "wgmma with A from registers reads the tile's whole channels",
        )
    if shape[-1] != plan.block_n:
        raise PassError(
            load,
            f"the filter tile has {shape[-1]} output channels, the block {plan.block_n}",
        )
    for e in m.results[: len(m.results) - len(want)]:
        for dim in dims_of(e):
            if is_defined_inside(load.indices[dim], band.op):
                raise PassError(
                    load,
                    "the filter tile is indexed along a leading dimension by the "
                    "band or its loops: wgmma reads its taps' tiles whole",
                )


def dims_of(e: AffineExpr) -> list[int]:
    """The positions of the dimensions `e` uses, in order."""
    return sorted({x.position for x in e.dfs() if isinstance(x, AffineDimExpr)})


def rewrite_registers(
    plan: MmaPlan, c: ComputeBand, acc: SSAValue, in_flight: bool = False
) -> None:
    """The compute band `c` as warpgroup MMAs on A's fragments (see the module).
    With `in_flight`, where taps' loops stay around the op, each run is left in
    flight while the next one's fragments load (`pending = 1`), all waited for
    after the loops."""
    band = c.band
    zero_past_channel_bound(plan, c)
    b, ids = warp_band(plan, band.op)
    fixed = constant_ivs(plan, band, b)
    steps = plan.k_padded // WGMMA_STEP
    extents = [_extent(lp) for lp in c.taps]
    fit = steps_that_fit(plan)
    inside = len(c.taps)
    while inside and math.prod(extents[len(c.taps) - inside :]) * steps > fit:
        inside -= 1
    outside = c.taps[: len(c.taps) - inside]
    site, tap_values, sites = clone_taps(plan, outside, b)
    ivs = band.op.induction_variables
    base = {ivs[d]: v for d, v in fixed.items()}
    zero = _index(site, 0)
    fragments = []
    for combination in itertools.product(*(range(e) for e in extents[len(outside) :])):
        values = dict(tap_values)
        for lp, v in zip(c.taps[len(outside) :], combination, strict=True):
            values[lp.induction_variable] = _index(site, v)
        for k in range(steps):
            operands = Operands(plan, c, site, base, values, ids["lane"], ids["wm"],
                                ids["wn"], _index(site, k), zero, zero)  # fmt: skip
            fragments.append(operands.ldmatrix_a())
    lead = leading_indices(site, c.b.load, inside + 2, tap_values)
    pending = int(in_flight and bool(outside))
    site.add(
        WarpgroupMmaRegistersOp(
            acc, fragments, c.b.buffer, lead, inside, pending=pending
        )
    )
    for x in reversed(sites[1:]):
        x.close()
    if pending:  # the last run done before the tiles are copied into again
        b.add(nvvm.WgmmaWaitGroupSyncOp(0))
    b.close()
    erase_op(band.op)


def _extent(loop: affine.ForOp) -> int:
    r = value_range(loop.induction_variable)
    assert r is not None
    return r[1] + 1


def _index(b: Builder, value: int) -> SSAValue:
    return b.add(arith.ConstantOp(IntegerAttr(value, IndexType()))).results[0]


def leading_indices(
    b: Builder,
    load: affine.LoadOp,
    inner: int,
    values: dict[SSAValue, SSAValue] | None = None,
) -> list[SSAValue]:
    """The indices of `load` before its last `inner` (a tile's rows and columns,
    and the taps a step reads), computed in `b` from the values outside the
    compute band they use, those of `values` replaced (the taps' loops cloned
    outside the op)."""
    values = values or {}
    m = load.map.data
    out = []
    for e in m.results[: len(m.results) - inner]:
        dims = dims_of(e)
        moved = e.replace_dims_and_symbols(
            [
                AffineExpr.dimension(dims.index(k))
                if k in dims
                else AffineExpr.constant(0)
                for k in range(m.num_dims)
            ],
            [],
        )
        operands = [values.get(load.indices[k], load.indices[k]) for k in dims]
        out.append(b.apply(moved, operands))
    return out


__all__ = [
    "MAX_STEPS",
    "check_registers",
    "dims_of",
    "leading_indices",
    "needs_registers",
    "rewrite_registers",
    "steps_that_fit",
]
