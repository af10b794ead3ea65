"""The `affinec-mma-sync` rewrite's operands: inside a warp's MMA loops, the lane's A
and B fragments (`Operands`), loaded from the shared tiles where they are:
`ldmatrix` for 16-bit operands (`ldmatrix_fragments`), and for tf32, which
`ldmatrix` does not load, register by register (`tf32_fragments`), at the lanes'
rows and columns of the PTX ISA's layouts (`affinec.ir.mma_layouts`). Also the
small op builder the rewrite appends with (`Builder`) and the band's pixel
coordinates for a row of the warp tile (`pixel_values`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import FloatAttr, IndexType, UnitAttr, VectorType, f32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, nvgpu
from affinec.dialects.affinec import UNROLL
from affinec.transforms.gpu.bands import Band
from affinec.transforms.gpu.mma_plan import WARP, ComputeBand, MmaPlan


class Builder:
    """Ops appended to a block, with affine.apply over named values."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def add(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def apply(
        self, expr: AffineExpr, operands: list[SSAValue], hint: str = ""
    ) -> SSAValue:
        op = affine.ApplyOp(operands, AffineMap(len(operands), 0, (expr,)))
        if hint:
            op.result.name_hint = hint
        return self.add(op).results[0]

    def loop(self, upper: int, hint: str, unroll: bool = True) -> Builder:
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = hint
        loop = affine.ForOp(0, upper, body)
        if unroll:
            loop.attributes[UNROLL] = UnitAttr()
        self.add(loop)
        return Builder(body)

    def close(self) -> None:
        self.block.add_op(affine.YieldOp())


def pixel_values(
    plan: MmaPlan, b: Builder, m: AffineExpr, operands: list[SSAValue], band: Band
) -> dict[int, SSAValue]:
    """The band's M dimensions' induction values for pixel `m` (row-major over the
    M extents), as affine.apply ops."""
    extents = [band.extents[d] for d in plan.m_dims]
    values = {}
    for k, d in enumerate(plan.m_dims):
        stride = math.prod(extents[k + 1 :])
        idx = m if stride == 1 else m // stride
        if k > 0:
            idx = idx % extents[k]
        values[d] = b.apply(
            band_iv(band, d, idx, len(operands)), [*operands, *_lower(band, d)]
        )
    return values


def band_iv(band: Band, d: int, idx: AffineExpr, n: int) -> AffineExpr:
    dim = band.dims[d]
    if dim.lower is not None:
        return idx * dim.step + dim.lower
    return idx * dim.step + AffineExpr.dimension(n)


def _lower(band: Band, d: int) -> list[SSAValue]:
    if band.dims[d].lower is not None:
        return []
    raise PassError(band.op, "the MMA rewrite needs constant lower bounds in the band")


def _indices(
    load: affine.LoadOp, values: dict[SSAValue, SSAValue], b: Builder
) -> list[SSAValue]:
    """`load`'s indices with some of its operands replaced, as affine.apply ops."""
    operands = [values.get(v, v) for v in load.indices]
    m = load.map.data
    out = []
    for e in m.results:
        out.append(
            b.apply(e, operands) if m.num_symbols == 0 else _symbolic(b, m, e, operands)
        )
    return out


def _symbolic(b: Builder, m: AffineMap, e: AffineExpr, operands) -> SSAValue:
    op = affine.ApplyOp(operands, AffineMap(m.num_dims, m.num_symbols, (e,)))
    return b.add(op).results[0]


@dataclass
class Operands:
    """Builds one MMA's A and B fragments for the lane, inside the MMA loops."""

    plan: MmaPlan
    c: ComputeBand
    b: Builder
    base: dict[SSAValue, SSAValue]
    taps: dict[SSAValue, SSAValue]
    lane: SSAValue
    wm: SSAValue
    wn: SSAValue
    k: SSAValue
    m_t: SSAValue
    n_t: SSAValue

    def _row(self, row: AffineExpr) -> dict[SSAValue, SSAValue]:
        """The band's M variables for the warp tile's row `row` (an expression of
        the lane), clamped to the block's pixels."""
        plan, d = self.plan, AffineExpr.dimension
        tile = plan.kind.m
        m_expr = d(1) * (tile * plan.mt) + d(2) * tile + row
        rows = tile * plan.mt * plan.warps[0]
        operands = [self.lane, self.wm, self.m_t]
        m = (
            self.b.apply(m_expr, operands)
            if rows <= plan.block_m
            else _min(self.b, m_expr, plan.block_m - 1, operands)
        )
        pixel = pixel_values(plan, self.b, d(0), [m], self.c.band)
        ivs = self.c.band.op.induction_variables
        return {ivs[dd]: v for dd, v in pixel.items()}

    def _column(self, col: AffineExpr, limit: int) -> dict[SSAValue, SSAValue]:
        """The band's N variable for the warp tile's column `col` (an expression of
        the lane), clamped to `limit` where some warp's columns would pass it."""
        plan, d = self.plan, AffineExpr.dimension
        tile = plan.kind.n
        n_expr = d(1) * (tile * plan.nt) + d(2) * tile + col
        operands = [self.lane, self.wn, self.n_t]
        largest = (
            tile * plan.nt * plan.warps[1]
            - tile
            + max(col.eval([lane], []) for lane in range(WARP))
        )
        if largest <= limit:
            n = self.b.apply(n_expr, operands)
        else:
            n = _min(self.b, n_expr, limit, operands)
        band = self.c.band
        n_iv = band.op.induction_variables[plan.n_dim]
        return {n_iv: self.b.apply(band_iv(band, plan.n_dim, d(0), 1), [n])}

    def _k(self, col: AffineExpr, hint: str) -> dict[SSAValue, SSAValue]:
        d = AffineExpr.dimension
        e = d(1) * self.plan.kind.k + col.replace_dims_and_symbols([d(0)], [])
        return {
            self.c.channel.induction_variable: self.b.apply(
                e, [self.lane, self.k], hint
            )
        }

    def ldmatrix_a(self) -> SSAValue:
        """16-bit A: the lane's fragment of the warp's 16 rows x k16, straight from
        16-byte rows of the tile (rows are pixels, 16-byte rows along k:
        affinec.ir.mma_layouts.a_tile_address)."""
        c, b, d = self.c, self.b, AffineExpr.dimension
        values = {**self.base, **self.taps}
        values |= self._row((d(0) % 8) + ((d(0) // 8) % 2) * 8)
        values |= self._k((d(0) // 16) * 8, "ka")
        a = b.add(nvgpu.LdMatrixOp(c.a.buffer, _indices(c.a.load, values, b), 4))
        return a.results[0]

    def ldmatrix_fragments(self) -> tuple[SSAValue, SSAValue]:
        """16-bit operands: the fragments straight from 16-byte rows of the tiles."""
        plan, c, b, d = self.plan, self.c, self.b, AffineExpr.dimension
        a = self.ldmatrix_a()
        # B: eight output channels a fragment (b_tile_address)
        values = {**self.base, **self.taps}
        if c.b.k_contiguous:
            values |= self._column(d(0) % 8, plan.block_n - 1)
            values |= self._k(((d(0) // 8) % 2) * 8, "kb")
        else:
            # eight consecutive output channels a row: a warp past the block's
            # channels reads the tile's last eight (its results are not stored)
            width = c.b.buffer.type.get_shape()[-1]  # pyright: ignore
            values |= self._column(AffineExpr.constant(0), width - 8)
            values |= self._k(d(0) % 16, "kb")
        bb = b.add(
            nvgpu.LdMatrixOp(
                c.b.buffer,
                _indices(c.b.load, values, b),
                2,
                transpose=not c.b.k_contiguous,
            )
        )
        return a, bb.results[0]

    def tf32_fragments(self) -> tuple[SSAValue, SSAValue]:
        """f32 operands (m16n8k8 tf32): no ldmatrix for 32-bit elements, so each
        lane loads its registers one by one (affinec.ir.mma_layouts: A register r at
        row g + 8 (r % 2), column t + 4 (r // 2); B register r at k t + 4r, n g)."""
        plan, c, b, d = self.plan, self.c, self.b, AffineExpr.dimension
        g, t = d(0) // 4, d(0) % 4
        a_vec = _poison_vector(b, [4, 1])
        for r in range(4):
            values = {**self.base, **self.taps}
            values |= self._row(g + 8 * (r % 2))
            values |= self._k(t + 4 * (r // 2), "ka")
            # memref.load: the indices may go through an affine.min (a clamp),
            # which is no dimension of an affine map (MLIR's rule).
            x = b.add(memref.LoadOp.get(c.a.buffer, _indices(c.a.load, values, b)))
            a_vec = b.add(vector.InsertOp(x.results[0], a_vec, [r, 0])).results[0]
        b_vec = _poison_vector(b, [2, 1])
        width = c.b.buffer.type.get_shape()[-1]  # pyright: ignore
        clamp = plan.block_n - 1 if c.b.k_contiguous else width - 1
        for r in range(2):
            values = {**self.base, **self.taps}
            values |= self._column(g, clamp)
            values |= self._k(t + 4 * r, "kb")
            x = b.add(memref.LoadOp.get(c.b.buffer, _indices(c.b.load, values, b)))
            b_vec = b.add(vector.InsertOp(x.results[0], b_vec, [r, 0])).results[0]
        return a_vec, b_vec


def _poison_vector(b: Builder, shape: list[int]) -> SSAValue:
    zero = b.add(arith.ConstantOp(FloatAttr(0.0, f32))).results[0]
    return b.add(vector.BroadcastOp(zero, VectorType(f32, shape))).results[0]


def _min(b: Builder, e: AffineExpr, bound: int, operands: list[SSAValue]) -> SSAValue:
    m = AffineMap(len(operands), 0, (e, AffineExpr.constant(bound)))
    return b.add(affine.MinOp(operands, m)).results[0]
