"""More of the gpu dialect's ops within a subgroup (a warp), and `gpu.printf`, in
MLIR's syntax:

    %r, %valid = gpu.rotate %v, 1, 32 : i32
    %s = gpu.subgroup_broadcast %v, specific_lane %lane : i32
    %w = gpu.warp_execute_on_lane_0(%laneid)[32] args(%x : vector<32xf32>)
        -> (vector<1xf32>) {
    ^bb0(%y: vector<32xf32>):
      gpu.yield %y : vector<32xf32>
    }
    gpu.printf "%d %f\\n", %i, %f : i32, f32

affinec's pipeline makes none of them: they are read, verified and printed as MLIR's;
its passes and interpreter name them when they meet them.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I32,
    I64,
    IndexType,
    IntegerAttr,
    StringAttr,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from affinec.dialects.gpu_reductions import (
    YieldOp,
    check_same_type,
    check_shuffled_value,
)


def _verify_distribution(expanded: Attribute, distributed: Attribute, warp: int):
    """A value of the whole warp (`expanded`) and a lane's share of it: the same
    type, or vectors whose dimensions divide, by factors whose product is the warp
    size."""
    if expanded == distributed:
        return
    if not isinstance(expanded, VectorType) or not isinstance(distributed, VectorType):
        raise VerifyException("expected vector type for distributed operands.")
    if (
        expanded.get_num_dims() != distributed.get_num_dims()
        or expanded.element_type != distributed.element_type
    ):
        raise VerifyException(
            "expected distributed vectors to have same rank and element type."
        )
    scale = 1
    for k, (e, d) in enumerate(
        zip(expanded.get_shape(), distributed.get_shape(), strict=True)
    ):
        if e == d:
            continue
        if d <= 0 or e % d:
            raise VerifyException(
                f"expected expanded vector dimension #{k} ({e}) to be a multipler of "
                f"the distributed vector dimension ({d})"
            )
        scale *= e // d
    if scale != warp:
        raise VerifyException(
            f"incompatible distribution dimensions from '{expanded}' to "
            f"'{distributed}' with warp size = {warp}"
        )


@irdl_op_definition
class RotateOp(IRDLOperation):
    """`%r, %valid = gpu.rotate %v, offset, width : T`: each lane of the first
    `width` takes the value of lane `(lane + offset) mod width`."""

    name = "gpu.rotate"
    value = operand_def()
    offset = prop_def(IntegerAttr[I32])
    width = prop_def(IntegerAttr[I32])
    rotateResult = result_def()
    valid = result_def(i1)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, offset: int, width: int):
        super().__init__(
            operands=[value],
            result_types=[value.type, i1],
            properties={
                "offset": IntegerAttr(offset, i32),
                "width": IntegerAttr(width, i32),
            },
        )

    def verify_(self) -> None:
        width, offset = self.width.value.data, self.offset.value.data
        if width <= 0 or width & (width - 1):
            raise VerifyException(
                "attribute 'width' failed to satisfy constraint: 32-bit signless "
                "integer attribute whose value is a power of two > 0"
            )
        if offset < 0:
            raise VerifyException(
                "attribute 'offset' failed to satisfy constraint: 32-bit signless "
                "integer attribute whose minimum value is 0"
            )
        if offset >= width:
            raise VerifyException(f"offset must be in the range [0, {width})")
        check_shuffled_value(self)
        check_same_type(self.value, self.rotateResult, "value, rotateResult")

    @classmethod
    def parse(cls, parser: Parser) -> RotateOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        offset = parser.parse_integer()
        parser.parse_punctuation(",")
        width = parser.parse_integer()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(parser.resolve_operand(value, parser.parse_type()), offset, width)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(f", {self.offset.value.data}, {self.width.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)


class BroadcastType(StrEnum):
    FIRST_ACTIVE_LANE = "first_active_lane"
    ANY_LANE = "any_lane"
    SPECIFIC_LANE = "specific_lane"


@irdl_attr_definition
class BroadcastTypeAttr(EnumAttribute[BroadcastType], SpacedOpaqueSyntaxAttribute):
    """`#gpu<broadcast specific_lane>`."""

    name = "gpu.broadcast"


@irdl_op_definition
class SubgroupBroadcastOp(IRDLOperation):
    """`%s = gpu.subgroup_broadcast %v, specific_lane %lane : T`: one lane's value
    (the first active one's, any one's, or lane `%lane`'s) in every lane."""

    name = "gpu.subgroup_broadcast"
    src = operand_def()
    lane = opt_operand_def(i32)
    result = result_def()
    broadcast_type = prop_def(BroadcastTypeAttr)
    traits = traits_def(Pure())

    def __init__(self, src: SSAValue, kind: str, lane: SSAValue | None = None):
        super().__init__(
            operands=[src, [] if lane is None else [lane]],
            result_types=[src.type],
            properties={"broadcast_type": BroadcastTypeAttr(BroadcastType(kind))},
        )

    def verify_(self) -> None:
        specific = self.broadcast_type.data == BroadcastType.SPECIFIC_LANE
        if specific != (self.lane is not None):
            raise VerifyException(
                "lane must be specified for `specific_lane` broadcast, and only then"
            )
        if self.result.type != self.src.type:
            raise VerifyException("the result must have the source's type")

    @classmethod
    def parse(cls, parser: Parser) -> SubgroupBroadcastOp:
        src = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        pos = parser.pos
        kind = parser.parse_optional_identifier()
        if kind not in [k.value for k in BroadcastType]:
            parser.raise_error(
                f"expected a broadcast type ({', '.join(k.value for k in BroadcastType)})",
                pos,
            )
        lane = (
            parser.parse_operand(i32) if kind == BroadcastType.SPECIFIC_LANE else None
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(parser.resolve_operand(src, parser.parse_type()), kind, lane)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.src)
        printer.print_string(f", {self.broadcast_type.data.value}")
        if self.lane is not None:
            printer.print_string(" ")
            printer.print_ssa_value(self.lane)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class WarpExecuteOnLane0Op(IRDLOperation):
    """`gpu.warp_execute_on_lane_0(%laneid)[32] args(...) -> (...) {...}`: a region
    run by lane 0 of the warp, its arguments and results distributed over the lanes
    (MLIR's vector distribution)."""

    name = "gpu.warp_execute_on_lane_0"
    laneid = operand_def(IndexType)
    args = var_operand_def()
    results_ = var_result_def()
    warp_size = prop_def(IntegerAttr[I64])
    warpRegion = region_def("single_block")

    def __init__(
        self,
        laneid: SSAValue,
        warp_size: int,
        args: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        region: Region,
    ):
        super().__init__(
            operands=[laneid, args],
            result_types=[result_types],
            properties={"warp_size": IntegerAttr(warp_size, i64)},
            regions=[region],
        )

    def verify_(self) -> None:
        if self.warp_size.value.data <= 0:
            raise VerifyException("warp size must be positive")
        block = self.warpRegion.block
        if len(block.args) != len(self.args):
            raise VerifyException(
                "expected same number op arguments and block arguments."
            )
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("the region must end in gpu.yield")
        if len(term.values) != len(self.results_):
            raise VerifyException(
                "expected same number of yield operands and return values."
            )
        warp = self.warp_size.value.data
        pairs = [
            *zip(block.arg_types, self.args.types, strict=True),
            *zip(term.values.types, self.results_.types, strict=True),
        ]
        for expanded, distributed in pairs:
            _verify_distribution(expanded, distributed, warp)

    @classmethod
    def parse(cls, parser: Parser) -> WarpExecuteOnLane0Op:
        parser.parse_punctuation("(")
        laneid = parser.parse_operand(IndexType())
        parser.parse_punctuation(")")
        parser.parse_punctuation("[")
        warp_size = parser.parse_integer()
        parser.parse_punctuation("]")
        args: list[SSAValue] = []
        if parser.parse_optional_keyword("args") is not None:

            def argument() -> SSAValue:
                name = parser.parse_unresolved_operand()
                parser.parse_punctuation(":")
                return parser.resolve_operand(name, parser.parse_type())

            args = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, argument)
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_type
            )
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        for block in region.blocks:  # MLIR's implicit terminator
            if not isinstance(block.last_op, YieldOp):
                block.add_op(YieldOp())
        op = cls(laneid, warp_size, args, result_types, region)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string("(")
        printer.print_ssa_value(self.laneid)
        printer.print_string(f")[{self.warp_size.value.data}]")
        if self.args:
            printer.print_string(" args(")

            def argument(value: SSAValue) -> None:
                printer.print_ssa_value(value)
                printer.print_string(" : ")
                printer.print_attribute(value.type)

            printer.print_list(self.args, argument)
            printer.print_string(")")
        if self.results_:
            printer.print_string(" -> (")
            printer.print_list(self.results_.types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        term = self.warpRegion.block.last_op
        printer.print_region(
            self.warpRegion,
            print_entry_block_args=bool(self.args),
            # a `gpu.yield` of nothing is implicit, as MLIR prints it
            print_block_terminators=not (isinstance(term, YieldOp) and not term.values),
        )
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class PrintfOp(IRDLOperation):
    """`gpu.printf "%d\\n", %i : i32`: print from the device, with C's format."""

    name = "gpu.printf"
    format = prop_def(StringAttr)
    args = var_operand_def()

    def __init__(self, format: str, args: Sequence[SSAValue] = ()):
        super().__init__(operands=[args], properties={"format": StringAttr(format)})

    @classmethod
    def parse(cls, parser: Parser) -> PrintfOp:
        text = parser.parse_str_literal()
        args: list[SSAValue] = []
        names = []
        if parser.parse_optional_punctuation(",") is not None:
            names = parser.parse_comma_separated_list(
                Parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
        attrs = parser.parse_optional_attr_dict()
        if names:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(
                Parser.Delimiter.NONE, parser.parse_type
            )
            if len(types) != len(names):
                parser.raise_error(
                    f"{len(names)} operands present, but expected {len(types)}"
                )
            args = [
                parser.resolve_operand(n, t) for n, t in zip(names, types, strict=True)
            ]
        op = cls(text, args)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_attribute(self.format)
        if self.args:
            printer.print_string(", ")
            printer.print_list(self.args, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        if self.args:
            printer.print_string(" : ")
            printer.print_list(self.args.types, printer.print_attribute)
