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

The pass's machinery lies in three modules: the analysis (`plan_mma`, the
`MmaPlan`: `affinec.transforms.gpu.mma_plan`), the lanes' fragments of A and B
(ldmatrix, the tf32 loads: `affinec.transforms.gpu.mma_fragments`), and here the
rewrite of the accumulator's bands into warp bands (`rewrite_mma`).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
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
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
)

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, MAPPING, THREAD, UNROLL
from affinec.ir.affine_exprs import ge0, linear_form
from affinec.transforms.affine.analysis import compose_map
from affinec.transforms.gpu.bands import Band
from affinec.transforms.gpu.mma_fragments import (
    Builder,
    Operands,
    band_iv,
    pixel_values,
)
from affinec.transforms.gpu.mma_plan import (
    K_STEP,
    WARP,
    ComputeBand,
    MmaPlan,
    Operand,
    fold_group_dimensions,
    plan_mma,
)
from affinec.transforms.gpu.thread_bands import erase_op, partial_tile_guards


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
        erase_op(use.operation)
    erase_op(old)


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
    erase_op(phase.op)


def _constant_ivs(plan: MmaPlan, band: Band, b: Builder) -> dict[int, SSAValue]:
    """The band's dimensions of one iteration (neither M nor N), as constants."""
    values = {}
    for d, dim in enumerate(band.dims):
        if d in plan.m_dims or d == plan.n_dim:
            continue
        c = b.add(arith.ConstantOp(IntegerAttr(dim.lower or 0, IndexType())))
        values[d] = c.results[0]
    return values


def _rewrite_compute(plan: MmaPlan, c: ComputeBand, acc: SSAValue) -> None:
    band = c.band
    _zero_past_channel_bound(plan, c)
    b, ids = _warp_band(plan, band.op)
    lane, wm, wn = ids["lane"], ids["wm"], ids["wn"]
    fixed = _constant_ivs(plan, band, b)
    # the taps' loops, as they were
    site = b
    tap_values: dict[SSAValue, SSAValue] = {}
    sites = [b]
    for lp in c.taps:
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


def _zero_past_channel_bound(plan: MmaPlan, c: ComputeBand) -> None:
    """Zero the tiles' channels past a partial step's end before the MMAs read them.

    The MMAs read a step's whole tile, `k_padded` channels, whatever the channel
    loop's bound. Where that bound is short (`min(32, 48 - %p0 * 32)`: the last step
    of a reduction that the tile does not divide), the channels past it must be
    zeros. At the tensor's edge the copies make them so (they read zero outside the
    tensor); inside the tensor they hold the next channels, which belong to no sum
    of this step (a split reduction's next split). So where the bound is not a
    constant, a band guarded by `bound < extent` zeroes, in both tiles, the channels
    from the bound on of the step's stage, followed by a barrier: it runs in the
    short steps only."""
    loop = c.channel
    lower = loop.lowerBoundMap.data
    upper = loop.upperBoundMap.data
    extent = _extent_of(loop)
    # Results that never cut a step short (the tile's size) leave the one that does.
    cuts = [
        e
        for e in upper.results
        if not (isinstance(e, AffineConstantExpr) and e.value >= extent)
    ]
    if not cuts:
        return
    if len(cuts) != 1 or any(
        not isinstance(e, AffineConstantExpr) for e in lower.results
    ):
        raise PassError(
            loop,
            f"a channel loop bounded by {upper} from {lower}: the tensor cores take "
            "a partial step bounded by one expression, from a constant",
        )
    if lower.results != (AffineExpr.constant(0),) or loop.step.value.data != 1:
        raise PassError(
            loop, "the channel loop must run from 0 by 1 (run affine-loop-normalize)"
        )
    if isinstance(cuts[0], AffineConstantExpr):
        return
    for operand in (c.a, c.b):
        if not operand.channel_alone:
            raise PassError(
                operand.load,
                "a partial step's channels share their tile dimension with other "
                "terms (a coalesced reduction): the MMAs would read channels past "
                "the step's end",
            )
    operands = list(loop.upperBoundOperands)
    n = upper.num_dims
    uniform = [AffineExpr.dimension(k) for k in range(len(operands))]
    end = cuts[0].replace_dims_and_symbols(uniform[:n], uniform[n:])
    guarded = Block()
    for operand in (c.a, c.b):
        t = operand.buffer.type
        assert isinstance(t, MemRefType)
        top = min(t.get_shape()[operand.channel_dim], plan.k_padded)
        zband, pinned = _zero_channels_from(operand, end, operands, top, c.band.op)
        guarded.add_ops([*pinned, zband])
    guarded.add_ops([gpu.BarrierOp(), affine.YieldOp()])
    short = AffineSet(len(operands), 0, (ge0(AffineExpr.constant(extent - 1) - end),))
    site = c.band.op
    block = site.parent_block()
    assert block is not None
    block.insert_op_before(affine.IfOp(short, operands, guarded), site)


def _extent_of(loop: affine.ForOp) -> int:
    from affinec.ir.ranges import value_range

    r = value_range(loop.induction_variable)
    if r is None:
        raise PassError(loop, "the channel loop has no static bound")
    return r[1] + 1


def _zero_channels_from(
    operand: Operand,
    end: AffineExpr,
    end_operands: list[SSAValue],
    top: int,
    band: affine.ParallelOp,
) -> tuple[affine.ParallelOp, list[Operation]]:
    """A block band storing zeros into `operand`'s tile at channels `[end, top)`
    (`end` over `end_operands`) of the step's stage (the tile's dimensions that the
    compute band's load indexes with values from outside the band, taken as the
    load takes them), over the whole extent of its other dimensions; and the ops
    before it that compute the stage's indices."""
    load = operand.load
    t = operand.buffer.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    m = load.map.data
    inner = set(band.walk())

    def inside(v: SSAValue) -> bool:
        owner = v.owner
        if isinstance(owner, Block):
            owner = owner.parent_op()
        return owner in inner

    free = []
    for d in range(len(m.results)):
        if d == operand.channel_dim:
            continue
        ins = [inside(v) for v in _used_operands(load, d)[1]]
        if any(ins) and not all(ins):
            raise PassError(
                load,
                f"dimension {d} of the tile mixes the band's variables with values "
                "from outside it: cannot tell which part of the tile a partial step "
                "reads",
            )
        if any(ins):
            free.append(d)
    extents = [shape[d] for d in free] + [top]
    body = Block(arg_types=[IndexType()] * len(extents))
    z = body.args[-1]
    k = len(end_operands)
    pinned: list[Operation] = []
    at_channel = affine.ApplyOp(
        [*end_operands, z],
        AffineMap(k + 1, 0, (end + AffineExpr.dimension(k),)),
    )
    indices: list[SSAValue] = []
    for d in range(len(shape)):
        if d in free:
            indices.append(body.args[free.index(d)])
        elif d == operand.channel_dim:
            indices.append(at_channel.result)
        else:
            at = _apply_result(load, d)
            pinned.append(at)
            indices.append(at.result)
    zero = arith.ConstantOp(FloatAttr(0.0, t.get_element_type()))  # pyright: ignore
    store = affine.StoreOp(zero.result, operand.buffer, indices)
    body.add_ops([zero, at_channel, store, affine.YieldOp()])
    # the channel dimension runs over [0, top - end): its bound min(top, top - end)
    n = len(extents)
    upper = AffineMap(
        k,
        0,
        tuple(AffineExpr.constant(e) for e in extents[:-1])
        + (AffineExpr.constant(top), AffineExpr.constant(top) - end),
    )
    zband = affine.ParallelOp(
        AffineMap(0, 0, tuple(AffineExpr.constant(0) for _ in extents)),
        [1] * n,
        upper,
        [1] * (n - 1) + [2],
        body,
        upper_operands=end_operands,
    )
    zband.attributes[MAPPING] = StringAttr(BLOCK)
    return zband, pinned


def _used_operands(load: affine.LoadOp, d: int) -> tuple[list[int], list[SSAValue]]:
    """The positions and values of the load's indices that its `d`-th result uses."""
    m = load.map.data
    terms = list(m.results[d].dfs())
    variables = [AffineExpr.dimension(k) for k in range(m.num_dims)] + [
        AffineExpr.symbol(k) for k in range(m.num_symbols)
    ]
    positions = [k for k, v in enumerate(variables) if v in terms]
    return positions, [load.indices[k] for k in positions]


def _apply_result(load: affine.LoadOp, d: int) -> affine.ApplyOp:
    """An `affine.apply` of the load's `d`-th index, over the values it uses only."""
    m = load.map.data
    positions, values = _used_operands(load, d)
    renamed = [
        AffineExpr.dimension(positions.index(k))
        if k in positions
        else AffineExpr.constant(0)
        for k in range(m.num_dims + m.num_symbols)
    ]
    e = m.results[d].replace_dims_and_symbols(
        renamed[: m.num_dims], renamed[m.num_dims :]
    )
    return affine.ApplyOp(values, AffineMap(len(values), 0, (e,)))


def _rewrite_writeback(plan: MmaPlan, phase: Band, acc: SSAValue) -> None:
    """Each lane stores its accumulator elements through the band's epilogue: in
    pairs of adjacent output channels (c0 c1, c2 c3 of a fragment) as one
    `affine.vector_store` of two where the output's channels are its innermost,
    contiguous dimension (`_vector_store`: the output, or the shared tile
    `affinec-stage-output` made of it), else one by one."""
    body = [o for o in phase.op.body.block.ops if not isinstance(o, affine.YieldOp)]
    store = _vector_store(plan, phase, body, 2)
    element, loops = _fragment_band(plan, phase, acc, body)
    nt = loops[0]
    if store is None:
        inner = nt.loop(4, "e")
        inner.add(element.guarded(inner, inner.block.args[0]))
    else:
        inner = nt.loop(2, "half")
        first, second = _pair_elements(inner)
        otherwise = None
        if plan.block_n % 2 or phase.dims[plan.n_dim].guards:
            # a pair cut in two by the block's last channel: its first alone
            scalar = Builder(Block())
            scalar.add(element.guarded(scalar, first))
            scalar.close()
            otherwise = scalar.block
        target = _Element.to_output(store)
        pair = element.pair(inner, first, second, store, target, otherwise=otherwise)
        inner.add(pair)
    for x in (inner, *loops):
        x.close()
    erase_op(phase.op)


def _fragment_band(
    plan: MmaPlan, phase: Band, acc: SSAValue, body: list[Operation]
) -> tuple[_Element, list[Builder]]:
    """A warp band before `phase` with loops over the lane's fragments (the MMA
    tiles mt, nt), and the element of the epilogue they address; the builders from
    the innermost loop out, to close."""
    b, ids = _warp_band(plan, phase.op)
    fixed = _constant_ivs(plan, phase, b)
    mt = b.loop(plan.mt, "mt")
    nt = mt.loop(plan.nt, "nt")
    warp = (ids["lane"], ids["wm"], ids["wn"])
    fragment = (mt.block.args[0], nt.block.args[0])
    return _Element(plan, phase, acc, warp, fragment, fixed, body), [nt, mt, b]


def _pair_elements(half: Builder) -> tuple[SSAValue, SSAValue]:
    """The accumulator elements (of a fragment's four) of pair `half`."""
    h, d = half.block.args[0], AffineExpr.dimension
    return half.apply(d(0) * 2, [h], "e"), half.apply(d(0) * 2 + 1, [h], "e")


def _vector_store(
    plan: MmaPlan, phase: Band, body: list[Operation], width: int
) -> affine.StoreOp | None:
    """The epilogue's one store (to the output, or to the shared tile it is staged
    in), when `width` consecutive channels from a
    multiple of `width` are consecutive elements of it, aligned to `width` elements:
    the channel dimension unit-stride and the output's innermost, every other term
    a multiple of `width` (so are the channel band's lower bound and the innermost
    extent), no index computed in the epilogue."""
    stores = [o for o in body if isinstance(o, affine.StoreOp)]
    if len(stores) != 1 or any(isinstance(o, affine.IfOp | affine.ForOp) for o in body):
        return None
    (store,) = stores
    t = store.memref.type
    assert isinstance(t, MemRefType)
    element = t.get_element_type()
    if gpu.memory_space(t) not in (0, gpu.WORKGROUP_ADDRESS_SPACE) or not isinstance(
        element, Float16Type | BFloat16Type | Float32Type
    ):
        return None
    dim = phase.dims[plan.n_dim]
    n_iv = phase.op.induction_variables[plan.n_dim]
    m = store.map.data
    forms = [linear_form(e, m.num_dims, m.num_symbols) for e in m.results]
    if m.num_symbols or any(f is None for f in forms) or n_iv not in store.indices:
        return None
    if any(_defined_in(v, body) for v in store.indices):
        return None

    def coefficient(form, v: SSAValue) -> int:
        return sum(c for c, x in zip(form[0], store.indices, strict=True) if x is v)

    *outer, last = forms
    others = [c for c, x in zip(last[0], store.indices, strict=True) if x is not n_iv]
    if (
        coefficient(last, n_iv) != 1
        or any(coefficient(f, n_iv) for f in outer)
        or any(c % width for c in others)
        or last[2] % width
        or t.get_shape()[-1] % width
        or dim.step != 1
        or dim.lower is None
        or dim.lower % width
    ):
        return None
    return store


def _defined_in(v: SSAValue, body: list[Operation]) -> bool:
    owner = v.owner
    return isinstance(owner, Operation) and any(
        owner is o or o.is_ancestor(owner) for o in body
    )


class _Element:
    """One accumulator element of a lane through the epilogue: its pixel and
    channel, the guard that it is a real output of the block, and the epilogue's
    ops on it."""

    def __init__(
        self,
        plan: MmaPlan,
        phase: Band,
        acc: SSAValue,
        warp: tuple[SSAValue, SSAValue, SSAValue],
        fragment: tuple[SSAValue, SSAValue],
        fixed: dict[int, SSAValue],
        body: list[Operation],
    ) -> None:
        self.plan, self.phase, self.acc = plan, phase, acc
        self.lane, self.wm, self.wn = warp
        self.m_t, self.n_t = fragment
        self.fixed, self.body = fixed, body

    def _place(
        self, b: Builder, e: SSAValue
    ) -> tuple[dict[SSAValue, SSAValue], list[SSAValue], list[AffineConstraintExpr]]:
        """`_place_at` the lane's element `e` of its fragment."""
        plan, d = self.plan, AffineExpr.dimension
        tm, tn = plan.kind.m, plan.kind.n
        # the accumulator's layout (`mma_layouts.c_element`): lane/4 and lane%4 * 2
        m = b.apply(
            d(1) * (tm * plan.mt) + d(2) * tm + d(0) // 4 + (d(3) // 2) * 8,
            [self.lane, self.wm, self.m_t, e],
            "m",
        )
        n = b.apply(
            d(1) * (tn * plan.nt) + d(2) * tn + (d(0) % 4) * 2 + d(3) % 2,
            [self.lane, self.wn, self.n_t, e],
            "n",
        )
        return _place_at(self.plan, self.phase, self.fixed, b, m, n)

    def _epilogue(
        self, into: Block, e: SSAValue, values: dict[SSAValue, SSAValue], skip=None
    ) -> dict[SSAValue, SSAValue]:
        """The epilogue's ops for element `e` appended to `into` (but `skip`)."""
        mapping: dict[SSAValue, SSAValue] = dict(values)
        for o in self.body:
            if o is skip:
                continue
            if isinstance(o, affine.LoadOp) and o.memref is self.plan.acc.results[0]:
                load = affine.LoadOp(self.acc, [self.m_t, self.n_t, e])
                into.add_op(load)
                mapping[o.result] = load.result
                continue
            into.add_op(o.clone(mapping))
        return mapping

    def guarded(self, b: Builder, e: SSAValue) -> affine.IfOp:
        """Element `e` through the epilogue, stored where its guard holds."""
        values, operands, constraints = self._place(b, e)
        guarded = Block()
        self._epilogue(guarded, e, values)
        guarded.add_op(affine.YieldOp())
        return affine.IfOp(_condition(constraints, operands), operands, guarded)

    @staticmethod
    def to_output(store: affine.StoreOp) -> PairTarget:
        """Pairs stored where the epilogue's `store` stores the first of them."""

        def target(packed, first_values, operands) -> Operation:
            indices = [first_values.get(v, v) for v in store.indices]
            m = store.map.data
            if gpu.memory_space(store.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE:
                # A staged tile's row is the pixels linearized, which the composed
                # map folds back into the lane's pixel m (no division left).
                m, indices = compose_map(
                    m, indices, _one_level(indices), fold_producers=False
                )
            return affine.VectorStoreOp(packed, store.memref, indices, m)

        return target

    def pair(
        self,
        b: Builder,
        first: SSAValue,
        second: SSAValue,
        store: affine.StoreOp,
        target: PairTarget,
        otherwise: Block | None = None,
    ) -> affine.IfOp:
        """Elements `first` and `second` (adjacent channels) through the epilogue but
        its `store`, stored together by `target` where the second's guard holds (then
        the first's does); else `otherwise`."""
        values, operands, constraints = self._place(b, second)
        guarded = Block()
        t = store.value.type
        vector_type = VectorType(t, [2])
        zero = arith.ConstantOp(FloatAttr(0.0, t))  # pyright: ignore[reportArgumentType]
        vec = vector.BroadcastOp(zero.result, vector_type)
        guarded.add_ops([zero, vec])
        packed = vec.results[0]
        first_values = None
        for k, e in enumerate((first, second)):
            at = values
            if k == 0:
                at = dict(values)
                n_iv = self.phase.op.induction_variables[self.plan.n_dim]
                d = AffineExpr.dimension
                lower = affine.ApplyOp([values[n_iv]], AffineMap(1, 0, (d(0) - 1,)))
                guarded.add_op(lower)
                at[n_iv] = lower.result
                first_values = at
            mapping = self._epilogue(guarded, e, at, skip=store)
            insert = vector.InsertOp(mapping.get(store.value, store.value), packed, [k])
            guarded.add_op(insert)
            packed = insert.results[0]
        assert first_values is not None
        guarded.add_op(target(packed, first_values, operands))
        guarded.add_op(affine.YieldOp())
        return affine.IfOp(
            _condition(constraints, operands), operands, guarded, otherwise
        )


def _one_level(values: list[SSAValue]) -> dict[SSAValue, tuple[AffineExpr, list]]:
    """Each of `values` an `affine.apply` makes, as its expression over its operands
    (for `compose_map`: one level, so shared values such as the pixel stay shared)."""
    subst = {}
    for v in values:
        op = v.owner
        if isinstance(op, affine.ApplyOp) and not op.map.data.num_symbols:
            subst[v] = (op.map.data.results[0], list(op.mapOperands))
    return subst


PairTarget = Callable[[SSAValue, dict[SSAValue, SSAValue], list[SSAValue]], Operation]
"""Builds the store of a lane's packed pair: (the pair, the band's variables at the
first element, the guard's operands: the second's pixel and channel first)."""


def _place_at(
    plan: MmaPlan,
    phase: Band,
    fixed: dict[int, SSAValue],
    b: Builder,
    m: SSAValue,
    n: SSAValue,
) -> tuple[dict[SSAValue, SSAValue], list[SSAValue], list[AffineConstraintExpr]]:
    """The band's variables at the block's pixel `m` and channel `n` (`fixed`: its
    other dimensions), and the operands and constraints of the guard that they are
    a real output of the block (operands `m` and `n` first)."""
    d = AffineExpr.dimension
    pixel = pixel_values(plan, b, d(0), [m], phase)
    ivs = phase.op.induction_variables
    values = {ivs[dd]: v for dd, v in (fixed | pixel).items()}
    values[ivs[plan.n_dim]] = b.apply(band_iv(phase, plan.n_dim, d(0), 1), [n])
    # a real pixel and channel of the block, within a partial tile
    operands: list[SSAValue] = [m, n]
    constraints = [
        ge0(AffineExpr.constant(plan.block_m - 1) - d(0)),
        ge0(AffineExpr.constant(plan.block_n - 1) - d(1)),
    ]
    constraints += partial_tile_guards(
        ((values[iv], dim) for iv, dim in zip(ivs, phase.dims, strict=False)),
        phase.op.upper_bound_operands,
        operands,
    )
    return values, operands, constraints


def _condition(
    constraints: list[AffineConstraintExpr], operands: list[SSAValue]
) -> AffineSet:
    n = len(operands)
    return AffineSet(
        n,
        0,
        tuple(
            AffineConstraintExpr(c.kind, c.lhs.simplify(n, 0), c.rhs)
            for c in constraints
        ),
    )


__all__ = [
    "K_STEP",
    "WARP",
    "ComputeBand",
    "MmaPlan",
    "Operand",
    "fold_group_dimensions",
    "plan_mma",
    "rewrite_mma",
]
