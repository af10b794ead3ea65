"""Tensor cores on Hopper: a promoted block's accumulation as warpgroup MMA
(`affinec-wgmma`), on the tiles the pipeline's own passes copied.

The block's compute band is read as `affinec-mma-sync` reads it (`plan_mma`: the
accumulator's bands, the shared tiles A and B, M, N and the channel loop K); what
the warpgroups need of it is checked here (`plan_wgmma`), and the bands are
rewritten (`rewrite_wgmma`):

- the block's threads are BM / 64 warpgroups of 128, warpgroup g owning rows
  [64 g, 64 g + 64) of the block's M and all its N columns (an m64nN `wgmma`);
- each thread keeps its registers of that m64nN accumulator in a private buffer
  `memref<1 x N/8 x 4 x f32, 5>`: register j at [0, j / 4, j % 4]. Thread t of warp w
  holds, at [0, nt, e], row 16 w + (t % 32) / 4 + 8 (e / 2), column 8 nt + 2 (t % 4)
  + e % 2 of its warpgroup's slab: the fragments of `affinec-mma-sync`'s warp tile
  of 1 x N/8 m16n8 MMAs, warps tiling M alone (`warps = (BM / 16, 1)`). The zeroing
  and the write-back through the epilogue are therefore `affinec-mma-sync`'s
  (`mma_writeback.rewrite_writeback`), unchanged;
- each step of the reduction (one pipeline stage's tiles) is one
  `affinec.warpgroup_mma` on those registers, A the warpgroup's 64 rows of the
  input tile, B the whole filter tile:

    affine.parallel (%tx) = (0) to (128) {
      %row = affine.apply affine_map<(d0) -> (d0 floordiv 128 * 64)>(%tx)
      affinec.warpgroup_mma %fragments, %A_shared[%stage, %row], %B_shared[%stage]
          : memref<1x8x4xf32, 5>, memref<2x64x32xf16, 3>, memref<2x32x64xf16, 3>
    } {affinec.mapping = "thread"}

B is read as the copy wrote it: a K x N tile (N innermost) is `wgmma`'s MN-major
("transposed") B, an N x K one its K-major B; nothing is copied again. The tiles
are laid out for `wgmma` by `affinec-plan-shared-memory` (`wgmma_lowering_layout`).

Where the block's A tile is a box of its pixels in several dimensions (a
convolution tiled one tap at a time: images x rows x columns x channels at the
tap's shifted origin), its pixel dimensions are merged into one and it is read so,
by descriptor (`wgmma_lowering_boxes`); where it is none (a step holding several
taps, a stride), A comes from registers (`wgmma_registers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec_wgmma import (
    WGMMA_ROWS,
    WGMMA_STEP,
    WarpgroupMmaStepOp,
)
from affinec.dialects.nvvm_target import chip_of
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE, WGMMA_MAX_N, is_wgmma_n
from affinec.ir.ranges import value_range
from affinec.transforms.affine.analysis import is_defined_inside
from affinec.transforms.gpu.bands import Band, GridAnalysis, is_shared
from affinec.transforms.gpu.mma import fragments_for, retire_accumulator
from affinec.transforms.gpu.mma_k_padding import pad_tiles, zero_past_channel_bound
from affinec.transforms.gpu.mma_plan import ComputeBand, MmaPlan, Operand, plan_mma
from affinec.transforms.gpu.mma_warp_bands import warp_band
from affinec.transforms.gpu.thread_bands import erase_op
from affinec.transforms.gpu.wgmma_lowering_boxes import (
    box_reason,
    check_boxes,
    flatten_tiles,
)
from affinec.transforms.gpu.wgmma_registers import (
    check_registers,
    dims_of,
    leading_indices,
    needs_registers,
    rewrite_registers,
)


@dataclass
class WgmmaPlan:
    """What `rewrite_wgmma` needs: `affinec-mma-sync`'s plan of the band with warps
    tiling M alone, and how each compute band's tiles are read."""

    mma: MmaPlan
    b_k_major: bool
    """B's tile is N x K (else K x N, `wgmma`'s transposed B)."""
    registers: bool = False
    """A from registers, loaded as `affinec-mma-sync` loads its A fragments
    (`wgmma_registers`): the block's A is no 2-D tile."""
    boxes: bool = False
    """A a box of the block's pixels in several dimensions, read by descriptor once
    they are merged into one (`wgmma_lowering_boxes`)."""

    @property
    def warpgroups(self) -> int:
        return -(-self.mma.block_m // WGMMA_ROWS)

    @property
    def threads(self) -> int:
        return self.warpgroups * WARPGROUP_SIZE


def plan_wgmma(analysis: GridAnalysis) -> WgmmaPlan:
    """Read the block's product off the grid band and check all `affinec-wgmma`
    needs; a `PassError` at the op at fault otherwise."""
    grid = analysis.grid.op
    chip = chip_of(grid)
    if not chip.has("wgmma"):
        raise PassError(
            grid,
            f"wgmma needs sm_90a; the module is compiled for {chip.name} (use "
            "affinec-mma-sync there, or set the target to sm_90a)",
        )
    _refuse_f32_operands(grid)
    most = chip.max_threads_per_block // 32
    # Warps along M alone: every warp owns 16 rows and all N columns.
    first = plan_mma(analysis, (most, 1))
    block_m, block_n = first.block_m, first.block_n
    band = first.compute[0].band
    registers = needs_registers(first)
    boxes = registers and all(box_reason(first, c) is None for c in first.compute)
    registers = registers and not boxes
    # A from registers (a box of pixels): the last warpgroup's rows past the
    # block's read its last pixel (rows of the tile never copied into), and are
    # never stored
    warpgroups = -(-block_m // WGMMA_ROWS)
    if (block_m % WGMMA_ROWS and not (registers or boxes)) or warpgroups * 4 > most:
        multiple = "" if registers or boxes else f"a multiple of {WGMMA_ROWS}, "
        raise PassError(
            band.op,
            f"the block tile has M = {block_m} rows: wgmma needs {multiple}at "
            f"most {most * 16} (warpgroups of {WGMMA_ROWS} rows)",
        )
    if not is_wgmma_n(block_n):
        raise PassError(
            band.op,
            f"the block tile has N = {block_n} columns: wgmma takes a multiple of 8 "
            f"up to {WGMMA_MAX_N}",
        )
    plan = plan_mma(analysis, (4 * warpgroups, 1))
    b_k_major = None
    for c in plan.compute:
        if registers:
            check_registers(plan, c)
        elif boxes:
            check_boxes(plan, c)
        else:
            _check_compute(plan, c)
        if b_k_major is not None and c.b.k_contiguous != b_k_major:
            raise PassError(c.band.op, "the compute bands read B in different layouts")
        b_k_major = c.b.k_contiguous
    assert b_k_major is not None
    return WgmmaPlan(plan, b_k_major, registers, boxes)


def _refuse_f32_operands(grid: Operation) -> None:
    """f32 (or any type but f16 and bf16) read from a shared tile into a product."""
    for op in grid.walk():
        if not isinstance(op, arith.MulfOp):
            continue
        for factor in (op.lhs, op.rhs):
            owner = factor.owner
            if isinstance(owner, arith.ExtFOp):
                continue  # widened from f16 or bf16
            if isinstance(owner, affine.LoadOp) and is_shared(owner.memref):
                t = owner.memref.type
                assert isinstance(t, MemRefType)
                raise PassError(
                    owner,
                    f"wgmma takes f16 or bf16 operands, this tile holds "
                    f"{t.get_element_type()} (keep f32 on affinec-mma-sync with "
                    "tf32, or on the SIMT route)",
                )


def _check_compute(plan: MmaPlan, c: ComputeBand) -> None:
    band = c.band
    r = value_range(c.channel.induction_variable)
    extent = plan.k_padded if r is None else r[1] + 1
    if extent % WGMMA_STEP:
        raise PassError(
            c.channel,
            f"the reduction step is K = {extent}, not a multiple of {WGMMA_STEP} "
            "(one wgmma's k)",
        )
    m_iv = band.op.induction_variables[plan.m_dims[0]]
    n_iv = band.op.induction_variables[plan.n_dim]
    k_iv = c.channel.induction_variable
    for d in (plan.m_dims[0], plan.n_dim):
        if band.dims[d].lower != 0 or band.dims[d].step != 1:
            raise PassError(band.op, "wgmma needs the band's M and N from 0 by 1")
    _tile_dims(c.a, (m_iv, k_iv), band, "A", plan.block_m, extent)
    if c.b.k_contiguous:
        _tile_dims(c.b, (n_iv, k_iv), band, "B", plan.block_n, extent)
    else:
        _tile_dims(c.b, (k_iv, n_iv), band, "B", extent, plan.block_n)


def _tile_dims(
    operand: Operand,
    ivs: tuple[SSAValue, SSAValue],
    band: Band,
    what: str,
    rows: int,
    cols: int,
) -> None:
    """The tile's last two dimensions are indexed by `ivs` alone, its tile exactly
    `rows` x `cols` (at least `rows` for A), and its leading ones by values from
    outside the band (the pipeline's stage)."""
    load = operand.load
    m = load.map.data
    t = load.memref.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    *leading, r, c = m.results
    expect = [AffineExpr.dimension(list(load.indices).index(iv)) for iv in ivs]
    if (
        any(iv not in load.indices for iv in ivs)
        or [r, c] != expect
        or m.num_symbols
        or len(shape) < 2
    ):
        raise PassError(
            load,
            f"wgmma reads {what} as a 2-D tile indexed by the band's "
            f"{'rows and channels' if what == 'A' else 'channels and columns'}; "
            "this load indexes it otherwise",
        )
    if shape[-1] != cols or shape[-2] < rows or (what == "B" and shape[-2] != rows):
        raise PassError(
            load,
            f"{what}'s tile is {shape[-2]}x{shape[-1]}, the block reads {rows}x{cols}",
        )
    for e in leading:
        for dim in dims_of(e):
            if is_defined_inside(load.indices[dim], band.op):
                raise PassError(
                    load,
                    f"{what}'s tile is indexed along a leading dimension by the band "
                    "or its loops: wgmma reads one whole tile a step",
                )


# -- rewriting ------------------------------------------------------------------------


def rewrite_wgmma(plan: WgmmaPlan, in_flight: bool = False) -> None:
    """Rewrite the grid band as `plan` says (in place); `in_flight`: A from
    registers, runs left in flight within a step (`rewrite_registers`)."""
    mma = plan.mma
    if plan.registers:
        pad_tiles(mma)  # A's k padding and 16-byte rows, as ldmatrix reads them
    acc = fragments_for(mma, [1, mma.nt, 4])
    for p in mma.init:
        _rewrite_init(mma, p, acc)
    if plan.boxes:
        # the zeroing of a step cut short indexes the tiles as the band does
        for c in mma.compute:
            zero_past_channel_bound(mma, c)
        flatten_tiles(mma)
    for c in mma.compute:
        if plan.registers:
            rewrite_registers(mma, c, acc, in_flight)
        else:
            _rewrite_compute(plan, c, acc, zeroed=plan.boxes)
    retire_accumulator(mma, acc)


def _rewrite_init(plan: MmaPlan, phase: Band, acc: SSAValue) -> None:
    b, _ = warp_band(plan, phase.op)
    nt = b.loop(plan.nt, "nt")
    e = nt.loop(4, "e")
    d = AffineExpr.dimension
    e.add(
        affine.StoreOp(
            plan.init_value,
            acc,
            [nt.block.args[0], e.block.args[0]],
            AffineMap(2, 0, (AffineExpr.constant(0), d(0), d(1))),
        )
    )
    for x in (e, nt, b):
        x.close()
    erase_op(phase.op)


def _rewrite_compute(
    plan: WgmmaPlan, c: ComputeBand, acc: SSAValue, zeroed: bool = False
) -> None:
    band = c.band
    # a step cut short (a split reduction's last) reads zeros past its channels
    if not zeroed:
        zero_past_channel_bound(plan.mma, c)
    b, _ = warp_band(plan.mma, band.op)
    tx = b.block.args[0]
    d0 = AffineExpr.dimension(0)
    row = b.apply((d0 // WARPGROUP_SIZE) * WGMMA_ROWS, [tx], "row")
    lead_a = leading_indices(b, c.a.load, 2)
    lead_b = leading_indices(b, c.b.load, 2)
    b.add(
        WarpgroupMmaStepOp(
            acc, c.a.buffer, [*lead_a, row], c.b.buffer, lead_b, plan.b_k_major
        )
    )
    b.close()
    erase_op(band.op)


__all__ = ["WgmmaPlan", "plan_wgmma", "rewrite_wgmma"]
