"""xDSL's memref dialect with MLIR's custom syntax for `memref.cast` and
`memref.global`, which xDSL's ops lack, and MLIR's `memref.prefetch`, which xDSL
does not have:

    %u = memref.cast %a : memref<64x64xf16> to memref<*xf16>
    memref.prefetch %a[%i, %j], read, locality<3>, data : memref<64x64xf16>
    memref.global "private" constant @c : memref<2xf32> = dense<[1.0, 2.0]>
    memref.global @z : memref<3xf16> = uninitialized
    memref.global "private" @y : memref<4xi32>

`MemRef` is xDSL's dialect with these ops in place of xDSL's (same names, operands
and properties; a global's visibility and initial value optional, as MLIR's);
affinec's context registers it, and with it MLIR's checks of `memref.cast`,
`memref.subview` and `memref.reinterpret_cast` (`affinec.dialects.memref_views`)
and of `memref.get_global`.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import StringIO
from typing import Annotated, TypedDict

from xdsl.dialects import memref as xdsl_memref
from xdsl.dialects.builtin import (
    I64,
    BoolAttr,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    UnitAttr,
    UnrankedMemRefType,
    i1,
    i32,
)
from xdsl.ir import Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import NoMemoryEffect, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from affinec.base.diagnostics import OP_CHECKS
from affinec.dialects.memref_views import cast_compatible


@irdl_op_definition
class CastOp(IRDLOperation):
    """`memref.cast`: the same buffer as another memref type (to or from unranked,
    a static size made dynamic or back)."""

    name = "memref.cast"

    source = operand_def(base(MemRefType) | base(UnrankedMemRefType))
    dest = result_def(base(MemRefType) | base(UnrankedMemRefType))

    traits = traits_def(NoMemoryEffect())
    assembly_format = "$source attr-dict `:` type($source) `to` type($dest)"

    def verify_(self) -> None:
        source, dest = self.source.type, self.dest.type
        if not cast_compatible(source, dest):
            raise VerifyException(
                f"operand type '{source}' and result type '{dest}' are cast "
                "incompatible"
            )


@irdl_op_definition
class GlobalOp(IRDLOperation):
    """`memref.global ["visibility"] [constant] @name : type [= initial value]`: a
    named buffer of the module; `= uninitialized` reserves it, no initial value
    declares one defined elsewhere."""

    name = "memref.global"

    sym_name = prop_def(SymbolNameConstraint())
    sym_visibility = opt_prop_def(StringAttr)
    type = prop_def(MemRefType)
    initial_value = opt_prop_def(UnitAttr | DenseIntOrFPElementsAttr)
    constant = opt_prop_def(UnitAttr)
    alignment = opt_prop_def(IntegerAttr[I64])

    traits = traits_def(SymbolOpInterface())

    def verify_(self) -> None:
        value = self.initial_value
        if isinstance(value, DenseIntOrFPElementsAttr):
            t = value.get_type()
            shape, expected = tuple(t.get_shape()), tuple(self.type.get_shape())
            if shape != expected:
                raise VerifyException(
                    "initial value shape expected to be "
                    f"{', '.join(map(str, expected))} but was "
                    f"{', '.join(map(str, shape))}"
                )
            if t.get_element_type() != self.type.element_type:
                raise VerifyException(
                    "initial value element expected to be of type "
                    f"'{self.type.element_type}', but was of type "
                    f"'{t.get_element_type()}'"
                )
        if self.alignment is not None:
            align = self.alignment.value.data
            if align <= 0 or align & (align - 1):
                raise VerifyException(
                    f"alignment attribute value {align} is not a power of 2"
                )

    @classmethod
    def parse(cls, parser: Parser) -> GlobalOp:
        visibility = parser.parse_optional_str_literal()
        constant = parser.parse_optional_keyword("constant") is not None
        name = parser.parse_symbol_name()
        parser.parse_punctuation(":")
        pos = parser.pos
        t = parser.parse_type()
        if not isinstance(t, MemRefType):
            parser.raise_error(f"type should be static shaped memref, but got {t}", pos)
        value = None
        if parser.parse_optional_punctuation("=") is not None:
            if parser.parse_optional_keyword("uninitialized") is not None:
                value = UnitAttr()
            else:
                # the literal's type is the memref's, as a tensor (MLIR's form)
                parser.parse_keyword("dense")
                value = parser.parse_dense_int_or_fp_elements_attr(
                    TensorType(t.element_type, t.get_shape())
                )
        attrs = parser.parse_optional_attr_dict()
        op = cls.create(
            properties={
                "sym_name": name,
                "sym_visibility": None
                if visibility is None
                else StringAttr(visibility),
                "type": t,
                "initial_value": value,
                "constant": UnitAttr() if constant else None,
                "alignment": attrs.pop("alignment", None),
            }
        )
        op.properties = {k: v for k, v in op.properties.items() if v is not None}
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(" ")
            printer.print_string_literal(self.sym_visibility.data)
        if self.constant is not None:
            printer.print_string(" constant")
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" : ")
        printer.print_attribute(self.type)
        if isinstance(self.initial_value, UnitAttr):
            printer.print_string(" = uninitialized")
        elif self.initial_value is not None:
            # MLIR's form: the literal without its type (the memref's, as a tensor)
            printer.print_string(" = ")
            printed = StringIO()
            Printer(stream=printed).print_attribute(self.initial_value)
            printer.print_string(printed.getvalue().rsplit(" : ", 1)[0])
        attrs = dict(self.attributes)
        if self.alignment is not None:
            attrs["alignment"] = self.alignment
        printer.print_op_attributes(attrs)


def _names_a_global_of_its_type(op: Operation) -> str | None:
    """MLIR's check of `memref.get_global` (xDSL's verifier has none): the symbol
    is a `memref.global` of the result's type."""
    assert isinstance(op, xdsl_memref.GetGlobalOp)
    symbol = SymbolTable.lookup_symbol(op, op.name_)
    name = op.name_.string_value()
    if not isinstance(symbol, GlobalOp | xdsl_memref.GlobalOp):
        return f"'{name}' does not reference a valid global memref"
    if symbol.type != op.memref.type:
        return (
            f"result type '{op.memref.type}' does not match type '{symbol.type}' of "
            f"the global memref @{name}"
        )
    return None


OP_CHECKS[xdsl_memref.GetGlobalOp] = _names_a_global_of_its_type


class PrefetchHints(TypedDict):
    """The hints a prefetch op is built from, as its constructor takes them."""

    is_write: bool
    locality: int
    is_data_cache: bool


def parse_prefetch_hints(parser: Parser) -> PrefetchHints:
    """`, read, locality<3>, data`: the hints `memref.prefetch` and
    `affine.prefetch` write after their indices, with MLIR's errors."""
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
    return PrefetchHints(
        is_write=access == "write",
        locality=locality,
        is_data_cache=cache == "data",
    )


def prefetch_hints_text(op: Operation) -> str:
    """`, read, locality<3>, data`: the hints of a prefetch op (one with
    `PrefetchOp`'s properties) as `parse_prefetch_hints` reads them."""
    is_write, locality, is_data_cache = (
        op.properties[name] for name in ("isWrite", "localityHint", "isDataCache")
    )
    assert isinstance(is_write, IntegerAttr) and isinstance(locality, IntegerAttr)
    assert isinstance(is_data_cache, IntegerAttr)
    access = "write" if is_write.value.data else "read"
    cache = "data" if is_data_cache.value.data else "instr"
    return f", {access}, locality<{locality.value.data}>, {cache}"


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`memref.prefetch %A[%i, %j], read, locality<3>, data : memref<...>`: a hint
    that the element will be read (or written) soon, kept in the data (or
    instruction) cache at a locality from 0 (none) to 3 (keep). What
    `lower-affine` makes of `affine.prefetch`; it computes nothing."""

    name = "memref.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    isWrite = prop_def(IntegerAttr[Annotated[IntegerType, i1]])
    localityHint = prop_def(IntegerAttr[Annotated[IntegerType, i32]])
    isDataCache = prop_def(IntegerAttr[Annotated[IntegerType, i1]])

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        *,
        is_write: bool,
        locality: int,
        is_data_cache: bool,
    ):
        super().__init__(
            operands=[memref, indices],
            properties={
                "isWrite": BoolAttr.from_bool(is_write),
                "localityHint": IntegerAttr(locality, i32),
                "isDataCache": BoolAttr.from_bool(is_data_cache),
            },
        )

    def verify_(self) -> None:
        if not 0 <= self.localityHint.value.data <= 3:
            raise VerifyException(
                "attribute 'localityHint' failed to satisfy constraint: 32-bit "
                "signless integer attribute whose minimum value is 0 whose maximum "
                "value is 3"
            )
        assert isinstance(self.memref.type, MemRefType)
        if len(self.indices) != self.memref.type.get_num_dims():
            raise VerifyException("too few indices")

    @classmethod
    def parse(cls, parser: Parser) -> PrefetchOp:
        memref = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        hints = parse_prefetch_hints(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        memref_type = parser.parse_type()
        index = IndexType()
        op = cls(
            parser.resolve_operand(memref, memref_type),
            [parser.resolve_operand(i, index) for i in indices],
            **hints,
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.memref)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_operand)
        printer.print_string("]" + prefetch_hints_text(self))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.memref.type)


_OURS = {xdsl_memref.CastOp: CastOp, xdsl_memref.GlobalOp: GlobalOp}

MemRef = Dialect(
    "memref",
    [_OURS.get(op, op) for op in xdsl_memref.MemRef.operations] + [PrefetchOp],
    list(xdsl_memref.MemRef.attributes),
)
