"""The `affinec-mma-sync` pass's analysis: the implicit GEMM a promoted block's
compute band is, read off the grid band (`plan_mma`), into an `MmaPlan`: the
accumulator's bands (zeroing, accumulation, write-back), the shared tiles the
compute band reads as the MMA's A and B operands and how (`Operand`), the M and N
dimensions, the warp tile, the MMA kind (f16, bf16, tf32) and the tiles' padded
shapes. Everything the rewrite (`affinec.transforms.gpu.mma`) needs is checked here;
what is not as it needs is a `PassError` at the op at fault.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, mapping_of
from affinec.dialects.nvvm_target import chip_of
from affinec.hardware.chips import MMA_SHAPES, WARP_SIZE
from affinec.ir.affine_exprs import linear_form
from affinec.transforms.affine.analysis import compose_map, is_defined_inside
from affinec.transforms.gpu.bands import Band, GridAnalysis, is_private, is_shared

WARP = WARP_SIZE
K_STEP = MMA_SHAPES["f16"][2]
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
    channel_alone: bool = True
    """The channel loop alone indexes its dimension (else next to other terms, as in
    a tile collapsed by affinec-coalesce-reduction)."""


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
    unroll_taps: bool = False
    """Unroll the taps' loops around the k chunks (`AffinecMmaSync.unroll_taps`)."""
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


def plan_mma(
    analysis: GridAnalysis,
    warps: tuple[int, int],
    tf32: bool = False,
    *,
    unroll_taps: bool = False,
) -> MmaPlan:
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
    _check_accumulator_accesses(acc.results[0])
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
    kind = _kind(first.a.load, element, tf32)
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
    most = chip_of(grid).max_threads_per_block // WARP
    if wm < 1 or wn < 1 or wm * wn > most:
        raise PassError(grid, f"warps {wm}x{wn}: between 1 and {most} warps in a block")
    block_m = math.prod(band.extents[d] for d in m_dims)
    block_n = band.extents[n_dims[0]]
    mt = max(1, -(-block_m // (kind.m * wm)))
    nt = max(1, -(-block_n // (kind.n * wn)))
    if mt * nt > 32:
        raise PassError(
            band.op,
            f"a warp tile of {mt}x{nt} MMAs ({mt * nt * 4} accumulators a lane): use "
            "more warps or a smaller block tile",
        )
    c_extent = _extent(first.channel)
    k_padded = -(-c_extent // kind.k) * kind.k
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
        unroll_taps,
    )
    for c in computes:
        if c.band.signature != first.band.signature:
            raise PassError(c.band.op, "the compute bands differ in shape")
        for operand in (c.a, c.b):
            _check_row_alignment(operand, c.channel.induction_variable, kind)
            plan.pads[operand.buffer] = _padded_shape(operand, c_extent, k_padded)
    return plan


def _check_accumulator_accesses(acc: SSAValue) -> None:
    """Refuse an op other than `affine.load` and `affine.store` on the accumulator:
    the rewrite moves the accumulator into the lanes' registers and rewrites
    exactly those (a padded load of it, say, would be left reading a buffer that
    is gone)."""
    for use in acc.uses:
        user = use.operation
        if isinstance(user, affine.LoadOp | affine.StoreOp) and user.memref is acc:
            continue
        raise PassError(
            user,
            "uses the accumulator: the MMA rewrite takes it read by affine.load and "
            "written by affine.store only",
        )


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


def _kind(at: Operation, element, tf32: bool) -> nvgpu.MmaKind:
    if isinstance(element, Float32Type) and tf32:
        return nvgpu.MmaKind(16, 8, 8, "tf32")
    if isinstance(element, Float16Type):
        return nvgpu.MmaKind(16, 8, 16, "f16")
    if isinstance(element, BFloat16Type):
        return nvgpu.MmaKind(16, 8, 16, "bf16")
    raise PassError(
        at,
        f"tensor cores take f16 or bf16 operands here, got {element} (f32 takes them "
        "with tf32=true, rounding the operands to tf32; else keep the SIMT route)",
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
    for iv, dim in zip(op.induction_variables, phase.dims, strict=True):
        if dim.extent > 1 and all(_reads(f, iv) for f in factors):
            raise PassError(
                op,
                f"%{iv.name_hint or 'a band variable'} indexes both tiles (a grouped "
                "convolution's group): the tensor cores take no such dimension yet",
            )
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
    """The loop variable that alone indexes a dimension of both tiles; else the
    innermost that indexes the input tile's innermost dimension with unit stride
    next to the pixels' terms (`ow * 8 + %sc` in a tile collapsed by
    affinec-coalesce-reduction) and a dimension of the filter's."""
    for iv in reversed(loops):
        if all(_alone_dim(f, iv) is not None for f in factors):
            return iv
    a, b = factors
    rank = a.memref.type.get_num_dims()  # pyright: ignore
    for iv in reversed(loops):
        if _k_dim(a, iv) == rank - 1 and _k_dim(b, iv) is not None:
            return iv
    raise PassError(
        factors[0],
        "no reduction loop indexes both tiles with unit stride: there is no k for "
        "the MMA",
    )


def _alone_dim(load: affine.LoadOp, iv: SSAValue) -> int | None:
    """The dimension of `load`'s tile that `iv` alone indexes, if any."""
    if iv not in load.indices:
        return None
    alone = AffineExpr.dimension(list(load.indices).index(iv))
    for d, e in enumerate(load.map.data.results):
        if e == alone:
            return d
    return None


def _k_dim(load: affine.LoadOp, iv: SSAValue) -> int | None:
    """The dimension of `load`'s tile that `iv` indexes with unit stride (alone, or
    plus other variables' terms), `iv` indexing no other; None if there is none."""
    if iv not in load.indices:
        return None
    m = load.map.data
    position = list(load.indices).index(iv)
    alone = AffineExpr.dimension(position)
    found = None
    for d, e in enumerate(m.results):
        if e == alone:
            return d
        if alone not in list(e.dfs()):
            continue
        form = linear_form(e, m.num_dims, m.num_symbols)
        if found is not None or form is None or form[0][position] != 1:
            return None
        found = d
    return found


def _operand(
    load: affine.LoadOp, channel: SSAValue, band_ivs: set, transposable: bool
) -> Operand:
    t = load.memref.type
    assert isinstance(t, MemRefType)
    rank = t.get_num_dims()
    d = _k_dim(load, channel)
    assert d is not None
    alone = load.map.data.results[d] == AffineExpr.dimension(
        list(load.indices).index(channel)
    )
    if d == rank - 1:
        return Operand(load, load.memref, d, True, alone)
    n_alone = any(_alone_dim(load, iv) == rank - 1 for iv in band_ivs)
    if transposable and n_alone:
        return Operand(load, load.memref, d, False, alone)
    raise PassError(
        load,
        "the channels must be the tile's innermost dimension (or, for the filter, "
        "the output channels): run affine-data-copy-generate{reduction-innermost=true}",
    )


def _check_row_alignment(operand: Operand, channel: SSAValue, kind: nvgpu.MmaKind):
    """ldmatrix reads 16-byte rows: where the channels share their dimension with
    other terms (a collapsed tile's `ow * 8 + %sc`), those must keep a row's start
    on 16 bytes."""
    load = operand.load
    m = load.map.data
    e = m.results[operand.channel_dim]
    form = linear_form(e, m.num_dims, m.num_symbols)
    assert form is not None
    position = list(load.indices).index(channel)
    if kind.operands == "tf32" or not operand.k_contiguous:
        return
    t = load.memref.type
    assert isinstance(t, MemRefType)
    per_row = 16 // element_size(t.get_element_type())
    strides = {
        v.name_hint or f"operand {k}": c
        for k, (v, c) in enumerate(zip(load.indices, form[0], strict=True))
        if k != position and c
    }
    if form[2] % per_row or any(c % per_row for c in strides.values()):
        terms = ", ".join(f"{c} elements apart along %{n}" for n, c in strides.items())
        k = channel.name_hint or "the k loop"
        raise PassError(
            load,
            f"k is %{k}, read with unit stride but not alone: its rows start {terms} "
            f"(offset {form[2]}), and ldmatrix needs each on 16 bytes, a multiple of "
            f"{per_row} elements (a coalesced reduction's rows start every stride x "
            "channels; without one, a channel loop of several iterations is k)",
        )


def _padded_shape(operand: Operand, c_extent: int, k_padded: int) -> list[int]:
    """The tile's shape with the channel dimension a whole number of MMA steps (past
    its last row's channels where other terms share the dimension) and the innermost
    a multiple of 8 elements (16-byte aligned ldmatrix rows, and room for a
    transposed row of eight columns)."""
    t = operand.buffer.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    d = operand.channel_dim
    if operand.channel_alone:
        shape[d] = max(shape[d], k_padded)
    else:
        shape[d] += k_padded - c_extent
    shape[-1] = -(-shape[-1] // 8) * 8
    return shape


def fold_group_dimensions(analysis: GridAnalysis) -> bool:
    """A band dimension of one iteration that indexes both tiles of a product (a
    grouped convolution's group, `%g1` in `%input_shared[.., %g1 * 16 + %c1]` and
    `%filter_shared[.., %g1 * 16 + %k1]`) as the constant it is, in those loads:
    the tiles are then indexed as an implicit GEMM's, which the plan reads. Nothing
    else changes (a dimension of one iteration that one tile alone reads, an image
    of the batch, stays as it is). Whether any load changed (if not, `analysis`
    still describes the grid)."""
    changed = False
    for phase in analysis.phases:
        single = {
            iv: dim.lower
            for iv, dim in zip(phase.op.induction_variables, phase.dims, strict=True)
            if dim.extent == 1 and dim.lower is not None
        }
        loads = [
            o
            for o in phase.op.walk()
            if isinstance(o, affine.LoadOp) and is_shared(o.memref)
        ]
        shared = [
            iv for iv in single if len({o.memref for o in loads if iv in o.indices}) > 1
        ]
        subst = {iv: (AffineExpr.constant(single[iv]), []) for iv in shared}
        for load in [o for o in loads if any(v in subst for v in o.indices)]:
            m, operands = compose_map(
                load.map.data, list(load.indices), subst, fold_producers=False
            )
            new = affine.LoadOp(load.memref, operands, m)
            new.result.name_hint = load.result.name_hint
            block = load.parent_block()
            assert block is not None
            block.insert_op_before(new, load)
            load.result.replace_all_uses_with(new.result)
            block.erase_op(load)
            changed = True
    return changed
