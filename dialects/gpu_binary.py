"""`gpu.binary`: a compiled `gpu.module` (MLIR's `gpu-module-to-binary` makes it), its
objects `#gpu.object` and the handler `#gpu.select_object` that picks one at launch,
in MLIR's syntax:

    gpu.binary @kernels <#gpu.select_object<1 : i64>> [
      #gpu.object<#nvvm.target, assembly = "...PTX...">,
      #gpu.object<#nvvm.target<chip = "sm_90">, properties = {O = 3 : i32}, bin = "...">
    ]

affinec compiles its kernels itself (PTX through LLVM, loaded by the runtime), so it
makes no binaries; it reads and prints them, and its passes leave them alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    NoneAttr,
    StringAttr,
    SymbolNameConstraint,
    i64,
)
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    param_def,
    prop_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.nvvm_target import TargetAttr

OBJECT_FORMATS = ("offload", "assembly", "bin", "fatbin")
"""How an object holds its code (MLIR's `gpu::CompilationTarget`); `fatbin` is the
default, and not printed."""


@irdl_attr_definition
class ObjectAttr(ParametrizedAttribute):
    """`#gpu.object<#nvvm.target, properties = {...}, assembly = "...">`: compiled code
    for one target."""

    name = "gpu.object"

    target: Attribute = param_def()
    format: StringAttr = param_def()
    properties: DictionaryAttr | NoneAttr = param_def()
    object: StringAttr = param_def()

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        target = parser.parse_attribute()
        parser.parse_punctuation(",")
        properties: DictionaryAttr | NoneAttr = NoneAttr()
        if parser.parse_optional_keyword("properties") is not None:
            parser.parse_punctuation("=")
            pos = parser.pos
            value = parser.parse_attribute()
            if not isinstance(value, DictionaryAttr):
                parser.raise_error("expected a dictionary of properties", pos)
            properties = value
            parser.parse_punctuation(",")
        pos = parser.pos
        kind = "fatbin"
        word = parser.parse_optional_identifier()
        if word is not None:
            if word not in OBJECT_FORMATS:
                parser.raise_error(
                    f"expected an object format ({', '.join(OBJECT_FORMATS)})", pos
                )
            kind = word
            parser.parse_punctuation("=")
        code = parser.parse_str_literal()
        parser.parse_punctuation(">")
        return (target, StringAttr(kind), properties, StringAttr(code))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_attribute(self.target)
        printer.print_string(", ")
        if isinstance(self.properties, DictionaryAttr):
            printer.print_string("properties = ")
            printer.print_attribute(self.properties)
            printer.print_string(", ")
        if self.format.data != "fatbin":
            printer.print_string(f"{self.format.data} = ")
        printer.print_attribute(self.object)
        printer.print_string(">")

    def verify(self) -> None:
        if self.format.data not in OBJECT_FORMATS:
            raise VerifyException(f"unknown object format '{self.format.data}'")


@irdl_attr_definition
class SelectObjectAttr(ParametrizedAttribute):
    """`#gpu.select_object<1 : i64>` (the object at that index) or
    `#gpu.select_object<#nvvm.target>` (the object for that target); bare, the
    first object."""

    name = "gpu.select_object"

    target: Attribute = param_def()
    """An index (`IntegerAttr`), a target, or `NoneAttr` for the first object."""

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        if parser.parse_optional_punctuation("<") is None:
            return (NoneAttr(),)
        if (index := parser.parse_optional_integer()) is not None:
            target: Attribute = IntegerAttr(index, i64)
            if parser.parse_optional_punctuation(":") is not None:
                target = IntegerAttr(index, parser.parse_type())
        else:
            target = parser.parse_attribute()
        parser.parse_punctuation(">")
        return (target,)

    def verify(self) -> None:
        if isinstance(self.target, IntegerAttr):
            if self.target.value.data < 0:
                raise VerifyException("the object index must be positive")
        elif not isinstance(self.target, NoneAttr | TargetAttr):
            raise VerifyException("the target attribute must be a GPU Target attribute")

    def print_parameters(self, printer: Printer) -> None:
        if isinstance(self.target, NoneAttr):
            return
        printer.print_string("<")
        printer.print_attribute(self.target)
        printer.print_string(">")


@irdl_op_definition
class BinaryOp(IRDLOperation):
    """`gpu.binary @name <#gpu.select_object<...>> [#gpu.object<...>, ...]`."""

    name = "gpu.binary"
    sym_name = prop_def(SymbolNameConstraint())
    objects = prop_def(ArrayAttr[ObjectAttr])
    offloadingHandler = opt_prop_def(Attribute)
    traits = traits_def(SymbolOpInterface())

    def __init__(
        self,
        name: str,
        objects: Sequence[ObjectAttr],
        handler: Attribute | None = None,
    ):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "objects": ArrayAttr(objects),
                "offloadingHandler": handler or SelectObjectAttr(NoneAttr()),
            }
        )

    def verify_(self) -> None:
        if not self.objects.data:
            raise VerifyException(
                "attribute 'objects' failed to satisfy constraint: an array of GPU "
                "object attributes with at least 1 elements"
            )

    @classmethod
    def parse(cls, parser: Parser) -> BinaryOp:
        name = parser.parse_symbol_name()
        handler = None
        if parser.parse_optional_punctuation("<") is not None:
            handler = parser.parse_attribute()
            parser.parse_punctuation(">")
        attrs = parser.parse_optional_attr_dict()
        pos = parser.pos
        objects = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_attribute
        )
        if not all(isinstance(o, ObjectAttr) for o in objects):
            parser.raise_error("expected a list of #gpu.object", pos)
        op = cls(name.data, objects, handler)  # pyright: ignore[reportArgumentType]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        handler = self.offloadingHandler
        if handler is not None and handler != SelectObjectAttr(NoneAttr()):
            printer.print_string(" <")
            printer.print_attribute(handler)
            printer.print_string(">")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" [")
        printer.print_list(self.objects.data, printer.print_attribute)
        printer.print_string("]")
