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
tiles by a band that zeroes the padding once per block (the copies never write it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    UnitAttr,
    VectorType,
    f32,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)

from affinec.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, MAPPING, THREAD, UNROLL, mapping_of
from affinec.transforms.affine.analysis import is_defined_inside
from affinec.transforms.gpu.bands import Band, GridAnalysis, is_private

WARP = 32
K_STEP = 16
"""k of one m16n8k16 MMA."""


@dataclass
class Operand:
    """A shared tile the compute band reads, and how."""

    load: affine.LoadOp
    """The access in the band's innermost body."""
    buffer: SSAValue
    channel_dim: int
    """The tile's dimension indexed by the channel loop."""
    k_contiguous: bool
    """The channel dimension is the tile's innermost (else N is: a transposed load)."""


@dataclass
class ComputeBand:
    band: Band
    a: Operand
    b: Operand
    channel: affine.ForOp
    taps: list[affine.ForOp]
    """The band's other reduction loops, outermost first."""


@dataclass
class MmaPlan:
    analysis: GridAnalysis
    kind: nvgpu.MmaKind
    acc: Operation
    init: list[Band]
    compute: list[ComputeBand]
    writeback: list[Band]
    m_dims: list[int]
    n_dim: int
    warps: tuple[int, int]
    mt: int
    """16-row MMA tiles per warp along M."""
    nt: int
    """8-column MMA tiles per warp along N."""
    k_padded: int
    """The channel extent of one step, rounded up to whole MMAs."""
    init_value: SSAValue
    pads: dict[SSAValue, list[int]] = field(default_factory=dict)
    """For each tile, its allocation's new shape (padded for k and alignment)."""

    @property
    def threads(self) -> int:
        return WARP * self.warps[0] * self.warps[1]

    @property
    def block_m(self) -> int:
        extents = self.compute[0].band.extents
        return math.prod(extents[d] for d in self.m_dims)

    @property
    def block_n(self) -> int:
        return self.compute[0].band.extents[self.n_dim]


# -- planning -------------------------------------------------------------------------------


def plan_mma(analysis: GridAnalysis, warps: tuple[int, int]) -> MmaPlan:
    """Read the implicit GEMM off the grid band and check everything the rewrite
    needs; a `PassError` at the op at fault otherwise."""
    grid = analysis.grid.op
    accs = [a for a in analysis.allocs if is_private(a.results[0])]
    if len(accs) != 1:
        raise PassError(
            grid,
            f"the MMA rewrite needs one private accumulator in the grid band, found "
            f"{len(accs)} (run affinec-place-buffers after affinec-split)",
        )
    (acc,) = accs
    phases = [p for p in analysis.phases if _uses(p.op, acc.results[0])]
    init, compute, writeback = [], [], []
    for p in phases:
        if mapping_of(p.op) != BLOCK:
            raise PassError(p.op, "this band is already mapped to threads")
        loads = _accesses(p.op, acc.results[0], affine.LoadOp)
        stores = _accesses(p.op, acc.results[0], affine.StoreOp)
        if loads and stores:
            compute.append(p)
        elif stores:
            init.append(p)
        else:
            writeback.append(p)
    if not compute:
        raise PassError(grid, "no band accumulates into the accumulator")
    computes = [_compute_band(p, acc.results[0]) for p in compute]
    first = computes[0]
    element = first.a.buffer.type.get_element_type()  # pyright: ignore
    kind = _kind(first.a.load, element)
    band = first.band
    n_dims = [
        d
        for d, iv in enumerate(band.op.induction_variables)
        if _reads(first.b.load, iv)
    ]
    m_dims = [
        d
        for d, iv in enumerate(band.op.induction_variables)
        if d not in n_dims and band.extents[d] > 1
    ]
    if len(n_dims) != 1:
        raise PassError(
            band.op,
            f"the filter is read along {len(n_dims)} of the band's dimensions: an MMA "
            "needs exactly one (the output channels)",
        )
    for d in m_dims:
        if _reads(first.b.load, band.op.induction_variables[d]):
            raise PassError(
                band.op, "a dimension read by both the input and the filter"
            )
    wm, wn = warps
    if wm < 1 or wn < 1 or wm * wn * WARP > 1024:
        raise PassError(grid, f"warps {wm}x{wn}: between 1 and 32 warps in a block")
    block_m = math.prod(band.extents[d] for d in m_dims)
    block_n = band.extents[n_dims[0]]
    mt = max(1, -(-block_m // (16 * wm)))
    nt = max(1, -(-block_n // (8 * wn)))
    if mt * nt > 32:
        raise PassError(
            band.op,
            f"a warp tile of {mt}x{nt} MMAs ({mt * nt * 4} accumulators a lane): use "
            "more warps or a smaller block tile",
        )
    c_extent = _extent(first.channel)
    k_padded = -(-c_extent // K_STEP) * K_STEP
    init_value = _init_value(init, acc.results[0])
    plan = MmaPlan(
        analysis,
        kind,
        acc,
        init,
        computes,
        writeback,
        m_dims,
        n_dims[0],
        warps,
        mt,
        nt,
        k_padded,
        init_value,
    )
    for c in computes:
        if c.band.signature != first.band.signature:
            raise PassError(c.band.op, "the compute bands differ in shape")
        for operand in (c.a, c.b):
            plan.pads[operand.buffer] = _padded_shape(operand, k_padded)
    return plan


def _uses(op: Operation, value: SSAValue) -> bool:
    return any(value in o.operands for o in op.walk())


def _accesses(op: Operation, buffer: SSAValue, kind: type) -> list[Operation]:
    return [o for o in op.walk() if isinstance(o, kind) and o.memref is buffer]


def _reads(load: affine.LoadOp, iv: SSAValue) -> bool:
    m = load.map.data
    for k, v in enumerate(load.indices):
        if v is iv and any(AffineExpr.dimension(k) in list(e.dfs()) for e in m.results):
            return True
    return False


def _extent(loop: affine.ForOp) -> int:
    from affinec.ir.ranges import value_range

    r = value_range(loop.induction_variable)
    if r is None:
        raise PassError(loop, "the channel loop has no static bound")
    return r[1] + 1


def _kind(at: Operation, element) -> nvgpu.MmaKind:
    if isinstance(element, Float16Type):
        return nvgpu.MmaKind(16, 8, 16, "f16")
    if isinstance(element, BFloat16Type):
        return nvgpu.MmaKind(16, 8, 16, "bf16")
    raise PassError(
        at,
        f"tensor cores take f16 or bf16 operands here, got {element} (keep f32 "
        "convolutions on the SIMT route)",
    )


def _init_value(init: list[Band], acc: SSAValue) -> SSAValue:
    values = set()
    for p in init:
        for store in _accesses(p.op, acc, affine.StoreOp):
            assert isinstance(store, affine.StoreOp)
            if is_defined_inside(store.value, p.op):
                raise PassError(store, "the accumulator must start from one value")
            values.add(store.value)
    if len(values) != 1:
        raise PassError(
            init[0].op if init else None,  # pyright: ignore[reportArgumentType]
            "the accumulator must be zeroed by one band storing one value",
        )
    return values.pop()


def _compute_band(phase: Band, acc: SSAValue) -> ComputeBand:
    """The band's loops, shared loads and multiply-add, checked."""
    op = phase.op
    loops: list[affine.ForOp] = []
    block = op.body.block
    while True:
        inner = [o for o in block.ops if not isinstance(o, affine.YieldOp)]
        if len(inner) == 1 and isinstance(inner[0], affine.ForOp):
            loop = inner[0]
            if loop.inits or any(is_defined_inside(v, op) for v in loop.operands):
                raise PassError(loop, "a reduction loop whose bounds use the band")
            loops.append(loop)
            block = loop.body.block
            continue
        break
    body = [o for o in block.ops if not isinstance(o, affine.YieldOp)]
    stores = [o for o in body if isinstance(o, affine.StoreOp)]
    if len(stores) != 1 or stores[0].memref is not acc:
        raise PassError(
            op, "the compute band must only accumulate into the accumulator"
        )
    (store,) = stores
    add = store.value.owner
    if not isinstance(add, arith.AddfOp):
        raise PassError(store, "the accumulator must take a sum (arith.addf)")
    terms = [t.owner for t in (add.lhs, add.rhs)]
    old = [t for t in terms if isinstance(t, affine.LoadOp) and t.memref is acc]
    mul = [t for t in terms if isinstance(t, arith.MulfOp)]
    if len(old) != 1 or len(mul) != 1:
        raise PassError(add, "the sum must add a product to the accumulator")
    factors = []
    for f in (mul[0].lhs, mul[0].rhs):
        owner = f.owner
        if isinstance(owner, arith.ExtFOp):
            owner = owner.input.owner
        if not (
            isinstance(owner, affine.LoadOp)
            and gpu.memory_space(owner.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
        ):
            raise PassError(
                mul[0],
                "each factor must be read from a shared tile (run "
                "affine-data-copy-generate{reduction-innermost=true} first)",
            )
        factors.append(owner)
    band_ivs = set(op.induction_variables)
    loop_ivs = {lp.induction_variable: lp for lp in loops}
    channel = _channel_loop(factors, loop_ivs)
    # The frontend multiplies the input (A, rows M) by the filter (B, columns N).
    a_load, b_load = factors
    a = _operand(a_load, channel, band_ivs, transposable=False)
    b = _operand(b_load, channel, band_ivs, transposable=True)
    taps = [lp for lp in loops if lp is not loop_ivs[channel]]
    return ComputeBand(phase, a, b, loop_ivs[channel], taps)


def _channel_loop(
    factors: list[affine.LoadOp], loops: dict[SSAValue, affine.ForOp]
) -> SSAValue:
    """The loop variable that alone indexes a dimension of both tiles."""
    found = None
    for iv in loops:
        if all(_alone_dim(f, iv) is not None for f in factors):
            found = iv
    if found is None:
        raise PassError(
            factors[0],
            "no reduction loop indexes both tiles alone: there is no k for the MMA",
        )
    return found


def _alone_dim(load: affine.LoadOp, iv: SSAValue) -> int | None:
    """The dimension of `load`'s tile that `iv` alone indexes, if any."""
    if iv not in load.indices:
        return None
    alone = AffineExpr.dimension(list(load.indices).index(iv))
    for d, e in enumerate(load.map.data.results):
        if e == alone:
            return d
    return None


def _operand(
    load: affine.LoadOp, channel: SSAValue, band_ivs: set, transposable: bool
) -> Operand:
    t = load.memref.type
    assert isinstance(t, MemRefType)
    rank = t.get_num_dims()
    d = _alone_dim(load, channel)
    assert d is not None
    if d == rank - 1:
        return Operand(load, load.memref, d, True)
    n_alone = any(_alone_dim(load, iv) == rank - 1 for iv in band_ivs)
    if transposable and n_alone:
        return Operand(load, load.memref, d, False)
    raise PassError(
        load,
        "the channels must be the tile's innermost dimension (or, for the filter, "
        "the output channels): run affine-data-copy-generate{reduction-innermost=true}",
    )


def _padded_shape(operand: Operand, k_padded: int) -> list[int]:
    """The tile's shape with the channel dimension a whole number of MMA steps and
    the innermost a multiple of 8 elements (16-byte aligned ldmatrix rows)."""
    t = operand.buffer.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    shape[operand.channel_dim] = max(shape[operand.channel_dim], k_padded)
    shape[-1] = -(-shape[-1] // 8) * 8
    return shape


# -- rewriting ------------------------------------------------------------------------------


class _Builder:
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

    def loop(self, upper: int, hint: str, unroll: bool = True) -> _Builder:
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = hint
        loop = affine.ForOp(0, upper, body)
        if unroll:
            loop.attributes[UNROLL] = UnitAttr()
        self.add(loop)
        return _Builder(body)

    def close(self) -> None:
        self.block.add_op(affine.YieldOp())


def rewrite_mma(plan: MmaPlan) -> None:
    """Rewrite the grid band as `plan` says (in place)."""
    _pad_tiles(plan)
    acc_type = gpu.in_memory_space(
        MemRefType(f32, [plan.mt, plan.nt, 4]), gpu.PRIVATE_ADDRESS_SPACE
    )
    old = plan.acc
    new_acc = memref.AllocOp([], [], acc_type)
    new_acc.memref.name_hint = "fragments"
    old.parent_block().insert_op_before(new_acc, old)  # pyright: ignore
    acc = new_acc.memref
    for p in plan.init:
        _rewrite_init(plan, p, acc)
    for c in plan.compute:
        _rewrite_compute(plan, c, acc)
    for p in plan.writeback:
        _rewrite_writeback(plan, p, acc)
    for use in list(old.results[0].uses):
        _erase(use.operation)
    _erase(old)


def _pad_tiles(plan: MmaPlan) -> None:
    """Grow each tile to its padded shape and zero the k padding once per block."""
    grid_block = plan.analysis.grid.op.body.block
    for buffer, shape in plan.pads.items():
        t = buffer.type
        assert isinstance(t, MemRefType)
        old_shape = list(t.get_shape())
        if shape == old_shape:
            continue
        alloc = buffer.owner
        assert isinstance(alloc, memref.AllocOp)
        new_type = gpu.in_memory_space(
            MemRefType(t.get_element_type(), shape), gpu.WORKGROUP_ADDRESS_SPACE
        )
        new = memref.AllocOp([], [], new_type)
        new.memref.name_hint = buffer.name_hint
        grid_block.insert_op_before(new, alloc)
        buffer.replace_all_uses_with(new.memref)
        grid_block.erase_op(alloc)
        operand = next(
            o for c in plan.compute for o in (c.a, c.b) if o.buffer is buffer
        )
        operand.buffer = new.memref
        for c in plan.compute:
            for o in (c.a, c.b):
                if o.buffer is buffer:
                    o.buffer = new.memref
        d = operand.channel_dim
        if shape[d] > old_shape[d]:
            _zero_fill(new.memref, old_shape, shape, d, grid_block)


def _zero_fill(
    buffer: SSAValue, old: list[int], new: list[int], d: int, grid_block: Block
) -> None:
    """A block band zeroing `buffer` where dimension `d` is past `old[d]`."""
    extents = [*new[:d], new[d] - old[d], *new[d + 1 :]]
    body = Block(arg_types=[IndexType()] * len(new))
    t = buffer.type
    assert isinstance(t, MemRefType)
    zero = arith.ConstantOp(FloatAttr(0.0, t.get_element_type()))  # pyright: ignore
    indices = list(body.args)
    shift = AffineMap(
        len(new),
        0,
        tuple(
            AffineExpr.dimension(k) + (old[d] if k == d else 0) for k in range(len(new))
        ),
    )
    store = affine.StoreOp(zero.result, buffer, indices, shift)
    body.add_ops([zero, store, affine.YieldOp()])
    band = affine.ParallelOp.from_extents(extents, body)
    band.attributes[MAPPING] = StringAttr(BLOCK)
    # Right after the allocations, before anything reads the tile.
    anchor = next(
        o
        for o in grid_block.ops
        if not isinstance(o, memref.AllocOp | arith.ConstantOp)
    )
    grid_block.insert_op_before(band, anchor)


def _warp_band(
    plan: MmaPlan, like: affine.ParallelOp
) -> tuple[_Builder, dict[str, SSAValue]]:
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
    b = _Builder(body)
    d0 = AffineExpr.dimension(0)
    wn = plan.warps[1]
    ids = {
        "lane": b.apply(d0 % WARP, [tx], "lane"),
        "wm": b.apply((d0 // WARP) // wn if wn > 1 else d0 // WARP, [tx], "wm"),
        "wn": b.apply((d0 // WARP) % wn, [tx], "wn"),
    }
    return b, ids


def _rewrite_init(plan: MmaPlan, phase: Band, acc: SSAValue) -> None:
    b, _ = _warp_band(plan, phase.op)
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
    _erase(phase.op)


def _pixel_values(
    plan: MmaPlan, b: _Builder, m: AffineExpr, operands: list[SSAValue], band: Band
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
            _iv(band, d, idx, len(operands)), [*operands, *_lower(band, d)]
        )
    return values


def _iv(band: Band, d: int, idx: AffineExpr, n: int) -> AffineExpr:
    dim = band.dims[d]
    if dim.lower is not None:
        return idx * dim.step + dim.lower
    return idx * dim.step + AffineExpr.dimension(n)


def _lower(band: Band, d: int) -> list[SSAValue]:
    if band.dims[d].lower is not None:
        return []
    raise PassError(band.op, "the MMA rewrite needs constant lower bounds in the band")


def _constant_ivs(plan: MmaPlan, band: Band, b: _Builder) -> dict[int, SSAValue]:
    """The band's dimensions of one iteration (neither M nor N), as constants."""
    values = {}
    for d, dim in enumerate(band.dims):
        if d in plan.m_dims or d == plan.n_dim:
            continue
        c = b.add(arith.ConstantOp(IntegerAttr(dim.lower or 0, IndexType())))
        values[d] = c.results[0]
    return values


def _indices(
    load: affine.LoadOp, values: dict[SSAValue, SSAValue], b: _Builder
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


def _symbolic(b: _Builder, m: AffineMap, e: AffineExpr, operands) -> SSAValue:
    op = affine.ApplyOp(operands, AffineMap(m.num_dims, m.num_symbols, (e,)))
    return b.add(op).results[0]


def _rewrite_compute(plan: MmaPlan, c: ComputeBand, acc: SSAValue) -> None:
    band = c.band
    b, ids = _warp_band(plan, band.op)
    lane, wm, wn = ids["lane"], ids["wm"], ids["wn"]
    fixed = _constant_ivs(plan, band, b)
    # the taps' loops, as they were
    site = b
    tap_values: dict[SSAValue, SSAValue] = {}
    sites = [b]
    for lp in c.taps:
        clone = lp.clone_without_regions()
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = lp.induction_variable.name_hint
        clone.regions[0].add_block(body)
        site.add(clone)
        tap_values[lp.induction_variable] = body.args[0]
        site = _Builder(body)
        sites.append(site)
    kc = site.loop(plan.k_padded // K_STEP, "kc")
    mt = kc.loop(plan.mt, "mt")
    nt = mt.loop(plan.nt, "nt")
    k, m_t, n_t = kc.block.args[0], mt.block.args[0], nt.block.args[0]
    inner = nt
    d = AffineExpr.dimension
    ivs = band.op.induction_variables
    base = {ivs[dd]: v for dd, v in fixed.items()}

    # A: rows are pixels (clamped to the block's), 16-byte rows along k
    row = (d(0) % 8) + ((d(0) // 8) % 2) * 8
    m_expr = d(1) * (16 * plan.mt) + d(2) * 16 + row
    rows = 16 * plan.mt * plan.warps[0]
    m_clamped = (
        inner.apply(m_expr, [lane, wm, m_t])
        if rows <= plan.block_m
        else _min(inner, m_expr, plan.block_m - 1, [lane, wm, m_t])
    )
    pixel = _pixel_values(plan, inner, d(0), [m_clamped], band)
    k_a = inner.apply(d(1) * K_STEP + (d(0) // 16) * 8, [lane, k], "ka")
    a_values = {**base, **tap_values, c.channel.induction_variable: k_a}
    a_values |= {ivs[dd]: v for dd, v in pixel.items()}
    a_frag = inner.add(
        nvgpu.LdMatrixOp(c.a.buffer, _indices(c.a.load, a_values, inner), 4)
    ).results[0]

    # B: eight output channels a fragment
    n_iv = ivs[plan.n_dim]
    if c.b.k_contiguous:
        n_expr = d(1) * (8 * plan.nt) + d(2) * 8 + d(0) % 8
        if 8 * plan.nt * plan.warps[1] <= plan.block_n:
            n_val = inner.apply(n_expr, [lane, wn, n_t])
        else:
            n_val = _min(inner, n_expr, plan.block_n - 1, [lane, wn, n_t])
        k_b = inner.apply(d(1) * K_STEP + ((d(0) // 8) % 2) * 8, [lane, k], "kb")
    else:
        # eight consecutive output channels a row: the row of a warp past the
        # block's channels reads the tile's last eight (its results are not stored)
        width = c.b.buffer.type.get_shape()[-1]  # pyright: ignore
        n_expr = d(1) * (8 * plan.nt) + d(2) * 8
        if 8 * plan.nt * plan.warps[1] <= width:
            n_val = inner.apply(n_expr, [lane, wn, n_t])
        else:
            n_val = _min(inner, n_expr, width - 8, [lane, wn, n_t])
        k_b = inner.apply(d(1) * K_STEP + d(0) % 16, [lane, k], "kb")
    n_iv_val = inner.apply(_iv(band, plan.n_dim, d(0), 1), [n_val])
    b_values = {**base, **tap_values, c.channel.induction_variable: k_b, n_iv: n_iv_val}
    b_frag = inner.add(
        nvgpu.LdMatrixOp(
            c.b.buffer,
            _indices(c.b.load, b_values, inner),
            2,
            transpose=not c.b.k_contiguous,
        )
    ).results[0]

    # C from the lane's registers, D back to them
    scalar_zero = inner.add(arith.ConstantOp(FloatAttr(0.0, f32))).results[0]
    vec = inner.add(vector.BroadcastOp(scalar_zero, VectorType(f32, [2, 2]))).results[0]
    for e in range(4):
        ce = inner.add(arith.ConstantOp(IntegerAttr(e, IndexType()))).results[0]
        x = inner.add(affine.LoadOp(acc, [m_t, n_t, ce])).results[0]
        vec = inner.add(vector.InsertOp(x, vec, [e // 2, e % 2])).results[0]
    mma = inner.add(nvgpu.MmaSyncOp(a_frag, b_frag, vec, plan.kind.shape)).results[0]
    for e in range(4):
        ce = inner.add(arith.ConstantOp(IntegerAttr(e, IndexType()))).results[0]
        x = inner.add(vector.ExtractOp(mma, [e // 2, e % 2], f32)).results[0]
        inner.add(affine.StoreOp(x, acc, [m_t, n_t, ce]))
    for x in (nt, mt, kc, *reversed(sites)):
        x.close()
    _erase(band.op)


def _min(b: _Builder, e: AffineExpr, bound: int, operands: list[SSAValue]) -> SSAValue:
    m = AffineMap(len(operands), 0, (e, AffineExpr.constant(bound)))
    return b.add(affine.MinOp(operands, m)).results[0]


def _rewrite_writeback(plan: MmaPlan, phase: Band, acc: SSAValue) -> None:
    b, ids = _warp_band(plan, phase.op)
    lane, wm, wn = ids["lane"], ids["wm"], ids["wn"]
    fixed = _constant_ivs(plan, phase, b)
    mt = b.loop(plan.mt, "mt")
    nt = mt.loop(plan.nt, "nt")
    e_loop = nt.loop(4, "e")
    inner = e_loop
    m_t, n_t, e = mt.block.args[0], nt.block.args[0], e_loop.block.args[0]
    d = AffineExpr.dimension
    m = inner.apply(
        d(1) * (16 * plan.mt) + d(2) * 16 + d(0) // 4 + (d(3) // 2) * 8,
        [lane, wm, m_t, e],
        "m",
    )
    n = inner.apply(
        d(1) * (8 * plan.nt) + d(2) * 8 + (d(0) % 4) * 2 + d(3) % 2,
        [lane, wn, n_t, e],
        "n",
    )
    pixel = _pixel_values(plan, inner, d(0), [m], phase)
    ivs = phase.op.induction_variables
    values = {ivs[dd]: v for dd, v in (fixed | pixel).items()}
    values[ivs[plan.n_dim]] = inner.apply(_iv(phase, plan.n_dim, d(0), 1), [n])

    # The guard: a real pixel and channel of the block, within a partial tile.
    operands: list[SSAValue] = [m, n]
    constraints = [
        _ge0(AffineExpr.constant(plan.block_m - 1) - d(0)),
        _ge0(AffineExpr.constant(plan.block_n - 1) - d(1)),
    ]
    bound_operands = list(phase.op.upper_bound_operands)
    for dd, dim in enumerate(phase.dims):
        for bound in dim.guards:
            index = []
            for v in (values[ivs[dd]], *bound_operands):
                if v not in operands:
                    operands.append(v)
                index.append(AffineExpr.dimension(operands.index(v)))
            constraints.append(
                _ge0(bound.replace_dims_and_symbols(index[1:], []) - index[0] - 1)
            )
    guarded = Block()
    mapping: dict[SSAValue, SSAValue] = dict(values)
    body_ops = [o for o in phase.op.body.block.ops if not isinstance(o, affine.YieldOp)]
    for o in body_ops:
        if isinstance(o, affine.LoadOp) and o.memref is plan.acc.results[0]:
            load = affine.LoadOp(acc, [m_t, n_t, e])
            guarded.add_op(load)
            mapping[o.result] = load.result
            continue
        guarded.add_op(o.clone(mapping))
    guarded.add_op(affine.YieldOp())
    n_ops = len(operands)
    condition = AffineSet(
        n_ops,
        0,
        tuple(
            AffineConstraintExpr(c.kind, c.lhs.simplify(n_ops, 0), c.rhs)
            for c in constraints
        ),
    )
    inner.add(affine.IfOp(condition, operands, guarded, Block([affine.YieldOp()])))
    for x in (e_loop, nt, mt, b):
        x.close()
    _erase(phase.op)


def _ge0(e: AffineExpr) -> AffineConstraintExpr:
    return AffineConstraintExpr(AffineConstraintKind.ge, e, AffineExpr.constant(0))


def _erase(op: Operation) -> None:
    if op.parent is not None:
        op.detach()
    op.erase()


__all__ = ["MmaPlan", "plan_mma", "rewrite_mma"]
