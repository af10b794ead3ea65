"""The affine ops with regions but `affine.parallel`: `affine.for`, `affine.if`, and
`affine.yield`, the terminator of all of them, with the checks of what they yield."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import AffineMapAttr, AffineSetAttr, IndexType, IntegerAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap, AffineSet
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from affinec.base.diagnostics import OpError
from affinec.dialects.affine_syntax import (
    parse_index_literal,
    parse_map_and_operands,
    parse_operand_lists,
    parse_optional_index_literal,
    parse_type_list,
    print_map_attr,
    print_operand_lists,
    print_set_attr,
)
from affinec.dialects.affine_validity import (
    verify_dims_and_symbols,
    verify_divisors,
    verify_map_operands,
)

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


def ensure_yield(block: Block) -> None:
    """Add the `affine.yield` that the custom syntax leaves implicit."""
    if not isinstance(block.last_op, YieldOp):
        block.add_op(YieldOp())


def _parse_body(parser: Parser) -> Region:
    """A region without arguments, as `affine.if` writes its branches: `{}` (even
    with nothing inside) is one block ending in the implicit `affine.yield`."""
    region = parser.parse_region()
    if not region.blocks:
        region.add_block(Block())
    ensure_yield(region.block)
    return region


def verify_yield(op: Operation, region: Region, types: Sequence[Attribute]) -> None:
    if not region.blocks:
        return
    if len(region.blocks) != 1:
        raise VerifyException("region must have a single block")
    term = region.block.last_op
    if not isinstance(term, YieldOp):
        raise VerifyException("region must end in 'affine.yield'")
    if len(term.arguments) != len(types):
        raise OpError(
            term,
            "parent of yield must have same number of results as the yield operands",
        )
    if tuple(term.arguments.types) != tuple(types):
        # At the yield, as MLIR reports it.
        raise OpError(
            term,
            "types mismatch between yield op and its parent (it yields "
            f"({', '.join(map(str, term.arguments.types))}), the results are "
            f"({', '.join(map(str, types))}))",
        )


# --------------------------------------------------------------------------------------
# affine.for
# --------------------------------------------------------------------------------------


_OUT_OF_RANGE = "integer constant out of range for attribute"
"""MLIR's words for a bound or step that no `index` holds."""


def _parse_for_bound(parser: Parser, keyword: str) -> tuple[AffineMap, list[SSAValue]]:
    """One `affine.for` bound: `%n`, `42`, or `[max|min] affine_map<...>(...)[...]`."""
    prefixed = parser.parse_optional_keyword(keyword) is not None
    if (operand := parser.parse_optional_operand(IndexType())) is not None:
        return AffineMap(0, 1, (AffineExpr.symbol(0),)), [operand]
    if (
        not prefixed
        and (value := parse_optional_index_literal(parser, _OUT_OF_RANGE)) is not None
    ):
        return AffineMap.constant_map(value), []
    attr, operands = parse_map_and_operands(parser, "affine.for")
    if len(attr.data.results) > 1 and not prefixed:
        which = "lower" if keyword == "max" else "upper"
        parser.raise_error(
            f"{which} loop bound affine map with multiple results requires "
            f"'{keyword}' prefix"
        )
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
    print_operand_lists(printer, operands, m.num_dims)


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
            verify_map_operands(self, m, operands)
            verify_dims_and_symbols(self, operands, m.num_dims)
        if self.step.value.data <= 0:
            raise VerifyException(f"step must be positive, got {self.step.value.data}")
        for which, m in (
            ("lower", self.lowerBoundMap.data),
            ("upper", self.upperBoundMap.data),
        ):
            if not m.results:
                raise VerifyException(
                    f"expected {which} bound map to have at least one result"
                )
        arg_types = tuple(self.body.block.arg_types)
        expected = (IndexType(), *self.inits.types)
        if arg_types != expected:
            raise VerifyException(
                "block arguments must be the index induction variable "
                "followed by one argument per iter_arg of the same type"
            )
        if tuple(self.inits.types) != tuple(self.result_types):
            raise VerifyException("iter_args and results differ in type")
        verify_yield(self, self.body, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        iv = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lower, lower_operands = _parse_for_bound(parser, "max")
        if parser.parse_optional_keyword("to") is None:
            parser.raise_error("expected 'to' between bounds")
        upper, upper_operands = _parse_for_bound(parser, "min")
        step = 1
        if parser.parse_optional_keyword("step") is not None:
            pos = parser.pos
            step = parse_index_literal(parser, _OUT_OF_RANGE)
            if step <= 0:
                parser.raise_error(
                    "expected step to be representable as a positive signed integer",
                    pos,
                )
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
            types = parse_type_list(parser)
            if len(types) != len(pairs):
                parser.raise_error(
                    "mismatch between the number of loop-carried values and results"
                )
            for (arg, init), t in zip(pairs, types, strict=True):
                iter_args.append(arg.resolve(t))
                inits.append(parser.resolve_operand(init, t))
        body = parser.parse_region([iv.resolve(IndexType()), *iter_args])
        ensure_yield(body.block)
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
        verify_yield(self, self.then_region, self.result_types)
        if self.res and not self.else_region.blocks:
            raise VerifyException("has results, so it needs an else region")
        verify_yield(self, self.else_region, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        pos = parser.pos
        attr = parser.parse_attribute()
        if not isinstance(attr, AffineSetAttr):
            parser.raise_error("expected an affine set", pos)
        s = attr.data
        operands = parse_operand_lists(
            parser, s.num_dims, s.num_symbols, pos, "affine.if"
        )
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parse_type_list(parser)
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
        print_operand_lists(printer, self.args, s.num_dims)
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
