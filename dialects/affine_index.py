"""The affine ops that compute indices: `affine.apply`, `affine.min`, `affine.max`
(maps of their operands) and `affine.delinearize_index` / `affine.linearize_index`
(coordinates in a row-major basis and back)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AffineMapAttr,
    BoolAttr,
    DenseArrayBase,
    IndexType,
    UnitAttr,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.affine_syntax import (
    parse_map_and_operands,
    print_map_attr,
    print_operand_lists,
)
from affinec.dialects.affine_validity import (
    affine_scope,
    is_valid_dim,
    is_valid_symbol,
    verify_map_operands,
)

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
        verify_map_operands(self, self.map.data, self.mapOperands)
        if not self.map.data.results:
            raise VerifyException("affine map expect at least one result")

    @classmethod
    def parse(cls, parser: Parser):
        attr, operands = parse_map_and_operands(parser, cls.name)
        op = cls(operands, attr.data)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_map_attr(printer, self.map.data)
        print_operand_lists(printer, self.mapOperands, self.map.data.num_dims)
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
# affine.delinearize_index, affine.linearize_index
# --------------------------------------------------------------------------------------

DYNAMIC_BASIS = -(2**63)
"""A dynamic entry of `static_basis` (MLIR's `ShapedType::kDynamic`)."""


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
        basis = _parse_basis(parser)
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
        printer.print_string(" into ")
        _print_basis(printer, self.basis)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(self.result_types, printer.print_attribute)


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
