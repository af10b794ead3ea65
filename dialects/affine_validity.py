"""MLIR's rules for the operands of affine maps, and the checks that apply them.

Which values an affine op may use as a map's dimensions and which as its symbols
(`is_valid_dim`, `is_valid_symbol`, as MLIR's `AffineOps.cpp` has them): an induction
variable is a dimension, never a symbol; a value defined at the top of an affine scope
(or above, or a constant, or a pure op of symbols) is a symbol; anything else (a
loaded value, an `arith.addi` of an induction variable) is neither. Also here: the
checks every affine op's verifier makes of its maps and their operands (their number,
positive divisors, dims then symbols, an access's rank).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence

from xdsl.dialects.arith import ConstantOp as ArithConstantOp
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr, MemRefType
from xdsl.dialects.memref import AllocOp as MemrefAllocOp
from xdsl.dialects.memref import DimOp as MemrefDimOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.traits import ConstantLike, IsolatedFromAbove, Pure
from xdsl.utils.exceptions import VerifyException

from affinec.base.diagnostics import verification_memo
from affinec.base.semi_affine import fits_index
from affinec.dialects.affine_syntax import OPERAND_COUNT

# --------------------------------------------------------------------------------------
# MLIR's validity rules for dims and symbols
# --------------------------------------------------------------------------------------

AFFINE_SCOPES = ("builtin.module", "func.func", "gpu.func", "gpu.launch")
"""Ops whose regions are affine scopes (MLIR's `AffineScope` trait): a value defined
at the top of one is a symbol everywhere inside it."""


def affine_scope(op: Operation) -> Region | None:
    """The region of the nearest enclosing affine scope of `op` (None: none)."""
    region = op.parent_region()
    while region is not None:
        parent = region.parent_op()
        if parent is None:
            return None
        if parent.name in AFFINE_SCOPES:
            return region
        region = parent.parent_region()
    return None


def _parent_region(value: SSAValue) -> Region | None:
    if isinstance(value, BlockArgument):
        return value.block.parent
    owner = value.owner
    return owner.parent_region() if isinstance(owner, Operation) else None


def _is_top_level(value: SSAValue) -> bool:
    """Defined directly in the region of some affine scope."""
    region = _parent_region(value)
    parent = region.parent_op() if region is not None else None
    return parent is not None and parent.name in AFFINE_SCOPES


def _enclosing(region: Region) -> Region | None:
    """The region a symbol of `region` may also come from: the one holding its op,
    unless that op is isolated from above."""
    parent = region.parent_op()
    if parent is None or parent.has_trait(IsolatedFromAbove):
        return None
    return parent.parent_region()


def _remembered(rule: Callable[[SSAValue, Region | None], bool]):
    """`rule`, its answers kept while a module is verified (`verification_memo`):
    the same values are asked about again for every affine op that uses them, and
    the rules recurse through the ops that define them."""

    @functools.wraps(rule)
    def remembered(value: SSAValue, region: Region | None) -> bool:
        memo = verification_memo()
        if memo is None:
            return rule(value, region)
        key = (rule, value, region)
        known = memo.get(key)
        if known is None:
            known = memo[key] = rule(value, region)
        return known

    return remembered


@_remembered
def is_valid_symbol(value: SSAValue, region: Region | None) -> bool:
    """Whether `value` may be a symbol of affine maps in `region` (an affine scope's),
    by MLIR's rule: defined at the scope's top level or above it (unless isolated), a
    constant, a pure op of symbols, or the size of a memref defined at the top."""
    if not isinstance(value.type, IndexType):
        return False
    if region is not None and _parent_region(value) is region:
        return True
    owner = value.owner
    if isinstance(owner, Operation):
        if owner.has_trait(ConstantLike):
            return True
        if owner.has_trait(Pure) and all(
            is_valid_symbol(v, region) for v in owner.operands
        ):
            return True
        if isinstance(owner, MemrefDimOp):
            return _is_valid_dim_op_symbol(owner, region)
    outer = _enclosing(region) if region is not None else None
    return outer is not None and is_valid_symbol(value, outer)


def _is_valid_dim_op_symbol(op: MemrefDimOp, region: Region | None) -> bool:
    """`memref.dim` of a memref defined at the top of a scope, or, along a constant
    dimension and through any `memref.cast`, of a `memref.alloc`, `memref.view` or
    `memref.subview` whose size there is static or a symbol (MLIR's rule)."""
    source = op.source
    if _is_top_level(source):
        return True
    index = op.index.owner
    if not isinstance(index, ArithConstantOp) or not isinstance(
        index.value, IntegerAttr
    ):
        return False
    defining = source.owner
    while isinstance(defining, Operation) and defining.name == "memref.cast":
        if not isinstance(defining.operands[0].type, MemRefType):
            return False  # unranked: no size to read
        defining = defining.operands[0].owner
        if not isinstance(defining, Operation):
            return True  # MLIR: a cast of a block argument
    sizes = _dynamic_sizes(defining)
    if sizes is None:
        return False
    shape = defining.results[0].type.get_shape()  # pyright: ignore
    i = index.value.value.data
    if not 0 <= i < len(shape):
        return False
    if shape[i] != DYNAMIC_INDEX:
        return True
    dynamic = shape[:i].count(DYNAMIC_INDEX)
    return dynamic < len(sizes) and is_valid_symbol(sizes[dynamic], region)


def _dynamic_sizes(op: Operation | Block) -> Sequence[SSAValue] | None:
    """The dynamic-size operands of a memref.alloc, memref.view or memref.subview
    (in the order of its result's dynamic dimensions); None for another owner."""
    if isinstance(op, MemrefAllocOp):
        return op.dynamic_sizes
    if isinstance(op, Operation) and op.name in ("memref.view", "memref.subview"):
        return op.sizes  # pyright: ignore[reportAttributeAccessIssue]
    return None


_INDEX_ARITHMETIC = (
    "affine.apply",
    "affine.delinearize_index",
    "affine.linearize_index",
)
"""The ops whose result is a dimension where all their operands are."""


def is_induction_variable(value: SSAValue) -> bool:
    """An `affine.for` or `affine.parallel` induction variable."""
    # By name: affine.for and affine.parallel verify their bounds by these rules, so
    # their modules import this one.
    if not isinstance(value, BlockArgument):
        return False
    owner = value.block.parent_op()
    if owner is None:
        return False
    if owner.name == "affine.for":
        return value.index == 0
    return owner.name == "affine.parallel"


@_remembered
def is_valid_dim(value: SSAValue, region: Region | None) -> bool:
    """Whether `value` may be a dimension of affine maps in `region`: a valid symbol,
    an induction variable, or an `affine.apply` / `affine.delinearize_index` of
    dimensions (MLIR's rule)."""
    if not isinstance(value.type, IndexType):
        return False
    if is_valid_symbol(value, region) or is_induction_variable(value):
        return True
    owner = value.owner
    # by name: affine.apply verifies its operands by these rules, so its module
    # imports this one
    if isinstance(owner, Operation) and owner.name in _INDEX_ARITHMETIC:
        return all(is_valid_dim(v, region) for v in owner.operands)
    if isinstance(owner, MemrefDimOp):
        return _is_top_level(owner.source)
    return False


def verify_dims_and_symbols(
    op: Operation, operands: Sequence[SSAValue], num_dims: int
) -> None:
    """MLIR's check of the operands of a map: dims first, then symbols."""
    scope = affine_scope(op)
    for k, value in enumerate(operands):
        if k < num_dims:
            if not is_valid_dim(value, scope):
                raise VerifyException("operand cannot be used as a dimension id")
        elif not is_valid_symbol(value, scope):
            raise VerifyException("operand cannot be used as a symbol")


def verify_index_operands(op: Operation, operands: Sequence[SSAValue], what: str):
    """Each operand a dimension or a symbol (`affine.prefetch`, `affine.dma_*`)."""
    scope = affine_scope(op)
    for value in operands:
        if not (is_valid_dim(value, scope) or is_valid_symbol(value, scope)):
            raise VerifyException(
                f"{what} must be a valid dimension or symbol identifier"
            )


# --------------------------------------------------------------------------------------
# The operands of maps
# --------------------------------------------------------------------------------------


def verify_map_operands(
    op: Operation,
    m: AffineMap,
    operands: Sequence[SSAValue],
    mismatch: str = OPERAND_COUNT,
):
    if len(operands) != m.num_dims + m.num_symbols:
        raise VerifyException(
            f"{mismatch} (the map takes {m.num_dims} dims and {m.num_symbols} "
            f"symbols, {len(operands)} operands were given)"
        )
    verify_divisors(m.results)


def verify_divisors(exprs: Iterable[AffineExpr]) -> None:
    """Refuse a `floordiv`, `ceildiv` or `mod` by a constant that is not positive:
    MLIR's affine expressions divide by positive constants, and so do the passes
    (and simplification) that compute with them. Refuse a constant that no `index`
    holds (MLIR's are 64-bit): `lower-affine` would make an `index` constant of it
    that each level reads its own way."""
    for expr in exprs:
        for sub in _subexprs(expr):
            if isinstance(sub, AffineConstantExpr) and not fits_index(sub.value):
                raise VerifyException(
                    f"constant {sub.value} is too large for index (64-bit)"
                )
            if (
                isinstance(sub, AffineBinaryOpExpr)
                and sub.kind
                in (
                    AffineBinaryOpKind.FloorDiv,
                    AffineBinaryOpKind.CeilDiv,
                    AffineBinaryOpKind.Mod,
                )
                and isinstance(sub.rhs, AffineConstantExpr)
                and sub.rhs.value <= 0
            ):
                raise VerifyException(
                    f"'{sub}' divides by {sub.rhs.value}: divisors must be positive"
                )


def _subexprs(expr: AffineExpr) -> Iterator[AffineExpr]:
    yield expr
    if isinstance(expr, AffineBinaryOpExpr):
        yield from _subexprs(expr.lhs)
        yield from _subexprs(expr.rhs)


def verify_memref_access(
    op: Operation, memref: SSAValue, m: AffineMap, indices: Sequence[SSAValue]
) -> None:
    assert isinstance(memref.type, MemRefType)
    rank = memref.type.get_num_dims()
    if len(m.results) != rank:
        raise VerifyException(
            "affine map num results must equal memref rank (the map has "
            f"{len(m.results)} results, the memref rank {rank})"
        )
    verify_map_operands(
        op, m, indices, "expects as many subscripts as affine map inputs"
    )
    verify_dims_and_symbols(op, indices, m.num_dims)
