"""What the gpu dialect's ops share: the names of its attributes, its memory spaces
(numbered, and MLIR's symbolic `#gpu.address_space`), the dimensions x, y and z, the
`async [%t0, %t1]` prefix of its async ops, and the memory attributions (workgroup and
private buffers as entry block arguments) of `gpu.func` and `gpu.launch`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, MemRefType, NoneAttr, i32
from xdsl.dialects.gpu import AsyncTokenType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    SSAValue,
)
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from affinec.base.diagnostics import DIALECT_ATTRIBUTE_CHECKS

CONTAINER_MODULE = "gpu.container_module"
"""Unit attribute on a builtin module that holds `gpu.module`s (as MLIR requires)."""

KERNEL = "gpu.kernel"
"""Unit attribute marking a `gpu.func` as a kernel (MLIR's discardable attribute)."""

WORKGROUP_ATTRIBUTIONS = "workgroup_attributions"
"""How many of a `gpu.func`'s (or `gpu.launch`'s) entry arguments are workgroup
buffers: an attribute, as in MLIR's generic form."""

WORKGROUP_ADDRESS_SPACE = 3
"""The memory space of shared memory (CUDA's `__shared__`, PTX's `.shared`)."""

PRIVATE_ADDRESS_SPACE = 5
"""The memory space of a thread's own memory (registers or `.local`), as NVVM numbers
it. Before the gpu level it marks a buffer each of whose elements only one thread
ever touches (`affinec-place-buffers`)."""


class AddressSpace(StrEnum):
    GLOBAL = "global"
    WORKGROUP = "workgroup"
    PRIVATE = "private"


@irdl_attr_definition
class AddressSpaceAttr(EnumAttribute[AddressSpace]):
    """`#gpu.address_space<workgroup>`: MLIR's symbolic memory spaces, which the
    NVVM lowering numbers 1, 3 and 5."""

    name = "gpu.address_space"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> AddressSpace:
        # MLIR writes the value in angle brackets; xDSL's enum attributes do not.
        with parser.in_angle_brackets():
            return super().parse_parameter(parser)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")


_NUMBERED_SPACES = {
    AddressSpace.GLOBAL: 1,
    AddressSpace.WORKGROUP: WORKGROUP_ADDRESS_SPACE,
    AddressSpace.PRIVATE: PRIVATE_ADDRESS_SPACE,
}


def memory_space(t: Attribute) -> int:
    """The memory space of a memref type as a number (0 when it has none)."""
    space = getattr(t, "memory_space", None)
    if isinstance(space, AddressSpaceAttr):
        return _NUMBERED_SPACES[space.data]
    return space.value.data if isinstance(space, IntegerAttr) else 0


def in_memory_space(t: MemRefType, space: int) -> MemRefType:
    """`t` moved to memory space `space` (0: none)."""
    return MemRefType(
        t.get_element_type(),
        t.get_shape(),
        t.layout,
        IntegerAttr(space, 64) if space else NoneAttr(),
    )


DIMENSIONS = ("x", "y", "z")


# --------------------------------------------------------------------------------------
# The async prefix: `async [%t0, %t1]`
# --------------------------------------------------------------------------------------


def parse_async(parser: Parser) -> tuple[bool, list[SSAValue]]:
    """`async [%t0, %t1]`, either part optional, as MLIR's async ops begin."""
    is_async = parser.parse_optional_keyword("async") is not None
    deps = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(AsyncTokenType())
    )
    return is_async, deps or []


def print_async(
    printer: Printer, token: SSAValue | None, deps: Sequence[SSAValue]
) -> None:
    if token is not None:
        printer.print_string(" async")
    if deps:
        printer.print_string(" [")
        printer.print_list(deps, printer.print_ssa_value)
        printer.print_string("]")


# --------------------------------------------------------------------------------------
# Memory attributions, shared by gpu.func and gpu.launch
# --------------------------------------------------------------------------------------


def print_attributions(printer: Printer, keyword: str, args: Sequence[BlockArgument]):
    if not args:
        return
    printer.print_string(f" {keyword}(")
    for k, arg in enumerate(args):
        if k:
            printer.print_string(", ")
        printer.print_ssa_value(arg)
        printer.print_string(" : ")
        printer.print_attribute(arg.type)
    printer.print_string(")")


def parse_attributions(parser: Parser, keyword: str) -> list[Parser.Argument]:
    if parser.parse_optional_keyword(keyword) is None:
        return []

    def parse_one() -> Parser.Argument:
        arg = parser.parse_argument(expect_type=False)
        parser.parse_punctuation(":")
        return arg.resolve(parser.parse_type())

    return parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_one)


def attributions(block: Block, start: int, count: int) -> Sequence[BlockArgument]:
    return block.args[start : start + count]


def attribution_count(attr: IntegerAttr | None) -> int:
    return 0 if attr is None else attr.value.data


def verify_attributions(args: Sequence[BlockArgument], space: int, what: str) -> None:
    for arg in args:
        if not isinstance(arg.type, MemRefType):
            raise VerifyException(
                f"expected memref type in attribution (a {what} attribution of type "
                f"{arg.type})"
            )
        if memory_space(arg.type) != space:
            raise VerifyException(
                f"expected memory space {what} in attribution (of type {arg.type}; "
                f"{what} is memory space {space})"
            )


def _known_sizes(name: str):
    """The check of `gpu.known_block_size`/`gpu.known_grid_size` on any op: three
    i32 sizes, in MLIR's words."""

    def check(attr) -> str | None:
        if not (isinstance(attr, DenseArrayBase) and attr.elt_type == i32):
            return f"{name} must be a dense i32 array"
        if len(attr.get_values()) != 3:
            return f"{name} must contain exactly 3 elements"
        return None

    return check


for _name in ("gpu.known_block_size", "gpu.known_grid_size"):
    DIALECT_ATTRIBUTE_CHECKS[_name] = _known_sizes(_name)
