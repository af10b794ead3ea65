"""The affine dialect in MLIR's syntax.

xDSL 0.74 ships an affine dialect whose textual form differs from MLIR's: it has no
custom syntax for `affine.parallel` and `affine.if`, no `affine.max`, prints maps as
`(d0 + -2)`, and parses `affine.load %A[%i, %j + 1]` into a map over symbols. This file
defines the dialect anew, op for op, with MLIR's syntax and MLIR's convention that
loop induction variables are map dimensions:

    affine.parallel (%i, %j) = (0, 0) to (%n, min(%i + 16, 100)) step (1, 2) {
      %v = affine.load %A[%i, %j + symbol(%k)] : memref<?x?xf32>
      affine.store %v, %B[%j, %i] : memref<?x?xf32>
    } {affinec.mapping = "block"}
    %m = affine.max affine_map<(d0) -> (0, d0 - 3)>(%i)
    affine.if affine_set<(d0) : (d0 - 1 >= 0)>(%i) { ... } else { ... }

Properties carry the same names as MLIR's (`lowerBoundsMap`, `upperBoundsGroups`,
`steps`, `reductions`, `condition`, ...) and the same values, so the generic form is
MLIR's too: reductions of `affine.parallel` are written `"addf"` in the custom form
and stored as MLIR's enum integers (`arith::AtomicRMWKind`, `reductions = [0]`).

MLIR's validity rules for affine maps' operands hold (`is_valid_dim`,
`is_valid_symbol`): an induction variable is a dimension, never a symbol; a value
defined at the top of a function (or above, or a constant, or a pure op of symbols)
is a symbol; anything else (a loaded value, an `arith.addi` of an induction
variable) is neither, and the op that uses it that way does not verify.

Also defined, as MLIR has them: `affine.vector_load`, `affine.vector_store`,
`affine.prefetch`, `affine.dma_start`, `affine.dma_wait`, `affine.delinearize_index`
and `affine.linearize_index` (`PASSES_REFUSE`: only `lower-affine` lowers some).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, ClassVar

from xdsl.dialects.arith import ConstantOp as ArithConstantOp
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    TensorType,
    UnitAttr,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.dialects.memref import AllocOp as MemrefAllocOp
from xdsl.dialects.memref import DimOp as MemrefDimOp
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    Region,
    SSAValue,
)
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
)
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    RecursiveMemoryEffect,
)
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.affine_syntax import (
    SSAOperandSpace,
    format_map,
    format_set,
    parse_ssa_expr,
    parse_ssa_expr_list,
    write_ssa_expr,
)

# --------------------------------------------------------------------------------------
# Shared pieces of syntax
# --------------------------------------------------------------------------------------


def print_map_attr(printer: Printer, m: AffineMap) -> None:
    printer.print_string(f"affine_map<{format_map(m)}>")


def print_set_attr(printer: Printer, s: AffineSet) -> None:
    printer.print_string(f"affine_set<{format_set(s)}>")


def _print_operand_lists(
    printer: Printer, operands: Sequence[SSAValue], num_dims: int
) -> None:
    """`(%d0, %d1)[%s0]`: the dim operands in parentheses, symbols in brackets."""
    with printer.in_parens():
        printer.print_list(operands[:num_dims], printer.print_ssa_value)
    if len(operands) > num_dims:
        with printer.in_square_brackets():
            printer.print_list(operands[num_dims:], printer.print_ssa_value)


def _parse_operand_lists(parser: Parser, num_dims: int, num_symbols: int, pos: int):
    dims = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
    )
    syms = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )
    dims, syms = dims or [], syms or []
    if len(dims) != num_dims or len(syms) != num_symbols:
        parser.raise_error(
            f"the map takes {num_dims} dims and {num_symbols} symbols, "
            f"but {len(dims)} and {len(syms)} operands were given",
            pos,
        )
    return [*dims, *syms]


def _parse_map_and_operands(parser: Parser) -> tuple[AffineMapAttr, list[SSAValue]]:
    """`affine_map<(d0)[s0] -> (...)>(%a)[%b]`, as affine.apply/min/max write it."""
    pos = parser.pos
    attr = parser.parse_attribute()
    if not isinstance(attr, AffineMapAttr):
        parser.raise_error("expected an affine map", pos)
    m = attr.data
    return attr, _parse_operand_lists(parser, m.num_dims, m.num_symbols, pos)


def _verify_map_operands(op: Operation, m: AffineMap, operands: Sequence[SSAValue]):
    if len(operands) != m.num_dims + m.num_symbols:
        raise VerifyException(
            f"map takes {m.num_dims + m.num_symbols} operands "
            f"({m.num_dims} dims, {m.num_symbols} symbols), got {len(operands)}"
        )
    verify_divisors(m.results)


def verify_divisors(exprs: Iterable[AffineExpr]) -> None:
    """Refuse a `floordiv`, `ceildiv` or `mod` by a constant that is not positive:
    MLIR's affine expressions divide by positive constants, and so do the passes
    (and simplification) that compute with them."""
    for expr in exprs:
        for sub in _subexprs(expr):
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
    """`memref.dim` of a memref defined at the top of a scope, or of a
    `memref.alloc` whose size along that dimension is a symbol."""
    source = op.source
    if _is_top_level(source):
        return True
    alloc = source.owner
    index = op.index.owner
    if not isinstance(alloc, MemrefAllocOp) or not isinstance(index, ArithConstantOp):
        return False
    assert isinstance(source.type, MemRefType) and isinstance(index.value, IntegerAttr)
    shape = source.type.get_shape()
    i = index.value.value.data
    if not 0 <= i < len(shape) or shape[i] != DYNAMIC_INDEX:
        return False
    dynamic = shape[:i].count(DYNAMIC_INDEX)
    return is_valid_symbol(alloc.dynamic_sizes[dynamic], region)


def is_induction_variable(value: SSAValue) -> bool:
    """An `affine.for` or `affine.parallel` induction variable."""
    if not isinstance(value, BlockArgument):
        return False
    owner = value.block.parent_op()
    if isinstance(owner, ForOp):
        return value.index == 0
    return isinstance(owner, ParallelOp)


def is_valid_dim(value: SSAValue, region: Region | None) -> bool:
    """Whether `value` may be a dimension of affine maps in `region`: a valid symbol,
    an induction variable, or an `affine.apply` / `affine.delinearize_index` of
    dimensions (MLIR's rule)."""
    if not isinstance(value.type, IndexType):
        return False
    if is_valid_symbol(value, region) or is_induction_variable(value):
        return True
    owner = value.owner
    if isinstance(owner, ApplyOp | DelinearizeIndexOp | LinearizeIndexOp):
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


def print_indexed(
    printer: Printer, memref: SSAValue, m: AffineMap, indices: Sequence[SSAValue]
) -> None:
    """`%A[%i, %j + symbol(%n)]`."""
    printer.print_ssa_value(memref)
    with printer.in_square_brackets():
        for k, result in enumerate(m.results):
            if k:
                printer.print_string(", ")
            write_ssa_expr(
                result,
                printer.print_string,
                printer.print_ssa_value,
                indices,
                m.num_dims,
            )


def parse_indexed(
    parser: Parser,
) -> tuple[UnresolvedOperand, AffineMap, list[SSAValue]]:
    """`%A[<exprs of %dims and symbol(%syms)>]`: the (unresolved) memref, the map and
    its operands."""
    unresolved = parser.parse_unresolved_operand()
    space = SSAOperandSpace()
    results = parse_ssa_expr_list(parser, space)
    return unresolved, space.map(results), space.operands(parser)


def parse_memref_type(parser: Parser) -> MemRefType:
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error(f"expected a memref type, got {memref_type}", pos)
    return memref_type


def print_memref_access(
    printer: Printer,
    memref: SSAValue,
    m: AffineMap,
    indices: Sequence[SSAValue],
    attributes: dict[str, Attribute] | None = None,
) -> None:
    """`%A[%i, %j + symbol(%n)] {attrs} : memref<...>`."""
    print_indexed(printer, memref, m, indices)
    printer.print_op_attributes(attributes or {})
    printer.print_string(" : ")
    printer.print_attribute(memref.type)


def parse_memref_access(
    parser: Parser,
) -> tuple[SSAValue, AffineMap, list[SSAValue], MemRefType, dict[str, Attribute]]:
    """Parse `%A[<exprs of %dims and symbol(%syms)>] {attrs} : memref<...>`."""
    unresolved, m, indices = parse_indexed(parser)
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    memref_type = parse_memref_type(parser)
    memref = parser.resolve_operand(unresolved, memref_type)
    return memref, m, indices, memref_type, attrs


def verify_memref_access(
    op: Operation, memref: SSAValue, m: AffineMap, indices: Sequence[SSAValue]
) -> None:
    assert isinstance(memref.type, MemRefType)
    rank = memref.type.get_num_dims()
    if len(m.results) != rank:
        raise VerifyException(
            f"map has {len(m.results)} results but the memref has rank {rank}"
        )
    _verify_map_operands(op, m, indices)
    verify_dims_and_symbols(op, indices, m.num_dims)


# --------------------------------------------------------------------------------------
# affine.apply, affine.min, affine.max
# --------------------------------------------------------------------------------------


class _MapOp(IRDLOperation):
    """An op computing `index` values from a map over its operands."""

    mapOperands = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(self, operands: Sequence[SSAValue | Operation], m: AffineMap):
        super().__init__(
            operands=[operands],
            properties={"map": AffineMapAttr(m)},
            result_types=[IndexType()],
        )

    def verify_(self) -> None:
        _verify_map_operands(self, self.map.data, self.mapOperands)
        if not self.map.data.results:
            raise VerifyException("needs a map with at least one result")

    @classmethod
    def parse(cls, parser: Parser):
        attr, operands = _parse_map_and_operands(parser)
        op = cls(operands, attr.data)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_map_attr(printer, self.map.data)
        _print_operand_lists(printer, self.mapOperands, self.map.data.num_dims)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class ApplyOp(_MapOp):
    """`%r = affine.apply affine_map<(d0) -> (d0 + 1)>(%i)`: one map, one result."""

    name = "affine.apply"

    def verify_(self) -> None:
        super().verify_()
        m = self.map.data
        if len(m.results) != 1:
            raise VerifyException("needs a map with exactly one result")
        # MLIR allows operands that are neither dims nor symbols here (they keep the
        # op from folding into affine maps), but no dim in a symbol's place.
        scope = affine_scope(self)
        for value in self.mapOperands[m.num_dims :]:
            if is_valid_dim(value, scope) and not is_valid_symbol(value, scope):
                raise VerifyException("dimensional operand cannot be used as a symbol")


@irdl_op_definition
class MinOp(_MapOp):
    """`%r = affine.min affine_map<(d0) -> (16, 100 - d0)>(%i)`: the least result."""

    name = "affine.min"


@irdl_op_definition
class MaxOp(_MapOp):
    """`%r = affine.max affine_map<(d0) -> (0, d0 - 3)>(%i)`: the greatest result."""

    name = "affine.max"


# --------------------------------------------------------------------------------------
# affine.load, affine.store
# --------------------------------------------------------------------------------------


class AffineLoadBase(IRDLOperation):
    """A load through an affine map of its index operands: `affine.load` and
    `affinec.padded_load` differ only in what an out-of-bounds access reads."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    result = result_def(T)
    map = prop_def(AffineMapAttr)

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
    ):
        assert isinstance(memref.type, MemRefType)
        if m is None:
            m = AffineMap.identity(memref.type.get_num_dims())
        super().__init__(
            operands=[memref, indices],
            properties={"map": AffineMapAttr(m)},
            result_types=[memref.type.get_element_type()],
        )

    def verify_(self) -> None:
        verify_memref_access(self, self.memref, self.map.data, self.indices)

    @classmethod
    def parse(cls, parser: Parser):
        memref, m, indices, _, attrs = parse_memref_access(parser)
        op = cls(memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )


@irdl_op_definition
class LoadOp(AffineLoadBase):
    """`%v = affine.load %A[%i, %j + 1] : memref<8x8xf32>`."""

    name = "affine.load"


@irdl_op_definition
class StoreOp(IRDLOperation):
    """`affine.store %v, %A[%i, %j + 1] : memref<8x8xf32>`."""

    name = "affine.store"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)

    def __init__(
        self,
        value: SSAValue,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
    ):
        assert isinstance(memref.type, MemRefType)
        if m is None:
            m = AffineMap.identity(memref.type.get_num_dims())
        super().__init__(
            operands=[value, memref, indices],
            properties={"map": AffineMapAttr(m)},
        )

    def verify_(self) -> None:
        verify_memref_access(self, self.memref, self.map.data, self.indices)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        unresolved_value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, m, indices, memref_type, attrs = parse_memref_access(parser)
        value = parser.resolve_operand(unresolved_value, memref_type.get_element_type())
        op = cls(value, memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )


# --------------------------------------------------------------------------------------
# affine.vector_load, affine.vector_store, affine.prefetch
# --------------------------------------------------------------------------------------


def _verify_vector_access(
    op: Operation, memref: SSAValue, vector: Attribute, m: AffineMap, indices
) -> None:
    verify_memref_access(op, memref, m, indices)
    assert isinstance(memref.type, MemRefType)
    if not isinstance(vector, VectorType) or (
        vector.get_element_type() != memref.type.get_element_type()
    ):
        raise VerifyException(
            "requires memref and vector types of the same elemental type"
        )


def _parse_vector_type(parser: Parser) -> VectorType:
    parser.parse_punctuation(",")
    pos = parser.pos
    t = parser.parse_type()
    if not isinstance(t, VectorType):
        parser.raise_error(f"expected a vector type, got {t}", pos)
    return t


@irdl_op_definition
class VectorLoadOp(IRDLOperation):
    """`%v = affine.vector_load %A[%i, %j * 8] : memref<64x64xf32>, vector<8xf32>`:
    a vector of consecutive elements from an affine index (a 16-byte copy when 4 f32).
    """

    name = "affine.vector_load"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(VectorType)
    map = prop_def(AffineMapAttr)

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap,
        result_type: VectorType,
    ):
        super().__init__(
            operands=[memref, indices],
            properties={"map": AffineMapAttr(m)},
            result_types=[result_type],
        )

    def verify_(self) -> None:
        _verify_vector_access(
            self, self.memref, self.result.type, self.map.data, self.indices
        )

    @classmethod
    def parse(cls, parser: Parser) -> VectorLoadOp:
        memref, m, indices, _, attrs = parse_memref_access(parser)
        op = cls(memref, indices, m, _parse_vector_type(parser))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )
        printer.print_string(", ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class VectorStoreOp(IRDLOperation):
    """`affine.vector_store %v, %A[%i, %j * 8] : memref<64x64xf32>, vector<8xf32>`."""

    name = "affine.vector_store"

    value = operand_def(VectorType)
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)

    def __init__(
        self,
        value: SSAValue,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap,
    ):
        super().__init__(
            operands=[value, memref, indices], properties={"map": AffineMapAttr(m)}
        )

    def verify_(self) -> None:
        _verify_vector_access(
            self, self.memref, self.value.type, self.map.data, self.indices
        )

    @classmethod
    def parse(cls, parser: Parser) -> VectorStoreOp:
        unresolved_value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, m, indices, _, attrs = parse_memref_access(parser)
        vector = _parse_vector_type(parser)
        op = cls(parser.resolve_operand(unresolved_value, vector), memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )
        printer.print_string(", ")
        printer.print_attribute(self.value.type)


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`affine.prefetch %A[%i, %j + 1], read, locality<3>, data : memref<...>`: a hint
    that the element will be read (or written) soon."""

    name = "affine.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    isWrite = prop_def(IntegerAttr[Annotated[IntegerType, i1]])
    localityHint = prop_def(IntegerAttr[Annotated[IntegerType, i32]])
    isDataCache = prop_def(IntegerAttr[Annotated[IntegerType, i1]])
    map = prop_def(AffineMapAttr)

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap,
        *,
        is_write: bool,
        locality: int,
        is_data_cache: bool,
    ):
        super().__init__(
            operands=[memref, indices],
            properties={
                "map": AffineMapAttr(m),
                "isWrite": BoolAttr.from_bool(is_write),
                "localityHint": IntegerAttr(locality, i32),
                "isDataCache": BoolAttr.from_bool(is_data_cache),
            },
        )

    def verify_(self) -> None:
        m = self.map.data
        assert isinstance(self.memref.type, MemRefType)
        if len(m.results) != self.memref.type.get_num_dims():
            raise VerifyException(
                "affine.prefetch affine map num results must equal memref rank"
            )
        _verify_map_operands(self, m, self.indices)
        if not 0 <= self.localityHint.value.data <= 3:
            raise VerifyException("locality hint must be between 0 and 3")
        verify_index_operands(self, self.indices, "index")

    @classmethod
    def parse(cls, parser: Parser) -> PrefetchOp:
        unresolved, m, indices = parse_indexed(parser)
        parser.parse_punctuation(",")
        pos = parser.pos
        access = parser.parse_identifier()
        if access not in ("read", "write"):
            parser.raise_error("rw specifier has to be 'read' or 'write'", pos)
        parser.parse_punctuation(",")
        parser.parse_keyword("locality")
        parser.parse_punctuation("<")
        locality = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(">")
        parser.parse_punctuation(",")
        pos = parser.pos
        cache = parser.parse_identifier()
        if cache not in ("data", "instr"):
            parser.raise_error("cache type has to be 'data' or 'instr'", pos)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        memref = parser.resolve_operand(unresolved, parse_memref_type(parser))
        op = cls(
            memref,
            indices,
            m,
            is_write=access == "write",
            locality=locality,
            is_data_cache=cache == "data",
        )
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_indexed(printer, self.memref, self.map.data, self.indices)
        access = "write" if self.isWrite.value.data else "read"
        cache = "data" if self.isDataCache.value.data else "instr"
        printer.print_string(
            f", {access}, locality<{self.localityHint.value.data}>, {cache}"
        )
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.memref.type)


# --------------------------------------------------------------------------------------
# affine.dma_start, affine.dma_wait
# --------------------------------------------------------------------------------------


def _map_attr(op: Operation, name: str) -> AffineMap:
    attr = op.attributes.get(name)
    if not isinstance(attr, AffineMapAttr):
        raise VerifyException(f"requires an affine map attribute '{name}'")
    return attr.data


def _map_size(m: AffineMap) -> int:
    return m.num_dims + m.num_symbols


@irdl_op_definition
class DmaStartOp(IRDLOperation):
    """`affine.dma_start %src[%i, 0], %dst[%i, 0], %tag[0], %n [, %stride, %per]
    : memref<..>, memref<.., 2>, memref<1xi32>`: start copying `%n` elements between
    memory spaces (every `%stride` elements a run of `%per`), signalling `%tag`.

    As in MLIR, the operands are one list (source, its indices, destination, its
    indices, tag, its indices, the count, the optional stride pair) cut by the maps
    `src_map`, `dst_map` and `tag_map`, which are attributes."""

    name = "affine.dma_start"

    arguments = var_operand_def()

    def __init__(
        self,
        src: tuple[SSAValue, AffineMap, Sequence[SSAValue]],
        dst: tuple[SSAValue, AffineMap, Sequence[SSAValue]],
        tag: tuple[SSAValue, AffineMap, Sequence[SSAValue]],
        num_elements: SSAValue,
        stride: tuple[SSAValue, SSAValue] | None = None,
    ):
        operands = [
            *(v for memref, _, indices in (src, dst, tag) for v in (memref, *indices)),
            num_elements,
            *(stride or ()),
        ]
        super().__init__(
            operands=[operands],
            attributes={
                "src_map": AffineMapAttr(src[1]),
                "dst_map": AffineMapAttr(dst[1]),
                "tag_map": AffineMapAttr(tag[1]),
            },
        )

    def _parts(self) -> list[tuple[SSAValue, AffineMap, Sequence[SSAValue]]]:
        """(memref, map, indices) of the source, destination and tag."""
        parts, k = [], 0
        for name in ("src_map", "dst_map", "tag_map"):
            m = _map_attr(self, name)
            parts.append(
                (self.arguments[k], m, self.arguments[k + 1 : k + 1 + _map_size(m)])
            )
            k += 1 + _map_size(m)
        return parts

    def _count_index(self) -> int:
        """Where the element count is among the operands."""
        sizes = [
            _map_size(_map_attr(self, n)) for n in ("src_map", "dst_map", "tag_map")
        ]
        return 3 + sum(sizes)

    @property
    def num_elements(self) -> SSAValue:
        return self.arguments[self._count_index()]

    def verify_(self) -> None:
        expected = self._count_index() + 1
        if len(self.arguments) not in (expected, expected + 2):
            raise VerifyException(
                f"expected {expected} operands, or {expected + 2} with a stride"
            )
        (src, sm, si), (dst, dm, di), (tag, tm, ti) = self._parts()
        for what, short, memref, m, indices in (
            ("source", "src", src, sm, si),
            ("destination", "dst", dst, dm, di),
            ("tag", "tag", tag, tm, ti),
        ):
            if not isinstance(memref.type, MemRefType):
                raise VerifyException(f"expected DMA {what} to be of memref type")
            if len(m.results) != memref.type.get_num_dims():
                raise VerifyException(f"{what} map results must equal the memref rank")
            verify_index_operands(self, indices, f"{short} index")
        assert isinstance(src.type, MemRefType) and isinstance(dst.type, MemRefType)
        assert isinstance(tag.type, MemRefType)
        if src.type.memory_space == dst.type.memory_space:
            raise VerifyException("DMA should be between different memory spaces")
        if not isinstance(tag.type.get_element_type(), IntegerType):
            raise VerifyException("expected tag to be of integer type")
        if any(
            not isinstance(v.type, IndexType) for v in self.arguments[expected - 1 :]
        ):
            raise VerifyException("the count and stride operands must be of index type")

    @classmethod
    def parse(cls, parser: Parser) -> DmaStartOp:
        accesses = []
        for _ in range(3):
            accesses.append(parse_indexed(parser))
            parser.parse_punctuation(",")
        num = parser.parse_operand(IndexType())
        stride = None
        if parser.parse_optional_punctuation(",") is not None:
            first = parser.parse_operand(IndexType())
            parser.parse_punctuation(",")
            stride = (first, parser.parse_operand(IndexType()))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parse_memref_type(parser)]
        for _ in range(2):
            parser.parse_punctuation(",")
            types.append(parse_memref_type(parser))
        src, dst, tag = (
            (parser.resolve_operand(u, t), m, indices)
            for (u, m, indices), t in zip(accesses, types, strict=True)
        )
        op = cls(src, dst, tag, num, stride)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        parts = self._parts()
        for memref, m, indices in parts:
            printer.print_string(" ")
            print_indexed(printer, memref, m, indices)
            printer.print_string(",")
        printer.print_string(" ")
        printer.print_list(
            self.arguments[self._count_index() :], printer.print_ssa_value
        )
        attrs = {
            k: v
            for k, v in self.attributes.items()
            if k not in ("src_map", "dst_map", "tag_map")
        }
        printer.print_op_attributes(attrs)
        printer.print_string(" : ")
        printer.print_list([p[0].type for p in parts], printer.print_attribute)


@irdl_op_definition
class DmaWaitOp(IRDLOperation):
    """`affine.dma_wait %tag[0], %n : memref<1xi32>`: wait for the DMA of `%tag`."""

    name = "affine.dma_wait"

    arguments = var_operand_def()

    def __init__(
        self, tag: SSAValue, m: AffineMap, indices: Sequence[SSAValue], num: SSAValue
    ):
        super().__init__(
            operands=[[tag, *indices, num]],
            attributes={"tag_map": AffineMapAttr(m)},
        )

    def verify_(self) -> None:
        m = _map_attr(self, "tag_map")
        if len(self.arguments) != 2 + _map_size(m):
            raise VerifyException(f"expected {2 + _map_size(m)} operands")
        tag = self.arguments[0]
        if not isinstance(tag.type, MemRefType):
            raise VerifyException("expected DMA tag to be of memref type")
        if len(m.results) != tag.type.get_num_dims():
            raise VerifyException("tag map results must equal the memref rank")
        verify_index_operands(self, self.arguments[1:-1], "index")
        if not isinstance(self.arguments[-1].type, IndexType):
            raise VerifyException("the element count must be of index type")

    @classmethod
    def parse(cls, parser: Parser) -> DmaWaitOp:
        unresolved, m, indices = parse_indexed(parser)
        parser.parse_punctuation(",")
        num = parser.parse_operand(IndexType())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        tag = parser.resolve_operand(unresolved, parse_memref_type(parser))
        op = cls(tag, m, indices, num)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        m = _map_attr(self, "tag_map")
        print_indexed(printer, self.arguments[0], m, self.arguments[1:-1])
        printer.print_string(", ")
        printer.print_ssa_value(self.arguments[-1])
        attrs = {k: v for k, v in self.attributes.items() if k != "tag_map"}
        printer.print_op_attributes(attrs)
        printer.print_string(" : ")
        printer.print_attribute(self.arguments[0].type)


# --------------------------------------------------------------------------------------
# affine.delinearize_index
# --------------------------------------------------------------------------------------

DYNAMIC_BASIS = -(2**63)
"""A dynamic entry of `static_basis` (MLIR's `ShapedType::kDynamic`)."""


@irdl_op_definition
class DelinearizeIndexOp(IRDLOperation):
    """`%r:3 = affine.delinearize_index %x into (16, %n, 4) : index, index, index`:
    the coordinates of a linear index in a row-major basis (`%x floordiv (%n * 4)`,
    `%x floordiv 4 mod %n`, `%x mod 4`). With as many results as basis entries the
    first entry only bounds the first result; with one more, nothing does."""

    name = "affine.delinearize_index"

    linear_index = operand_def(IndexType)
    dynamic_basis = var_operand_def(IndexType)
    static_basis = prop_def(DenseArrayBase.constr(i64))
    multi_index = var_result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(
        self,
        linear_index: SSAValue,
        basis: Sequence[int | SSAValue],
        num_results: int | None = None,
    ):
        static, dynamic = _split_basis(basis)
        n = len(basis) if num_results is None else num_results
        super().__init__(
            operands=[linear_index, dynamic],
            properties={"static_basis": DenseArrayBase.from_list(i64, static)},
            result_types=[[IndexType()] * n],
        )

    @property
    def basis(self) -> list[int | SSAValue]:
        """The basis, constant entries as ints."""
        return _joined_basis(self.static_basis, self.dynamic_basis)

    def verify_(self) -> None:
        entries = _verify_basis(self.static_basis, self.dynamic_basis)
        if len(self.multi_index) not in (len(entries), len(entries) + 1):
            raise VerifyException(
                "should return an index for each basis element and up to one extra index"
            )

    @classmethod
    def parse(cls, parser: Parser) -> DelinearizeIndexOp:
        linear = parser.parse_operand(IndexType())
        parser.parse_keyword("into")

        def parse_entry() -> int | SSAValue:
            value = parser.parse_optional_operand(IndexType())
            return (
                value
                if value is not None
                else parser.parse_integer(allow_boolean=False)
            )

        basis = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_entry)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_type
        )
        if any(not isinstance(t, IndexType) for t in types):
            parser.raise_error("the results of affine.delinearize_index are index")
        op = cls(linear, basis, len(types))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.linear_index)
        printer.print_string(" into (")
        printer.print_list(
            self.basis,
            lambda b: (
                printer.print_string(str(b))
                if isinstance(b, int)
                else printer.print_ssa_value(b)
            ),
        )
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(self.result_types, printer.print_attribute)


def _parse_basis(parser: Parser) -> list[int | SSAValue]:
    """`(16, %n, 4)`: constant and dynamic basis entries."""

    def parse_entry() -> int | SSAValue:
        value = parser.parse_optional_operand(IndexType())
        if value is not None:
            return value
        return parser.parse_integer(allow_boolean=False)

    return parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_entry)


def _print_basis(printer: Printer, basis: Sequence[int | SSAValue]) -> None:
    printer.print_string("(")
    for k, b in enumerate(basis):
        if k:
            printer.print_string(", ")
        if isinstance(b, int):
            printer.print_string(str(b))
        else:
            printer.print_ssa_value(b)
    printer.print_string(")")


def _split_basis(basis: Sequence[int | SSAValue]) -> tuple[list[int], list[SSAValue]]:
    static = [b if isinstance(b, int) else DYNAMIC_BASIS for b in basis]
    return static, [b for b in basis if not isinstance(b, int)]


def _joined_basis(static: DenseArrayBase, dynamic: Sequence[SSAValue]):
    values = iter(dynamic)
    entries: Sequence[int] = static.get_values()  # pyright: ignore
    return [next(values) if v == DYNAMIC_BASIS else v for v in entries]


def _verify_basis(static: DenseArrayBase, dynamic: Sequence[SSAValue]) -> list[int]:
    entries: list[int] = list(static.get_values())  # pyright: ignore
    if entries.count(DYNAMIC_BASIS) != len(dynamic):
        raise VerifyException(
            "mismatch between dynamic and static basis (kDynamic marker but no "
            "corresponding dynamic basis entry)"
        )
    if any(v <= 0 and v != DYNAMIC_BASIS for v in entries):
        raise VerifyException("no basis element may be statically non-positive")
    return entries


@irdl_op_definition
class LinearizeIndexOp(IRDLOperation):
    """`%x = affine.linearize_index [disjoint] [%a, %b, %c] by (16, %n, 4) : index`:
    the inverse of `affine.delinearize_index` (`%a * %n * 4 + %b * 4 + %c`)."""

    name = "affine.linearize_index"

    multi_index = var_operand_def(IndexType)
    dynamic_basis = var_operand_def(IndexType)
    static_basis = prop_def(DenseArrayBase.constr(i64))
    disjoint = prop_def(UnitAttr | BoolAttr)
    linear_index = result_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self,
        multi_index: Sequence[SSAValue],
        basis: Sequence[int | SSAValue],
        disjoint: bool = False,
    ):
        static, dynamic = _split_basis(basis)
        super().__init__(
            operands=[multi_index, dynamic],
            properties={
                "static_basis": DenseArrayBase.from_list(i64, static),
                "disjoint": UnitAttr() if disjoint else BoolAttr.from_bool(False),
            },
            result_types=[IndexType()],
        )

    @property
    def basis(self) -> list[int | SSAValue]:
        return _joined_basis(self.static_basis, self.dynamic_basis)

    @property
    def is_disjoint(self) -> bool:
        return isinstance(self.disjoint, UnitAttr) or bool(self.disjoint.value.data)

    def verify_(self) -> None:
        entries = _verify_basis(self.static_basis, self.dynamic_basis)
        if len(self.multi_index) not in (len(entries), len(entries) + 1):
            raise VerifyException(
                f"should be passed a basis element for each index except possibly "
                f"the first, got {len(entries)} for {len(self.multi_index)} indices"
            )

    @classmethod
    def parse(cls, parser: Parser) -> LinearizeIndexOp:
        disjoint = parser.parse_optional_keyword("disjoint") is not None
        indices = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
        )
        parser.parse_keyword("by")
        basis = _parse_basis(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        if not isinstance(parser.parse_type(), IndexType):
            parser.raise_error("the result of affine.linearize_index is an index", pos)
        op = cls(indices, basis, disjoint)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        if self.is_disjoint:
            printer.print_string(" disjoint")
        printer.print_string(" [")
        printer.print_list(self.multi_index, printer.print_ssa_value)
        printer.print_string("] by ")
        _print_basis(printer, self.basis)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : index")


# --------------------------------------------------------------------------------------
# affine.yield
# --------------------------------------------------------------------------------------


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`affine.yield %a, %b : f32, f32`, the terminator of every affine region."""

    name = "affine.yield"

    arguments = var_operand_def()

    traits = traits_def(IsTerminator(), Pure())

    assembly_format = "attr-dict ($arguments^ `:` type($arguments))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])


def _ensure_yield(block: Block) -> None:
    """Add the `affine.yield` that the custom syntax leaves implicit."""
    if not isinstance(block.last_op, YieldOp):
        block.add_op(YieldOp())


def _parse_body(parser: Parser) -> Region:
    """A region without arguments, as `affine.if` writes its branches: `{}` (even
    with nothing inside) is one block ending in the implicit `affine.yield`."""
    region = parser.parse_region()
    if not region.blocks:
        region.add_block(Block())
    _ensure_yield(region.block)
    return region


def _verify_yield(op: Operation, region: Region, types: Sequence[Attribute]) -> None:
    if not region.blocks:
        return
    if len(region.blocks) != 1:
        raise VerifyException("region must have a single block")
    term = region.block.last_op
    if not isinstance(term, YieldOp):
        raise VerifyException("region must end in 'affine.yield'")
    if tuple(term.arguments.types) != tuple(types):
        raise VerifyException(
            f"yields ({', '.join(map(str, term.arguments.types))}) but "
            f"its results are ({', '.join(map(str, types))})"
        )


# --------------------------------------------------------------------------------------
# affine.for
# --------------------------------------------------------------------------------------


def _parse_for_bound(parser: Parser, keyword: str) -> tuple[AffineMap, list[SSAValue]]:
    """One `affine.for` bound: `%n`, `42`, or `[max|min] affine_map<...>(...)[...]`."""
    prefixed = parser.parse_optional_keyword(keyword) is not None
    if (operand := parser.parse_optional_operand(IndexType())) is not None:
        return AffineMap(0, 1, (AffineExpr.symbol(0),)), [operand]
    if not prefixed and (value := parser.parse_optional_integer()) is not None:
        return AffineMap.constant_map(value), []
    attr, operands = _parse_map_and_operands(parser)
    if len(attr.data.results) > 1 and not prefixed:
        parser.raise_error(f"a bound with several results needs '{keyword}'")
    return attr.data, operands


def _print_for_bound(
    printer: Printer, m: AffineMap, operands: Sequence[SSAValue], keyword: str
) -> None:
    if m.num_dims == 0 and len(m.results) == 1:
        if m.num_symbols == 0 and (value := _constant(m.results[0])) is not None:
            printer.print_string(str(value))
            return
        if m.num_symbols == 1 and m.results[0] == AffineExpr.symbol(0):
            printer.print_ssa_value(operands[0])
            return
    if len(m.results) > 1:
        printer.print_string(f"{keyword} ")
    print_map_attr(printer, m)
    _print_operand_lists(printer, operands, m.num_dims)


def _constant(e: AffineExpr) -> int | None:
    return e.value if isinstance(e, AffineConstantExpr) else None


@irdl_op_definition
class ForOp(IRDLOperation):
    """`affine.for %i = max #lb(%a) to min #ub(%b) step 2 iter_args(%x = %x0) -> (f32)`."""

    name = "affine.for"

    lowerBoundOperands = var_operand_def(IndexType)
    upperBoundOperands = var_operand_def(IndexType)
    inits = var_operand_def()
    res = var_result_def()

    lowerBoundMap = prop_def(AffineMapAttr)
    upperBoundMap = prop_def(AffineMapAttr)
    step = prop_def(IntegerAttr[IndexType])

    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        lower: AffineMap | int,
        upper: AffineMap | int,
        body: Region | Block,
        *,
        lower_operands: Sequence[SSAValue] = (),
        upper_operands: Sequence[SSAValue] = (),
        step: int = 1,
        inits: Sequence[SSAValue] = (),
    ):
        if isinstance(lower, int):
            lower = AffineMap.constant_map(lower)
        if isinstance(upper, int):
            upper = AffineMap.constant_map(upper)
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[lower_operands, upper_operands, inits],
            result_types=[[v.type for v in inits]],
            properties={
                "lowerBoundMap": AffineMapAttr(lower),
                "upperBoundMap": AffineMapAttr(upper),
                "step": IntegerAttr(step, IndexType()),
            },
            regions=[body],
        )

    @property
    def induction_variable(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def iter_args(self) -> Sequence[SSAValue]:
        return self.body.block.args[1:]

    def verify_(self) -> None:
        for m, operands in (
            (self.lowerBoundMap.data, self.lowerBoundOperands),
            (self.upperBoundMap.data, self.upperBoundOperands),
        ):
            _verify_map_operands(self, m, operands)
            verify_dims_and_symbols(self, operands, m.num_dims)
        if self.step.value.data <= 0:
            raise VerifyException(f"step must be positive, got {self.step.value.data}")
        if not self.lowerBoundMap.data.results or not self.upperBoundMap.data.results:
            raise VerifyException("bound maps need at least one result")
        arg_types = tuple(self.body.block.arg_types)
        expected = (IndexType(), *self.inits.types)
        if arg_types != expected:
            raise VerifyException(
                "block arguments must be the index induction variable "
                "followed by one argument per iter_arg of the same type"
            )
        if tuple(self.inits.types) != tuple(self.result_types):
            raise VerifyException("iter_args and results differ in type")
        _verify_yield(self, self.body, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        iv = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lower, lower_operands = _parse_for_bound(parser, "max")
        parser.parse_keyword("to")
        upper, upper_operands = _parse_for_bound(parser, "min")
        step = 1
        if parser.parse_optional_keyword("step") is not None:
            pos = parser.pos
            step = parser.parse_integer(allow_boolean=False)
            if step <= 0:
                parser.raise_error("the step must be a positive integer", pos)
        iter_args: list[Parser.Argument] = []
        inits: list[SSAValue] = []
        if parser.parse_optional_keyword("iter_args") is not None:
            pairs = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN,
                lambda: (
                    parser.parse_argument(expect_type=False),
                    parser.parse_punctuation("=") and parser.parse_unresolved_operand(),
                ),
            )
            parser.parse_punctuation("->")
            types = _parse_type_list(parser)
            if len(types) != len(pairs):
                parser.raise_error(
                    f"{len(pairs)} iter_args but {len(types)} result types"
                )
            for (arg, init), t in zip(pairs, types, strict=True):
                iter_args.append(arg.resolve(t))
                inits.append(parser.resolve_operand(init, t))
        body = parser.parse_region([iv.resolve(IndexType()), *iter_args])
        _ensure_yield(body.block)
        op = cls(
            lower,
            upper,
            body,
            lower_operands=lower_operands,
            upper_operands=upper_operands,
            step=step,
            inits=inits,
        )
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.induction_variable)
        printer.print_string(" = ")
        _print_for_bound(
            printer, self.lowerBoundMap.data, self.lowerBoundOperands, "max"
        )
        printer.print_string(" to ")
        _print_for_bound(
            printer, self.upperBoundMap.data, self.upperBoundOperands, "min"
        )
        if self.step.value.data != 1:
            printer.print_string(f" step {self.step.value.data}")
        if self.inits:
            printer.print_string(" iter_args(")
            for k, (arg, init) in enumerate(
                zip(self.iter_args, self.inits, strict=True)
            ):
                if k:
                    printer.print_string(", ")
                printer.print_ssa_value(arg)
                printer.print_string(" = ")
                printer.print_ssa_value(init)
            printer.print_string(") -> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.body,
            print_entry_block_args=False,
            print_block_terminators=bool(self.inits),
        )
        printer.print_op_attributes(self.attributes)


def _parse_type_list(parser: Parser) -> list[Attribute]:
    """`(t1, t2)` or a single bare `t`, as MLIR's arrow type lists allow."""
    if parser.parse_optional_punctuation("(") is not None:
        if parser.parse_optional_punctuation(")") is not None:
            return []
        types = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_type
        )
        parser.parse_punctuation(")")
        return types
    return [parser.parse_type()]


# --------------------------------------------------------------------------------------
# affine.parallel
# --------------------------------------------------------------------------------------

REDUCTION_IDENTITY: dict[str, float | int] = {
    "addf": 0.0,
    "mulf": 1.0,
    "maximumf": float("-inf"),
    "minimumf": float("inf"),
    "addi": 0,
    "muli": 1,
}
"""The reductions affinec's lowering and interpreter perform, and the value each
starts from."""

REDUCTION_ENUM: dict[str, int] = {
    "addf": 0,
    "addi": 1,
    "andi": 2,
    "assign": 3,
    "maximumf": 4,
    "maxnumf": 5,
    "maxs": 6,
    "maxu": 7,
    "minimumf": 8,
    "minnumf": 9,
    "mins": 10,
    "minu": 11,
    "mulf": 12,
    "muli": 13,
    "ori": 14,
    "xori": 15,
}
"""MLIR's `arith::AtomicRMWKind`, the integers the generic form of `affine.parallel`
stores its reductions as."""

REDUCTION_NAMES = {v: k for k, v in REDUCTION_ENUM.items()}

REDUCTION_KINDS = tuple(REDUCTION_ENUM)
"""Every reduction MLIR's syntax names (the verifier checks which fits a type)."""

_FLOAT_REDUCTIONS = {"addf", "mulf", "maximumf", "maxnumf", "minimumf", "minnumf"}
_INTEGER_REDUCTIONS = {"addi", "muli", "maxs", "maxu", "mins", "minu", "andi", "ori"}


def reduction_fits(kind: str, t: Attribute) -> bool:
    """Whether an `affine.parallel` may reduce values of type `t` with `kind`
    (MLIR's rule: `assign` fits any type, `xori` none)."""
    if kind == "assign":
        return True
    if isinstance(t, IndexType | IntegerType):
        return kind in _INTEGER_REDUCTIONS
    return kind in _FLOAT_REDUCTIONS


def _parse_bound_list(
    parser: Parser, keyword: str
) -> tuple[AffineMap, list[int], list[SSAValue]]:
    """`(0, max(%a, 2), symbol(%n))`: one bound, or a `max`/`min` group, per dimension."""
    space = SSAOperandSpace()
    results: list[AffineExpr] = []
    groups: list[int] = []

    def parse_bound() -> None:
        if parser.parse_optional_keyword(keyword) is not None:
            group = parse_ssa_expr_list(parser, space, Parser.Delimiter.PAREN)
        else:
            group = [parse_ssa_expr(parser, space)]
        results.extend(group)
        groups.append(len(group))

    parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_bound)
    return space.map(results), groups, space.operands(parser)


def _print_bound_list(
    printer: Printer,
    m: AffineMap,
    groups: Sequence[int],
    operands: Sequence[SSAValue],
    keyword: str,
) -> None:
    printer.print_string("(")
    k = 0
    for g, size in enumerate(groups):
        if g:
            printer.print_string(", ")
        if size != 1:
            printer.print_string(f"{keyword}(")
        for j in range(size):
            if j:
                printer.print_string(", ")
            write_ssa_expr(
                m.results[k + j],
                printer.print_string,
                printer.print_ssa_value,
                operands,
                m.num_dims,
            )
        if size != 1:
            printer.print_string(")")
        k += size
    printer.print_string(")")


def _groups_attr(groups: Sequence[int]) -> DenseIntElementsAttr:
    return DenseIntElementsAttr.from_list(TensorType(i32, [len(groups)]), list(groups))


@irdl_op_definition
class ParallelOp(IRDLOperation):
    """A band of parallel loops: `affine.parallel (%i, %j) = (0, 0) to (8, %n) {...}`.

    Each dimension's lower bound is the max of its group of lower-bound results, its
    upper bound the min of its group of upper-bound results. With `reduce`, the body
    yields one value per reduction and the op returns their combination.
    """

    name = "affine.parallel"

    map_operands = var_operand_def(IndexType)
    reductions = prop_def(ArrayAttr[IntegerAttr])
    lowerBoundsMap = prop_def(AffineMapAttr)
    lowerBoundsGroups = prop_def(DenseIntElementsAttr)
    upperBoundsMap = prop_def(AffineMapAttr)
    upperBoundsGroups = prop_def(DenseIntElementsAttr)
    steps = prop_def(ArrayAttr[IntegerAttr[IntegerType]])
    res = var_result_def()

    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        lower: AffineMap,
        lower_groups: Sequence[int],
        upper: AffineMap,
        upper_groups: Sequence[int],
        body: Region | Block,
        *,
        lower_operands: Sequence[SSAValue] = (),
        upper_operands: Sequence[SSAValue] = (),
        steps: Sequence[int] | None = None,
        reductions: Sequence[str] = (),
        result_types: Sequence[Attribute] = (),
    ):
        if isinstance(body, Block):
            body = Region(body)
        if steps is None:
            steps = [1] * len(lower_groups)
        super().__init__(
            operands=[[*lower_operands, *upper_operands]],
            result_types=[result_types],
            properties={
                "reductions": ArrayAttr(
                    [IntegerAttr(REDUCTION_ENUM[r], i64) for r in reductions]
                ),
                "lowerBoundsMap": AffineMapAttr(lower),
                "lowerBoundsGroups": _groups_attr(lower_groups),
                "upperBoundsMap": AffineMapAttr(upper),
                "upperBoundsGroups": _groups_attr(upper_groups),
                "steps": ArrayAttr([IntegerAttr(s, i64) for s in steps]),
            },
            regions=[body],
        )

    @staticmethod
    def from_extents(
        extents: Sequence[int], body: Region | Block, **kwargs: object
    ) -> ParallelOp:
        """The simple band `(0, ..., 0) to (e0, ..., en)`."""
        n = len(extents)
        return ParallelOp(
            AffineMap(0, 0, tuple(AffineExpr.constant(0) for _ in extents)),
            [1] * n,
            AffineMap(0, 0, tuple(AffineExpr.constant(e) for e in extents)),
            [1] * n,
            body,
            **kwargs,  # pyright: ignore[reportArgumentType]
        )

    @property
    def induction_variables(self) -> Sequence[SSAValue]:
        return self.body.block.args

    @property
    def lower_bound_operands(self) -> Sequence[SSAValue]:
        m = self.lowerBoundsMap.data
        return self.map_operands[: m.num_dims + m.num_symbols]

    @property
    def upper_bound_operands(self) -> Sequence[SSAValue]:
        m = self.lowerBoundsMap.data
        return self.map_operands[m.num_dims + m.num_symbols :]

    @property
    def lower_groups(self) -> list[int]:
        return list(self.lowerBoundsGroups.get_values())

    @property
    def upper_groups(self) -> list[int]:
        return list(self.upperBoundsGroups.get_values())

    @property
    def step_values(self) -> list[int]:
        return [s.value.data for s in self.steps.data]

    @property
    def reduction_kinds(self) -> list[str]:
        """The reductions by name (`"addf"`, ...); "?" for a number MLIR lacks."""
        return [REDUCTION_NAMES.get(r.value.data, "?") for r in self.reductions.data]

    def verify_(self) -> None:
        lower, upper = self.lowerBoundsMap.data, self.upperBoundsMap.data
        verify_divisors((*lower.results, *upper.results))
        num_lower = lower.num_dims + lower.num_symbols
        num_upper = upper.num_dims + upper.num_symbols
        if len(self.map_operands) != num_lower + num_upper:
            raise VerifyException(
                f"bound maps take {num_lower + num_upper} operands, "
                f"got {len(self.map_operands)}"
            )
        verify_dims_and_symbols(self, self.lower_bound_operands, lower.num_dims)
        verify_dims_and_symbols(self, self.upper_bound_operands, upper.num_dims)
        n = len(self.body.block.args)
        for what, groups, m in (
            ("lower", self.lower_groups, lower),
            ("upper", self.upper_groups, upper),
        ):
            if len(groups) != n:
                raise VerifyException(
                    f"has {n} induction variables but {len(groups)} {what} bound groups"
                )
            if any(g <= 0 for g in groups) or sum(groups) != len(m.results):
                raise VerifyException(
                    f"{what} bound groups {groups} do not cover "
                    f"the {len(m.results)} results of its {what} bounds map"
                )
        if len(self.steps) != n:
            raise VerifyException(
                f"has {n} induction variables but {len(self.steps)} steps"
            )
        if any(s <= 0 for s in self.step_values):
            raise VerifyException(f"steps must be positive, got {self.step_values}")
        if any(not isinstance(t, IndexType) for t in self.body.block.arg_types):
            raise VerifyException("induction variables must be of index type")
        if len(self.reductions) != len(self.res):
            raise VerifyException(
                f"has {len(self.res)} results but {len(self.reductions)} reductions"
            )
        for r, kind, t in zip(
            self.reductions.data, self.reduction_kinds, self.result_types, strict=True
        ):
            if kind == "?":
                raise VerifyException(
                    f"reduction {r.value.data} is not one of MLIR's (0 to 15)"
                )
            if not reduction_fits(kind, t):
                raise VerifyException("result type cannot match reduction attribute")
        _verify_yield(self, self.body, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> ParallelOp:
        ivs = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_punctuation("=")
        lower, lower_groups, lower_operands = _parse_bound_list(parser, "max")
        parser.parse_keyword("to")
        upper, upper_groups, upper_operands = _parse_bound_list(parser, "min")
        for what, groups in (("lower", lower_groups), ("upper", upper_groups)):
            if len(groups) != len(ivs):
                parser.raise_error(
                    f"{len(ivs)} induction variables but {len(groups)} {what} bounds"
                )
        steps = [1] * len(ivs)
        if parser.parse_optional_keyword("step") is not None:
            pos = parser.pos
            steps = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, lambda: parser.parse_integer(False)
            )
            if len(steps) != len(ivs) or any(s <= 0 for s in steps):
                parser.raise_error(
                    f"expected {len(ivs)} positive steps, got {steps}", pos
                )
        reductions: list[str] = []
        result_types: list[Attribute] = []
        if parser.parse_optional_keyword("reduce") is not None:
            pos = parser.pos
            reductions = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_str_literal
            )
            for r in reductions:
                if r not in REDUCTION_KINDS:
                    parser.raise_error(
                        f"unknown reduction '{r}' (expected one of "
                        f"{', '.join(REDUCTION_KINDS)})",
                        pos,
                    )
            parser.parse_punctuation("->")
            result_types = _parse_type_list(parser)
        body = parser.parse_region([iv.resolve(IndexType()) for iv in ivs])
        _ensure_yield(body.block)
        op = cls(
            lower,
            lower_groups,
            upper,
            upper_groups,
            body,
            lower_operands=lower_operands,
            upper_operands=upper_operands,
            steps=steps,
            reductions=reductions,
            result_types=result_types,
        )
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(" (")
        printer.print_list(self.induction_variables, printer.print_ssa_value)
        printer.print_string(") = ")
        _print_bound_list(
            printer,
            self.lowerBoundsMap.data,
            self.lower_groups,
            self.lower_bound_operands,
            "max",
        )
        printer.print_string(" to ")
        _print_bound_list(
            printer,
            self.upperBoundsMap.data,
            self.upper_groups,
            self.upper_bound_operands,
            "min",
        )
        if any(s != 1 for s in self.step_values):
            printer.print_string(f" step ({', '.join(map(str, self.step_values))})")
        if self.res:
            reductions = ", ".join(f'"{r}"' for r in self.reduction_kinds)
            printer.print_string(f" reduce ({reductions}) -> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.body,
            print_entry_block_args=False,
            print_block_terminators=bool(self.res),
        )
        printer.print_op_attributes(self.attributes)


# --------------------------------------------------------------------------------------
# affine.if
# --------------------------------------------------------------------------------------


@irdl_op_definition
class IfOp(IRDLOperation):
    """`affine.if affine_set<(d0) : (d0 - 1 >= 0)>(%i) -> f32 { ... } else { ... }`."""

    name = "affine.if"

    args = var_operand_def(IndexType)
    res = var_result_def()
    condition = prop_def(AffineSetAttr)

    then_region = region_def("single_block")
    else_region = region_def()

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        condition: AffineSet,
        operands: Sequence[SSAValue],
        then_region: Region | Block,
        else_region: Region | Block | None = None,
        result_types: Sequence[Attribute] = (),
    ):
        if isinstance(then_region, Block):
            then_region = Region(then_region)
        if isinstance(else_region, Block):
            else_region = Region(else_region)
        super().__init__(
            operands=[operands],
            result_types=[result_types],
            properties={"condition": AffineSetAttr(condition)},
            regions=[then_region, else_region or Region()],
        )

    def verify_(self) -> None:
        s = self.condition.data
        verify_divisors(e for c in s.constraints for e in (c.lhs, c.rhs))
        if len(self.args) != s.num_dims + s.num_symbols:
            raise VerifyException(
                f"set takes {s.num_dims + s.num_symbols} operands, got {len(self.args)}"
            )
        verify_dims_and_symbols(self, self.args, s.num_dims)
        for k, region in enumerate(self.regions):
            if region.blocks and region.block.args:
                raise VerifyException(f"region #{k} should have no arguments")
        _verify_yield(self, self.then_region, self.result_types)
        if self.res and not self.else_region.blocks:
            raise VerifyException("has results, so it needs an else region")
        _verify_yield(self, self.else_region, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        pos = parser.pos
        attr = parser.parse_attribute()
        if not isinstance(attr, AffineSetAttr):
            parser.raise_error("expected an affine set", pos)
        s = attr.data
        operands = _parse_operand_lists(parser, s.num_dims, s.num_symbols, pos)
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = _parse_type_list(parser)
        then_region = _parse_body(parser)
        else_region = Region()
        if parser.parse_optional_keyword("else") is not None:
            else_region = _parse_body(parser)
        op = cls(s, operands, then_region, else_region, result_types)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        s = self.condition.data
        printer.print_string(" ")
        print_set_attr(printer, s)
        _print_operand_lists(printer, self.args, s.num_dims)
        if self.res:
            printer.print_string(" -> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.then_region,
            print_entry_block_args=False,
            print_block_terminators=bool(self.res),
        )
        if self.else_region.blocks:
            printer.print_string(" else ")
            printer.print_region(
                self.else_region,
                print_entry_block_args=False,
                print_block_terminators=bool(self.res),
            )
        printer.print_op_attributes(self.attributes)


Affine = Dialect(
    "affine",
    [
        ApplyOp,
        DelinearizeIndexOp,
        DmaStartOp,
        DmaWaitOp,
        ForOp,
        IfOp,
        LinearizeIndexOp,
        LoadOp,
        MaxOp,
        MinOp,
        ParallelOp,
        PrefetchOp,
        StoreOp,
        VectorLoadOp,
        VectorStoreOp,
        YieldOp,
    ],
    [],
)

PASSES_REFUSE = (
    DelinearizeIndexOp,
    DmaStartOp,
    DmaWaitOp,
    LinearizeIndexOp,
    PrefetchOp,
    VectorLoadOp,
    VectorStoreOp,
)
"""Affine ops affinec reads and prints but whose meaning its transformations do not
know: every pass but `lower-affine` refuses them (`affinec.context`)."""
