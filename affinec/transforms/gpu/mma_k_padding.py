"""The channels of the shared tiles that the `affinec-mma-sync` MMAs read but no sum
of theirs has, made zeros: the k padding (`pad_tiles`: a tile whose channel step
does not fill the MMA's k grown to its padded shape, the padding zeroed once per
block by a band, since the copies never write it), and the channels past a partial
step's end (`zero_past_channel_bound`: the last step of a split reduction that the
tile does not divide, where the copies brought the next split's channels; zeroed by
a band guarded so that only the short steps run it).
"""

from __future__ import annotations

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, IndexType, MemRefType, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap, AffineSet

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import BLOCK, MAPPING
from affinec.ir.affine_exprs import ge0
from affinec.transforms.gpu.mma_plan import ComputeBand, MmaPlan, Operand


def pad_tiles(plan: MmaPlan) -> None:
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


def zero_past_channel_bound(plan: MmaPlan, c: ComputeBand) -> None:
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
