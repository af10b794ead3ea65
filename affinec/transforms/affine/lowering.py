"""Affine ops as scf, arith and memref, op by op: the work behind `lower-affine`.

Loops become `scf.for` / `scf.parallel` (reductions as `scf.reduce`), conditions
`scf.if`, loads and stores `memref` accesses at indices that `IndexBuilder`
(`index_arith`) computes with affine semantics; ops with no lowering here are
refused by `check_lowerable` with a located reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
)

from affinec.base.diagnostics import PassError
from affinec.base.semi_affine import divide, fits_index, multiply
from affinec.dialects import affine
from affinec.dialects.affine import REDUCTION_IDENTITY
from affinec.dialects.affine_syntax import format_expr
from affinec.dialects.affinec import IN_BOUNDS, PaddedLoadOp, mapping_of
from affinec.ir.affine_exprs import Interval, grouped
from affinec.ir.comparisons import cmpi
from affinec.transforms.affine.index_arith import IndexBuilder, IndexConstants

# --------------------------------------------------------------------------------------
# Op by op
# --------------------------------------------------------------------------------------

_COMBINE: dict[str, type[Operation]] = {
    "addf": arith.AddfOp,
    "mulf": arith.MulfOp,
    "maximumf": arith.MaximumfOp,
    "minimumf": arith.MinimumfOp,
    "addi": arith.AddiOp,
    "muli": arith.MuliOp,
}


_DIVISIONS = (
    AffineBinaryOpKind.FloorDiv,
    AffineBinaryOpKind.CeilDiv,
    AffineBinaryOpKind.Mod,
)

NOT_LOWERED = (affine.DmaStartOp, affine.DmaWaitOp)
"""Affine ops MLIR's lower-affine turns into memref ops that affinec's pipeline
does not use (`memref.dma_start`, `memref.dma_wait`)."""


def check_lowerable(op: Operation) -> None:
    """Refuse (before rewriting) what `lower_op` cannot lower."""
    maps: list[AffineMap] = []
    match op:
        case affine.ApplyOp() | affine.MinOp() | affine.MaxOp():
            maps = [op.map.data]
        case (
            affine.LoadOp()
            | affine.StoreOp()
            | PaddedLoadOp()
            | affine.VectorLoadOp()
            | affine.VectorStoreOp()
            | affine.PrefetchOp()
        ):
            maps = [op.map.data]
        case affine.ForOp():
            maps = [op.lowerBoundMap.data, op.upperBoundMap.data]
        case affine.ParallelOp():
            maps = [op.lowerBoundsMap.data, op.upperBoundsMap.data]
        case affine.IfOp():
            s = op.condition.data
            maps = [
                AffineMap(
                    s.num_dims, s.num_symbols, tuple(c.lhs for c in s.constraints)
                )
            ]
    for m in maps:
        for e in m.results:
            for sub in e.dfs():
                if isinstance(sub, AffineConstantExpr) and not fits_index(sub.value):
                    raise PassError(
                        op,
                        f"cannot lower the constant {sub.value}: it is too large for "
                        "index (64-bit)",
                    )
                if (
                    isinstance(sub, AffineBinaryOpExpr)
                    and sub.kind in _DIVISIONS
                    and isinstance(sub.rhs, AffineConstantExpr)
                    and sub.rhs.value <= 0
                ):
                    raise PassError(
                        op,
                        f"cannot lower '{format_expr(sub)}': division by a "
                        "non-positive constant",
                    )
    if isinstance(op, NOT_LOWERED):
        raise PassError(
            op,
            "is not lowered by affinec's lower-affine (MLIR's lowers it to the memref "
            "dialect's op of the same name, which affinec's pipeline does not use)",
        )
    if isinstance(op, affine.ParallelOp) and (
        unsupported := [k for k in op.reduction_kinds if k not in REDUCTION_IDENTITY]
    ):
        raise PassError(
            op,
            f"reduction '{unsupported[0]}' is not supported by affinec's lower-affine "
            f"(it lowers {', '.join(REDUCTION_IDENTITY)})",
        )
    if isinstance(op, affine.ParallelOp) and (m := mapping_of(op)):
        raise PassError(
            op,
            f"a {m}-mapped affine.parallel must be mapped to the GPU first "
            "(affinec-map-to-gpu)",
        )


def memref_prefetch(op: affine.PrefetchOp, indices: list[SSAValue]) -> Operation:
    """The `memref.prefetch` of `op` at the computed `indices`."""
    from affinec.dialects.memref import PrefetchOp

    return PrefetchOp(
        op.memref,
        indices,
        is_write=bool(op.isWrite.value.data),
        locality=op.localityHint.value.data,
        is_data_cache=bool(op.isDataCache.value.data),
    )


def lower_op(
    op: Operation,
    known: dict[SSAValue, Interval],
    constants: IndexConstants | None = None,
) -> None:
    """Replace the affine op `op` by scf/arith/memref ops (nested ops stay as they
    are); `constants`: see `IndexBuilder` (the ops of a module lowered in the order
    of a walk, each op's parents before it)."""
    em = IndexBuilder(op, known, constants)
    match op:
        case affine.ApplyOp():
            (value,) = em.map_results(op.map.data, op.mapOperands)
            _finish(em, op, [value])
        case affine.MinOp() | affine.MaxOp():
            values = em.map_results(op.map.data, op.mapOperands)
            _finish(em, op, [em.fold(values, isinstance(op, affine.MaxOp))])
        case affine.LoadOp():
            indices = em.map_results(op.map.data, op.indices)
            _finish(em, op, [em.add(memref.LoadOp.get(op.memref, indices))])
        case affine.StoreOp():
            indices = em.map_results(op.map.data, op.indices)
            em.ops.append(memref.StoreOp.get(op.value, op.memref, indices))
            _finish(em, op, [])
        case affine.VectorLoadOp():
            indices = em.map_results(op.map.data, op.indices)
            load = vector.LoadOp(op.memref, indices, op.result.type)
            _finish(em, op, [em.add(load)])
        case affine.VectorStoreOp():
            indices = em.map_results(op.map.data, op.indices)
            em.ops.append(vector.StoreOp(op.value, op.memref, indices))
            _finish(em, op, [])
        case affine.PrefetchOp():
            indices = em.map_results(op.map.data, op.indices)
            em.ops.append(memref_prefetch(op, indices))
            _finish(em, op, [])
        case affine.DelinearizeIndexOp():
            m, operands = delinearization(op)
            _finish(em, op, em.map_results(m, operands))
        case affine.LinearizeIndexOp():
            m, operands = linearization(op)
            _finish(em, op, em.map_results(m, operands))
        case PaddedLoadOp():
            _finish(em, op, [_padded_load(em, op)])
        case affine.ForOp():
            _lower_for(em, op)
        case affine.IfOp():
            _lower_if(em, op)
        case affine.ParallelOp():
            _lower_parallel(em, op)
        case _:
            raise AssertionError(f"not an affine op: {op.name}")


def _basis_exprs(
    basis: Sequence[int | SSAValue], first_symbol: int
) -> tuple[list[AffineExpr], list[SSAValue]]:
    """The basis as expressions: constants, and symbols from `first_symbol` on."""
    exprs: list[AffineExpr] = []
    symbols: list[SSAValue] = []
    for b in basis:
        if isinstance(b, int):
            exprs.append(AffineExpr.constant(b))
        else:
            exprs.append(AffineExpr.symbol(first_symbol + len(symbols)))
            symbols.append(b)
    return exprs, symbols


def _strides(sizes: Sequence[AffineExpr]) -> list[AffineExpr]:
    """Row-major strides of `sizes`: the product of the sizes after each."""
    strides = [AffineExpr.constant(1)]
    for size in reversed(sizes[1:]):
        strides.insert(0, multiply(strides[0], size))
    return strides


def delinearization(op: affine.DelinearizeIndexOp) -> tuple[AffineMap, list[SSAValue]]:
    """The map `(x)[dynamic basis] -> (coordinates)` `op` computes: the outermost
    coordinate `x floordiv stride`, the others `(x floordiv stride) mod size`."""
    sizes, symbols = _basis_exprs(op.basis, 0)
    if len(op.multi_index) == len(sizes) + 1:
        sizes = [AffineExpr.constant(0), *sizes]  # unbounded outermost
    x = AffineExpr.dimension(0)
    results = []
    for k, (size, stride) in enumerate(zip(sizes, _strides(sizes), strict=True)):
        q = divide(AffineBinaryOpKind.FloorDiv, x, stride)
        results.append(q if k == 0 else divide(AffineBinaryOpKind.Mod, q, size))
    return AffineMap(1, len(symbols), tuple(results)), [op.linear_index, *symbols]


def linearization(op: affine.LinearizeIndexOp) -> tuple[AffineMap, list[SSAValue]]:
    """The map `(coordinates)[dynamic basis] -> (sum of coordinate * stride)`."""
    n = len(op.multi_index)
    sizes, symbols = _basis_exprs(op.basis, 0)
    sizes = sizes[len(sizes) - (n - 1) :] if n > 1 else []
    strides = _strides([AffineExpr.constant(0), *sizes])
    total: AffineExpr = AffineExpr.constant(0)
    for k, stride in enumerate(strides):
        total = total + multiply(AffineExpr.dimension(k), stride)
    return AffineMap(n, len(symbols), (total,)), [*op.multi_index, *symbols]


def _finish(em: IndexBuilder, op: Operation, results: Sequence[SSAValue]) -> None:
    em.flush()
    for old, new in zip(op.results, results, strict=True):
        if old.name_hint and not new.name_hint:
            new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    block = op.parent_block()
    assert block is not None
    block.erase_op(op)


def _padded_load(em: IndexBuilder, op: PaddedLoadOp) -> SSAValue:
    t = op.memref.type
    assert isinstance(t, MemRefType)
    indices = em.map_results(op.map.data, op.indices)
    checks: SSAValue | None = None
    for k, (index, size) in enumerate(zip(indices, t.get_shape(), strict=True)):
        r = em.range_of(index)
        if k in op.in_bounds or (r is not None and r[0] >= 0 and r[1] < size):
            continue
        if size < 0:
            raise PassError(
                op,
                f"cannot test index {k} against the dynamic size of {t}: list the "
                f"dimension in {IN_BOUNDS} where it is known to be inside",
            )
        # One unsigned comparison: a negative index is a huge unsigned one.
        test = em.add(cmpi(index, em.index(size), "ult"))
        checks = test if checks is None else em.add(arith.AndIOp(checks, test))
    element = t.get_element_type()
    if checks is None:
        return em.add(memref.LoadOp.get(op.memref, indices))
    loaded = memref.LoadOp.get(op.memref, indices)
    zero = arith.ConstantOp(_zero(element))
    if_op = scf.IfOp(
        checks,
        [element],
        [loaded, scf.YieldOp(loaded.res)],
        [zero, scf.YieldOp(zero.result)],
    )
    return em.add(if_op)


def _zero(t: Attribute) -> Attribute:
    if isinstance(t, IntegerType | IndexType):
        return IntegerAttr(0, t)
    return FloatAttr(0.0, t)  # pyright: ignore[reportArgumentType]


def _move_body(old: Region, new_block: Block, yield_type: type[Operation]) -> None:
    """Move the single block of `old` into `new_block` (whose arguments take the old
    block's), turning its `affine.yield` into `yield_type`."""
    block = old.block
    for a, b in zip(block.args, new_block.args, strict=True):
        if a.name_hint:
            b.name_hint = a.name_hint
        a.replace_all_uses_with(b)
    for o in list(block.ops):
        o.detach()
        if isinstance(o, affine.YieldOp):
            new_block.add_op(yield_type(*o.arguments))
            o.erase()
        else:
            new_block.add_op(o)


def _lower_for(em: IndexBuilder, op: affine.ForOp) -> None:
    lower = em.fold(em.map_results(op.lowerBoundMap.data, op.lowerBoundOperands), True)
    upper = em.fold(em.map_results(op.upperBoundMap.data, op.upperBoundOperands), False)
    step = em.index(op.step.value.data)
    body = Block(arg_types=[IndexType(), *(v.type for v in op.inits)])
    _move_body(op.body, body, scf.YieldOp)
    loop = scf.ForOp(lower, upper, step, list(op.inits), body)
    loop.attributes |= op.attributes
    em.ops.append(loop)
    _finish(em, op, list(loop.results))


def _lower_if(em: IndexBuilder, op: affine.IfOp) -> None:
    cond = em.condition(op.condition.data, op.args)
    then_block = Block()
    _move_body(op.then_region, then_block, scf.YieldOp)
    else_region = Region()
    if op.else_region.blocks and (op.res or len(op.else_region.block.ops) > 1):
        else_block = Block()
        _move_body(op.else_region, else_block, scf.YieldOp)
        else_region = Region(else_block)
    new = scf.IfOp(cond, list(op.result_types), Region(then_block), else_region)
    em.ops.append(new)
    _finish(em, op, list(new.results))


def _lower_parallel(em: IndexBuilder, op: affine.ParallelOp) -> None:
    """An unmapped band as a nest of `scf.for`, iterations in order (one legal order),
    reductions carried through `iter_args`."""
    lowers = em.map_results(op.lowerBoundsMap.data, op.lower_bound_operands)
    uppers = em.map_results(op.upperBoundsMap.data, op.upper_bound_operands)
    lower_groups = grouped(lowers, op.lower_groups)
    upper_groups = grouped(uppers, op.upper_groups)
    kinds = op.reduction_kinds
    types = list(op.result_types)
    inits = []
    for kind, t in zip(kinds, types, strict=True):
        value = REDUCTION_IDENTITY[kind]
        attr = IntegerAttr(int(value), t) if kind.endswith("i") else FloatAttr(value, t)  # pyright: ignore
        inits.append(em.add(arith.ConstantOp(attr)))
    bounds = [
        (em.fold(lo, True), em.fold(hi, False), em.index(step))
        for lo, hi, step in zip(lower_groups, upper_groups, op.step_values, strict=True)
    ]
    ivs: list[SSAValue] = []
    blocks: list[Block] = []
    for _ in bounds:
        b = Block(arg_types=[IndexType(), *types])
        blocks.append(b)
        ivs.append(b.args[0])
    innermost = blocks[-1]
    old = op.body.block
    for a, iv in zip(old.args, ivs, strict=True):
        if a.name_hint:
            iv.name_hint = a.name_hint
        a.replace_all_uses_with(iv)
    yielded: list[SSAValue] = []
    for o in list(old.ops):
        o.detach()
        if isinstance(o, affine.YieldOp):
            yielded = list(o.arguments)
            o.erase()
        else:
            innermost.add_op(o)
    combined = []
    for kind, acc, value in zip(kinds, innermost.args[1:], yielded, strict=True):
        c = _COMBINE[kind](acc, value)
        innermost.add_op(c)
        combined.append(c.results[0])
    innermost.add_op(scf.YieldOp(*combined))
    loops: list[scf.ForOp] = []
    for k in range(len(blocks) - 1, -1, -1):
        lo, hi, step = bounds[k]
        carried = inits if k == 0 else list(blocks[k - 1].args[1:])
        loop = scf.ForOp(lo, hi, step, carried, blocks[k])
        loops.append(loop)
        if k > 0:
            blocks[k - 1].add_ops([loop, scf.YieldOp(*loop.results)])
    outer = loops[-1]
    em.ops.append(outer)
    _finish(em, op, list(outer.results))
