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
`steps`, `reductions`, `condition`, ...), so the generic form matches too. Reduction
kinds of `affine.parallel` are strings (`"addf"`, `"maximumf"`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseIntElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
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
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
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


def print_memref_access(
    printer: Printer,
    memref: SSAValue,
    m: AffineMap,
    indices: Sequence[SSAValue],
) -> None:
    """`%A[%i, %j + symbol(%n)] : memref<...>`."""
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
    printer.print_string(" : ")
    printer.print_attribute(memref.type)


def parse_memref_access(
    parser: Parser,
) -> tuple[SSAValue, AffineMap, list[SSAValue], MemRefType]:
    """Parse `%A[<exprs of %dims and symbol(%syms)>] : memref<...>`."""
    unresolved = parser.parse_unresolved_operand()
    space = SSAOperandSpace()
    results = parse_ssa_expr_list(parser, space)
    indices = space.operands(parser)
    parser.parse_punctuation(":")
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error(f"expected a memref type, got {memref_type}", pos)
    memref = parser.resolve_operand(unresolved, memref_type)
    return memref, space.map(results), indices, memref_type


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
        return cls(operands, attr.data)

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_map_attr(printer, self.map.data)
        _print_operand_lists(printer, self.mapOperands, self.map.data.num_dims)


@irdl_op_definition
class ApplyOp(_MapOp):
    """`%r = affine.apply affine_map<(d0) -> (d0 + 1)>(%i)`: one map, one result."""

    name = "affine.apply"

    def verify_(self) -> None:
        super().verify_()
        if len(self.map.data.results) != 1:
            raise VerifyException("needs a map with exactly one result")


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
        memref, m, indices, _ = parse_memref_access(parser)
        return cls(memref, indices, m)

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_memref_access(printer, self.memref, self.map.data, self.indices)


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
        memref, m, indices, memref_type = parse_memref_access(parser)
        value = parser.resolve_operand(unresolved_value, memref_type.get_element_type())
        return cls(value, memref, indices, m)

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_memref_access(printer, self.memref, self.map.data, self.indices)


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
        _verify_map_operands(self, self.lowerBoundMap.data, self.lowerBoundOperands)
        _verify_map_operands(self, self.upperBoundMap.data, self.upperBoundOperands)
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
"""The reductions an `affine.parallel` may perform, and the value each starts from."""

REDUCTION_KINDS = tuple(REDUCTION_IDENTITY)


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
    reductions = prop_def(ArrayAttr[StringAttr])
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
                "reductions": ArrayAttr([StringAttr(r) for r in reductions]),
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
        for r in self.reductions.data:
            if r.data not in REDUCTION_KINDS:
                raise VerifyException(
                    f"reduction '{r.data}' is not one of {', '.join(REDUCTION_KINDS)}"
                )
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
            reductions = ", ".join(f'"{r.data}"' for r in self.reductions.data)
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
        then_region = parser.parse_region()
        _ensure_yield(then_region.block)
        else_region = Region()
        if parser.parse_optional_keyword("else") is not None:
            else_region = parser.parse_region()
            _ensure_yield(else_region.block)
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
        if self.else_region.blocks and (
            self.res or len(self.else_region.block.ops) > 1
        ):
            printer.print_string(" else ")
            printer.print_region(
                self.else_region,
                print_entry_block_args=False,
                print_block_terminators=bool(self.res),
            )
        printer.print_op_attributes(self.attributes)


Affine = Dialect(
    "affine",
    [ApplyOp, ForOp, IfOp, LoadOp, MaxOp, MinOp, ParallelOp, StoreOp, YieldOp],
    [],
)
