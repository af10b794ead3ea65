"""nvgpu's asynchronous copies, as MLIR's: `device_async_copy` (`cp.async` of 4, 8
or 16 bytes a thread, global to shared memory, with optional zero-fill),
`device_async_create_group` and `device_async_wait`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    i32,
)
from xdsl.ir import (
    Operation,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands
from affinec.dialects.nvgpu_common import (
    NOT_SHARED,
    SHARED_MEMORY_SPACE,
    DeviceAsyncTokenType,
    check_indices,
    check_row_major,
    element_bitwidth,
    last_dim_unit_stride,
    memory_space_of,
    mlir_type_text,
)

# --------------------------------------------------------------------------------------
# Asynchronous copies
# --------------------------------------------------------------------------------------


COPY_BYTES = (4, 8, 16)
"""What one `cp.async` copies."""


@irdl_op_definition
class DeviceAsyncCopyOp(IRDLOperation):
    """`nvgpu.device_async_copy`: start copying `dstElements` contiguous elements from
    global to shared memory (4, 8 or 16 bytes); the data is there only after a
    `device_async_wait` that covers the copy's group.

        %t = nvgpu.device_async_copy %src[%i, %j], %dst[%k, %l], 8
            : memref<64x64xf16> to memref<16x40xf16, 3>
        %t2 = nvgpu.device_async_copy %src[%i, %j], %dst[%k, %l], 8, %valid
            : memref<64x64xf16> to memref<16x40xf16, 3>

    With `%valid` (index), only that many elements are read from the source and the
    rest of the destination is zero-filled. `bypassL1` (16-byte copies only) lowers to
    `cp.async.cg`, otherwise `cp.async.ca`.
    """

    name = "nvgpu.device_async_copy"

    dst = operand_def(MemRefType)
    dstIndices = var_operand_def(IndexType)
    src = operand_def(MemRefType)
    srcIndices = var_operand_def(IndexType)
    srcElements = opt_operand_def(IndexType)
    dstElements = prop_def(IntegerAttr)
    bypassL1 = opt_prop_def(UnitAttr)
    asyncToken = result_def(DeviceAsyncTokenType)

    traits = traits_def(AccessesOperands(reads=("src",), writes=("dst",)))
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        src: SSAValue | Operation,
        src_indices: Sequence[SSAValue | Operation],
        dst: SSAValue | Operation,
        dst_indices: Sequence[SSAValue | Operation],
        dst_elements: int,
        src_elements: SSAValue | Operation | None = None,
        bypass_l1: bool = False,
    ):
        super().__init__(
            operands=[
                SSAValue.get(dst),
                [SSAValue.get(i) for i in dst_indices],
                SSAValue.get(src),
                [SSAValue.get(i) for i in src_indices],
                [] if src_elements is None else [SSAValue.get(src_elements)],
            ],
            properties={
                "dstElements": IntegerAttr(dst_elements, IndexType()),
                "bypassL1": UnitAttr() if bypass_l1 else None,
            },
            result_types=[DeviceAsyncTokenType()],
        )

    @property
    def elements(self) -> int:
        return self.dstElements.value.data

    @property
    def bytes(self) -> int:
        t = self.dst.type
        assert isinstance(t, MemRefType)
        return self.elements * element_bitwidth(t.get_element_type()) // 8

    def verify_(self) -> None:
        src, dst = self.src.type, self.dst.type
        assert isinstance(src, MemRefType) and isinstance(dst, MemRefType)
        self._mlir_checks(src, dst)
        # affinec's own limits, where MLIR accepts more than the lowering emits
        if memory_space_of(src) == SHARED_MEMORY_SPACE:
            raise VerifyException(f"the source must be global memory, got {src}")
        check_row_major("the source", src)
        check_row_major("the destination", dst)
        if self.elements * element_bitwidth(dst.get_element_type()) % 8:
            raise VerifyException(
                f"a copy of {self.elements} elements of {dst.get_element_type()} is "
                "not a whole number of bytes"
            )

    def _mlir_checks(self, src: MemRefType, dst: MemRefType) -> None:
        """MLIR's checks, in its order and words."""
        if not last_dim_unit_stride(src):
            raise VerifyException("source memref most minor dim must have unit stride")
        if not last_dim_unit_stride(dst):
            raise VerifyException(
                "destination memref most minor dim must have unit stride"
            )
        if memory_space_of(dst) != SHARED_MEMORY_SPACE:
            raise VerifyException(f"destination memref {NOT_SHARED}")
        if src.get_element_type() != dst.get_element_type():
            raise VerifyException(
                "source and destination must have the same element type"
            )
        check_indices("source", src, self.srcIndices)
        check_indices("destination", dst, self.dstIndices)
        width = element_bitwidth(dst.get_element_type())
        if self.elements * width // 8 not in COPY_BYTES:
            choices = [b * 8 // width for b in COPY_BYTES if b * 8 // width]
            listed = ", ".join(map(str, choices))
            raise VerifyException(
                f"Requested copy elements is {self.elements} with width {width}. "
                f"But copy elements could be one of {listed}."
            )
        if self.bypassL1 is not None and self.bytes != 16:
            raise VerifyException(
                f"bypassL1 does not satify alignment for '{mlir_type_text(dst)}' "
                f"with destination element {self.elements}. Unset bypassL1, or set "
                f"destination element to {16 * 8 // width}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> DeviceAsyncCopyOp:
        src = parser.parse_unresolved_operand()
        src_indices = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(",")
        dst = parser.parse_unresolved_operand()
        dst_indices = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(",")
        elements = parser.parse_integer(allow_boolean=False, allow_negative=False)
        valid = None
        if parser.parse_optional_punctuation(",") is not None:
            valid = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        src_type = parser.parse_type()
        parser.parse_keyword("to")
        dst_type = parser.parse_type()
        index = IndexType()
        op = cls(
            parser.resolve_operand(src, src_type),
            [parser.resolve_operand(i, index) for i in src_indices],
            parser.resolve_operand(dst, dst_type),
            [parser.resolve_operand(i, index) for i in dst_indices],
            elements,
            None if valid is None else parser.resolve_operand(valid, index),
            bypass_l1="bypassL1" in attributes,
        )
        attributes.pop("bypassL1", None)
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.src)
        printer.print_string("[")
        printer.print_list(self.srcIndices, printer.print_ssa_value)
        printer.print_string("], ")
        printer.print_ssa_value(self.dst)
        printer.print_string("[")
        printer.print_list(self.dstIndices, printer.print_ssa_value)
        printer.print_string(f"], {self.elements}")
        if self.srcElements is not None:
            printer.print_string(", ")
            printer.print_ssa_value(self.srcElements)
        attributes = dict(self.attributes)
        if self.bypassL1 is not None:
            attributes["bypassL1"] = UnitAttr()
        printer.print_op_attributes(attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.src.type)
        printer.print_string(" to ")
        printer.print_attribute(self.dst.type)


@irdl_op_definition
class DeviceAsyncCreateGroupOp(IRDLOperation):
    """`nvgpu.device_async_create_group %t1, %t2`: close a group of the thread's
    pending copies (PTX's `cp.async.commit_group`: *every* copy the thread started
    since the last group joins it, whatever tokens are listed)."""

    name = "nvgpu.device_async_create_group"

    inputTokens = var_operand_def(DeviceAsyncTokenType)
    asyncToken = result_def(DeviceAsyncTokenType)

    def __init__(self, tokens: Sequence[SSAValue | Operation]):
        super().__init__(
            operands=[[SSAValue.get(t) for t in tokens]],
            result_types=[DeviceAsyncTokenType()],
        )

    @classmethod
    def parse(cls, parser: Parser) -> DeviceAsyncCreateGroupOp:
        tokens = []
        if not _results_of_next_op(parser) and (
            first := parser.parse_optional_unresolved_operand()
        ):
            tokens.append(first)
            while parser.parse_optional_punctuation(",") is not None:
                tokens.append(parser.parse_unresolved_operand())
        attributes = parser.parse_optional_attr_dict()
        token = DeviceAsyncTokenType()
        op = cls([parser.resolve_operand(t, token) for t in tokens])
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        if self.inputTokens:
            printer.print_string(" ")
            printer.print_list(self.inputTokens, printer.print_ssa_value)
            printer.print_op_attributes(self.attributes)
        elif self.attributes:
            printer.print_op_attributes(self.attributes)
        else:
            # Without tokens or attributes the op's text would end at its name, and a
            # parser (MLIR's too) would take the next op's `%x` for a token: an
            # empty dictionary ends it.
            printer.print_string(" {}")


_RESULTS = re.compile(r"%[\w$.-]+(:\d+)?(\s*,\s*%[\w$.-]+(:\d+)?)*\s*=")


def _results_of_next_op(parser: Parser) -> bool:
    """Whether the text ahead is the result list of the next op (`%x = ...`): a
    group without tokens printed as MLIR prints it (`nvgpu.device_async_create_group`
    and nothing) does not take them."""
    span = parser._current_token.span  # pyright: ignore[reportPrivateUsage]
    return _RESULTS.match(span.input.content, span.start) is not None


@irdl_op_definition
class DeviceAsyncWaitOp(IRDLOperation):
    """`nvgpu.device_async_wait %g {numGroups = N}`: block until at most N of the
    thread's groups are in flight (`cp.async.wait_group N`; N is 0 when absent)."""

    name = "nvgpu.device_async_wait"

    asyncDependencies = operand_def(DeviceAsyncTokenType)
    numGroups = opt_prop_def(IntegerAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$asyncDependencies attr-dict"

    MAX_GROUPS: ClassVar[int] = 7
    """`cp.async.wait_group` takes 0 to 7 (no more than 8 groups in flight)."""

    def __init__(self, token: SSAValue | Operation, num_groups: int | None = None):
        super().__init__(
            operands=[SSAValue.get(token)],
            properties={
                "numGroups": None
                if num_groups is None
                else IntegerAttr(num_groups, i32)
            },
        )

    @property
    def groups(self) -> int:
        return 0 if self.numGroups is None else self.numGroups.value.data

    def verify_(self) -> None:
        if self.numGroups is not None and self.numGroups.type != i32:
            raise VerifyException(f"numGroups must be an i32, got {self.numGroups}")
        if not 0 <= self.groups <= self.MAX_GROUPS:
            raise VerifyException(
                f"numGroups must be between 0 and {self.MAX_GROUPS}, got {self.groups}"
            )
