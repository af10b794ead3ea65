"""The asynchronous copies of the nvvm dialect (sm_80's `cp.async`):
`nvvm.cp.async.shared.global` (start copying 4, 8 or 16 bytes from global to shared
memory, with its cache modifier `#nvvm.load_cache_modifier`),
`nvvm.cp.async.commit.group` and `nvvm.cp.async.wait.group`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntAttr, IntegerAttr, IntegerType, i32
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from affinec.dialects.nvvm_intrinsics import IntrinsicOp


class LoadCacheModifier(StrEnum):
    CA = "ca"
    CG = "cg"


@irdl_attr_definition
class LoadCacheModifierAttr(EnumAttribute[LoadCacheModifier]):
    """`cp.async`'s cache operator: `ca` (cache in L1 too) or `cg` (L2 only, 16-byte
    copies only)."""

    name = "nvvm.load_cache_modifier"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> LoadCacheModifier:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(LoadCacheModifier)


# --------------------------------------------------------------------------------------
# Asynchronous copies
# --------------------------------------------------------------------------------------


@irdl_op_definition
class CpAsyncOp(IntrinsicOp):
    """`nvvm.cp.async.shared.global`: start copying `size` bytes (4, 8 or 16) from
    global to shared memory; with `cpSize` (i32 bytes, at most `size`) only that many
    are read and the rest of the destination is zero-filled.

        nvvm.cp.async.shared.global %dst, %src, 16, cache = cg
            : !llvm.ptr<3>, !llvm.ptr<1>
        nvvm.cp.async.shared.global %dst, %src, 16, cache = cg, %bytes
            : !llvm.ptr<3>, !llvm.ptr<1>, i32
    """

    name = "nvvm.cp.async.shared.global"

    dst = operand_def(LLVMPointerType)
    src = operand_def(LLVMPointerType)
    cpSize = opt_operand_def(IntegerType)
    size = prop_def(IntegerAttr)
    modifier = prop_def(LoadCacheModifierAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        size: int,
        bypass_l1: bool,
        cp_size: SSAValue | Operation | None = None,
    ):
        modifier = LoadCacheModifier.CG if bypass_l1 else LoadCacheModifier.CA
        super().__init__(
            operands=[
                SSAValue.get(dst),
                SSAValue.get(src),
                [] if cp_size is None else [SSAValue.get(cp_size)],
            ],
            properties={
                "size": IntegerAttr(size, i32),
                "modifier": LoadCacheModifierAttr(modifier),
            },
        )

    @property
    def bytes(self) -> int:
        return self.size.value.data

    def intrinsic(self) -> str:
        suffix = ".s" if self.cpSize is not None else ""
        return (
            f"llvm.nvvm.cp.async.{self.modifier.data.value}.shared.global."
            f"{self.bytes}{suffix}"
        )

    def verify_(self) -> None:
        if self.bytes not in (4, 8, 16):
            raise VerifyException(f"size must be 4, 8 or 16 bytes, got {self.bytes}")
        if self.modifier.data == LoadCacheModifier.CG and self.bytes != 16:
            raise VerifyException("cache = cg copies 16 bytes only")
        for what, ptr, space in (("dst", self.dst, 3), ("src", self.src, 1)):
            addr = ptr.type.addr_space  # pyright: ignore[reportAttributeAccessIssue]
            if not isinstance(addr, IntAttr) or addr.data != space:
                raise VerifyException(
                    f"{what} must be an !llvm.ptr<{space}>, got {ptr.type}"
                )
        if self.cpSize is not None and self.cpSize.type != i32:
            raise VerifyException(f"cpSize must be an i32, got {self.cpSize.type}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list((self.dst, self.src), printer.print_ssa_value)
        printer.print_string(f", {self.bytes}, cache = {self.modifier.data.value}")
        if self.cpSize is not None:
            printer.print_string(", ")
            printer.print_ssa_value(self.cpSize)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.operands], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncOp:
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        src = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        size = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation(",")
        parser.parse_keyword("cache")
        parser.parse_punctuation("=")
        modifier = parser.parse_str_enum(LoadCacheModifier)
        cp_size = None
        if parser.parse_optional_punctuation(",") is not None:
            cp_size = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        while parser.parse_optional_punctuation(",") is not None:
            types.append(parser.parse_type())
        names = [dst, src] + ([cp_size] if cp_size is not None else [])
        if len(types) != len(names):
            parser.raise_error(f"expected {len(names)} operand types")
        values = [
            parser.resolve_operand(v, t) for v, t in zip(names, types, strict=True)
        ]
        op = cls(
            values[0],
            values[1],
            size,
            modifier == LoadCacheModifier.CG,
            values[2] if cp_size is not None else None,
        )
        op.attributes |= attributes
        return op


@irdl_op_definition
class CpAsyncCommitGroupOp(IntrinsicOp):
    """`nvvm.cp.async.commit.group`: the thread's copies started since the last
    group form a group."""

    name = "nvvm.cp.async.commit.group"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.cp.async.commit.group"
    assembly_format = "attr-dict"


@irdl_op_definition
class CpAsyncWaitGroupOp(IntrinsicOp):
    """`nvvm.cp.async.wait.group N`: wait until at most N of the thread's groups are
    in flight."""

    name = "nvvm.cp.async.wait.group"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.cp.async.wait.group"
    n = prop_def(IntegerAttr)

    def __init__(self, n: int):
        super().__init__(properties={"n": IntegerAttr(n, i32)})

    @property
    def groups(self) -> int:
        return self.n.value.data

    def immediates(self) -> tuple[int, ...]:
        return (self.groups,)

    def verify_(self) -> None:
        if not 0 <= self.groups <= 7:
            raise VerifyException(f"n must be between 0 and 7, got {self.groups}")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.groups}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncWaitGroupOp:
        op = cls(parser.parse_integer(allow_boolean=False, allow_negative=False))
        op.attributes |= parser.parse_optional_attr_dict()
        return op
