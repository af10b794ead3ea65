"""Tensor cores: a promoted block's accumulation as warp-level `mma.sync`.

The block's compute band is an implicit GEMM: its output dimensions are M (the
pixels: every band dimension the input reads) and N (the output channels: the one
dimension the filter reads), its reduction is K (the channel loop, the taps outside
it). `plan_mma` reads that structure off the band and its shared tiles;
`rewrite_mma` replaces the accumulator's bands (zeroing, accumulation, write-back)
by *warp* bands: the block's warps tile M x N, each warp a tile of `mt` x `nt`
m16n8k16 MMAs, every lane holding its fragments of the accumulator in its own
registers:

    affine.parallel (%tx) = (0) to (128) {           // 4 warps of 32 lanes
      affine.for %r1 ... affine.for %s1 ...          // the taps, as they were
        affine.for %kc = 0 to 2 {                    // k in chunks of 16
          affine.for %mt = 0 to 4 { affine.for %nt = 0 to 4 {
            %a = nvgpu.ldmatrix %input_shared[<row of lane>, %kc * 16 + ...]
            %b = nvgpu.ldmatrix %filter_shared[...]
            %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
      ...
    } {affinec.mapping = "thread"}

ldmatrix reads the shared tiles where they are, one 16-byte row per lane (the pixel's
channels; `affine-data-copy-generate{reduction-innermost}` lays the tiles out so): no
im2col copy. The lanes' addresses and the fragments' rows and columns follow the PTX
ISA's layouts (`affinec.ir.mma_layouts`, checked against these expressions in the
tests). Rows past the block's pixels read the last pixel's row (their results are
never stored); a channel step that does not fill k = 16 is padded with zeros in both
tiles by a band that zeroes the padding once per block (the copies never write it);
a step cut short by its channel loop's bound (the last step of a split reduction that
the tile does not divide) has its tiles' channels past the bound zeroed by a guarded
band before its MMAs, since there the copies brought the next split's channels.

The pass's machinery lies in these modules of `affinec.transforms.gpu`: the analysis
(`plan_mma`, the `MmaPlan`: `mma_plan`), the warp bands and their lane and warp
coordinates (`mma_warp_bands`), the lanes' fragments of A and B (ldmatrix, the tf32
loads: `mma_fragments`), the zeros of the tiles' k padding and of a partial step
(`mma_k_padding`), the write-back of the accumulator through the epilogue
(`mma_writeback`), and here the rewrite of the accumulator's bands into warp bands
(`rewrite_mma`): the zeroing and the accumulation, the write-back handed on.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    VectorType,
    f32,
)
from xdsl.ir import Block, SSAValue

from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import UNROLL
from affinec.transforms.gpu.bands import Band
from affinec.transforms.gpu.mma_fragments import Builder, Operands
from affinec.transforms.gpu.mma_k_padding import pad_tiles, zero_past_channel_bound
from affinec.transforms.gpu.mma_plan import ComputeBand, MmaPlan
from affinec.transforms.gpu.mma_warp_bands import constant_ivs, warp_band
from affinec.transforms.gpu.mma_writeback import rewrite_writeback
from affinec.transforms.gpu.thread_bands import erase_op


def rewrite_mma(plan: MmaPlan) -> None:
    """Rewrite the grid band as `plan` says (in place)."""
    pad_tiles(plan)
    acc = fragments_for(plan, [plan.mt, plan.nt, 4])
    for p in plan.init:
        _rewrite_init(plan, p, acc)
    for c in plan.compute:
        _rewrite_compute(plan, c, acc)
    retire_accumulator(plan, acc)


def fragments_for(plan: MmaPlan, shape: list[int]) -> SSAValue:
    """Each thread's registers of the block's accumulator (`%fragments`, f32 in
    private memory, of `shape`), allocated where the accumulator was."""
    new_acc = memref.AllocOp(
        [], [], gpu.in_memory_space(MemRefType(f32, shape), gpu.PRIVATE_ADDRESS_SPACE)
    )
    new_acc.memref.name_hint = "fragments"
    plan.acc.parent_block().insert_op_before(new_acc, plan.acc)  # pyright: ignore
    return new_acc.memref


def retire_accumulator(plan: MmaPlan, acc: SSAValue) -> None:
    """The write-back from the registers `acc` through the epilogue
    (`rewrite_writeback`), and the block's accumulator and its uses erased."""
    for p in plan.writeback:
        rewrite_writeback(plan, p, acc)
    for use in list(plan.acc.results[0].uses):
        erase_op(use.operation)
    erase_op(plan.acc)


def _rewrite_init(plan: MmaPlan, phase: Band, acc: SSAValue) -> None:
    b, _ = warp_band(plan, phase.op)
    mt = b.loop(plan.mt, "mt")
    nt = mt.loop(plan.nt, "nt")
    e = nt.loop(4, "e")
    e.add(
        affine.StoreOp(
            plan.init_value,
            acc,
            [mt.block.args[0], nt.block.args[0], e.block.args[0]],
        )
    )
    for x in (e, nt, mt, b):
        x.close()
    erase_op(phase.op)


def clone_taps(
    plan: MmaPlan, taps: list[affine.ForOp], b: Builder
) -> tuple[Builder, dict[SSAValue, SSAValue], list[Builder]]:
    """The taps' loops `taps` (outermost first), as they were, nested in `b`: the
    innermost body, the taps' new induction variables, and every body from `b`
    in (to close innermost first)."""
    site = b
    tap_values: dict[SSAValue, SSAValue] = {}
    sites = [b]
    for lp in taps:
        clone = lp.clone_without_regions()
        if plan.unroll_taps:
            clone.attributes[UNROLL] = UnitAttr()
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = lp.induction_variable.name_hint
        clone.regions[0].add_block(body)
        site.add(clone)
        tap_values[lp.induction_variable] = body.args[0]
        site = Builder(body)
        sites.append(site)
    return site, tap_values, sites


def _rewrite_compute(plan: MmaPlan, c: ComputeBand, acc: SSAValue) -> None:
    band = c.band
    zero_past_channel_bound(plan, c)
    b, ids = warp_band(plan, band.op)
    lane, wm, wn = ids["lane"], ids["wm"], ids["wn"]
    fixed = constant_ivs(plan, band, b)
    site, tap_values, sites = clone_taps(plan, c.taps, b)
    step = plan.kind.k
    kc = site.loop(plan.k_padded // step, "kc")
    mt = kc.loop(plan.mt, "mt")
    nt = mt.loop(plan.nt, "nt")
    k, m_t, n_t = kc.block.args[0], mt.block.args[0], nt.block.args[0]
    inner = nt
    ivs = band.op.induction_variables
    base = {ivs[dd]: v for dd, v in fixed.items()}
    operands = Operands(plan, c, inner, base, tap_values, lane, wm, wn, k, m_t, n_t)
    if plan.kind.operands == "tf32":
        a_frag, b_frag = operands.tf32_fragments()
    else:
        a_frag, b_frag = operands.ldmatrix_fragments()

    # C from the lane's registers, D back to them
    scalar_zero = inner.add(arith.ConstantOp(FloatAttr(0.0, f32))).results[0]
    vec = inner.add(vector.BroadcastOp(scalar_zero, VectorType(f32, [2, 2]))).results[0]
    for e in range(4):
        ce = inner.add(arith.ConstantOp(IntegerAttr(e, IndexType()))).results[0]
        x = inner.add(affine.LoadOp(acc, [m_t, n_t, ce])).results[0]
        vec = inner.add(vector.InsertOp(x, vec, [e // 2, e % 2])).results[0]
    mma = inner.add(
        nvgpu.MmaSyncOp(
            a_frag, b_frag, vec, plan.kind.shape, tf32=plan.kind.operands == "tf32"
        )
    ).results[0]
    for e in range(4):
        ce = inner.add(arith.ConstantOp(IntegerAttr(e, IndexType()))).results[0]
        x = inner.add(vector.ExtractOp(mma, [e // 2, e % 2], f32)).results[0]
        inner.add(affine.StoreOp(x, acc, [m_t, n_t, ce]))
    for x in (nt, mt, kc, *reversed(sites)):
        x.close()
    erase_op(band.op)


__all__ = ["clone_taps", "fragments_for", "retire_accumulator", "rewrite_mma"]
