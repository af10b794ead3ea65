"""The gpu dialect's ops across threads: `gpu.shuffle` (within a subgroup),
`gpu.all_reduce` (over a block; its region ends in `gpu.yield`) and
`gpu.subgroup_reduce`, with their attributes `#gpu<shuffle_mode ..>` and
`#gpu<all_reduce_op ..>`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    AnyFloat,
    FunctionType,
    IntegerAttr,
    IntegerType,
    UnitAttr,
    VectorType,
    i1,
    i32,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class AllReduceKind(StrEnum):
    """The combining operations of `gpu.all_reduce` and `gpu.subgroup_reduce`."""

    ADD = "add"
    MUL = "mul"
    MINUI = "minui"
    MINSI = "minsi"
    MINNUMF = "minnumf"
    MAXUI = "maxui"
    MAXSI = "maxsi"
    MAXNUMF = "maxnumf"
    AND = "and"
    OR = "or"
    XOR = "xor"
    MINIMUMF = "minimumf"
    MAXIMUMF = "maximumf"


_FLOAT_REDUCTIONS = {"add", "mul", "minnumf", "maxnumf", "minimumf", "maximumf"}
_INTEGER_REDUCTIONS = {"add", "mul", "minui", "minsi", "maxui", "maxsi"} | {
    "and",
    "or",
    "xor",
}


@irdl_attr_definition
class AllReduceOpAttr(EnumAttribute[AllReduceKind], SpacedOpaqueSyntaxAttribute):
    """`#gpu<all_reduce_op add>`."""

    name = "gpu.all_reduce_op"


class ShuffleMode(StrEnum):
    XOR = "xor"
    UP = "up"
    DOWN = "down"
    IDX = "idx"


@irdl_attr_definition
class ShuffleModeAttr(EnumAttribute[ShuffleMode], SpacedOpaqueSyntaxAttribute):
    """`#gpu<shuffle_mode xor>`."""

    name = "gpu.shuffle_mode"


def _parse_keyword_of(parser: Parser, enum: type[StrEnum], what: str) -> str:
    pos = parser.pos
    word = parser.parse_optional_identifier()
    values = [e.value for e in enum]
    if word not in values:
        parser.raise_error(f"expected {what} ({', '.join(values)})", pos)
    return word


# --------------------------------------------------------------------------------------
# Shuffles and reductions
# --------------------------------------------------------------------------------------


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`gpu.yield %v : f32`: the end of a `gpu.all_reduce` region."""

    name = "gpu.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])


@irdl_op_definition
class ShuffleOp(IRDLOperation):
    """`%r, %valid = gpu.shuffle xor %v, %offset, %width : f32`."""

    name = "gpu.shuffle"
    value = operand_def()
    offset = operand_def(i32)
    width = operand_def(i32)
    shuffleResult = result_def()
    valid = result_def(i1)
    mode = prop_def(ShuffleModeAttr)

    traits = traits_def(Pure())

    def __init__(self, mode: str, value: SSAValue, offset: SSAValue, width: SSAValue):
        super().__init__(
            operands=[value, offset, width],
            result_types=[value.type, i1],
            properties={"mode": ShuffleModeAttr(ShuffleMode(mode))},
        )

    def verify_(self) -> None:
        check_shuffled_value(self)
        check_same_type(self.value, self.shuffleResult, "value, shuffleResult")

    @classmethod
    def parse(cls, parser: Parser) -> ShuffleOp:
        mode = _parse_keyword_of(parser, ShuffleMode, "a shuffle mode")
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        offset = parser.parse_operand(i32)
        parser.parse_punctuation(",")
        width = parser.parse_operand(i32)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls(mode, parser.resolve_operand(value, t), offset, width)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(f" {self.mode.data.value} ")
        printer.print_list(
            (self.value, self.offset, self.width), printer.print_ssa_value
        )
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)


def _check_reduction_kind(kind: AllReduceOpAttr | None, t: Attribute) -> None:
    if kind is None:
        return
    element = t.element_type if isinstance(t, VectorType) else t
    integer = isinstance(element, IntegerType)
    if kind.data.value not in (_INTEGER_REDUCTIONS if integer else _FLOAT_REDUCTIONS):
        raise VerifyException(
            f"`{kind.data.value}` reduction operation is not compatible with "
            f"type '{element}'"
        )


SCALAR = "Integer or Float"
SCALAR_OR_VECTOR = f"{SCALAR} or fixed-length vector of {SCALAR} values of ranks 1"


def check_shuffled_value(op: Operation, vectors: bool = True) -> None:
    """Operand #0 is an integer or a float, or (where `vectors`) a 1-D vector of
    fixed length of them: what MLIR's subgroup ops move between lanes."""
    t = op.operands[0].type
    scalar = isinstance(t, IntegerType | AnyFloat)
    vector = (
        vectors
        and isinstance(t, VectorType)
        and t.get_num_dims() == 1
        and not any(t.get_scalable_dims())
        and isinstance(t.element_type, IntegerType | AnyFloat)
    )
    if not (scalar or vector):
        what = SCALAR_OR_VECTOR if vectors else SCALAR
        raise VerifyException(f"operand #0 must be {what}, but got '{t}'")


def check_same_type(value: SSAValue, result: SSAValue, names: str) -> None:
    """MLIR's `AllTypesMatch` constraint, in its words."""
    if value.type != result.type:
        raise VerifyException(
            f"failed to verify that all of {{{names}}} have same type"
        )


def check_same_operand_and_result_type(value: SSAValue, result: SSAValue) -> None:
    """MLIR's `SameOperandsAndResultType` trait, in its words."""
    if value.type != result.type:
        raise VerifyException("requires the same type for all operands and results")


def _parse_reduce_type(parser: Parser) -> tuple[Attribute, Attribute]:
    """`: (f32) -> f32`."""
    parser.parse_punctuation(":")
    pos = parser.pos
    t = parser.parse_type()
    if not isinstance(t, FunctionType) or len(t.inputs) != 1 or len(t.outputs) != 1:
        parser.raise_error("expected '(type) -> type'", pos)
    return t.inputs.data[0], t.outputs.data[0]


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """`%r = gpu.all_reduce add %v uniform {} : (f32) -> f32`: a value combined over
    every thread of the block, by a named operation or by a region yielding the
    combination of its two arguments."""

    name = "gpu.all_reduce"
    value = operand_def()
    result = result_def()
    op = opt_prop_def(AllReduceOpAttr)
    uniform = opt_prop_def(UnitAttr)
    body = region_def()

    traits = traits_def(IsolatedFromAbove())

    def __init__(
        self,
        value: SSAValue,
        kind: str | None,
        body: Region | None = None,
        uniform: bool = False,
        result_type: Attribute | None = None,
    ):
        super().__init__(
            operands=[value],
            result_types=[result_type or value.type],
            properties={
                "op": None if kind is None else AllReduceOpAttr(AllReduceKind(kind)),
                "uniform": UnitAttr() if uniform else None,
            },
            regions=[body or Region()],
        )

    def verify_(self) -> None:
        check_shuffled_value(self, vectors=False)
        check_same_operand_and_result_type(self.value, self.result)
        if (self.op is None) == (not self.body.blocks):
            raise VerifyException("expected either an op attribute or a non-empty body")
        _check_reduction_kind(self.op, self.value.type)
        if self.body.blocks:
            t = self.value.type
            if len(self.body.block.args) != 2:
                raise VerifyException("expected two region arguments")
            if tuple(self.body.block.arg_types) != (t, t):
                raise VerifyException("incorrect region argument type")
            for b in self.body.blocks:
                term = b.last_op
                if not isinstance(term, YieldOp):
                    if term is None or not term.has_trait(IsTerminator):
                        raise VerifyException("expected gpu.yield op in region")
                    continue
                if len(term.values) != 1:
                    raise VerifyException("expected one gpu.yield operand")
                if term.values[0].type != t:
                    raise VerifyException("incorrect gpu.yield type")

    @classmethod
    def parse(cls, parser: Parser) -> AllReduceOp:
        kind = None
        if parser.parse_optional_keyword("op") is None:
            word = parser.parse_optional_identifier()
            if word is not None:
                if word not in [k.value for k in AllReduceKind]:
                    parser.raise_error(f"invalid op kind '{word}'")
                kind = word
        value = parser.parse_unresolved_operand()
        uniform = parser.parse_optional_keyword("uniform") is not None
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        in_type, out_type = _parse_reduce_type(parser)
        op = cls(
            parser.resolve_operand(value, in_type),
            kind,
            body,
            uniform,
            result_type=out_type,
        )
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        if self.op is not None:
            printer.print_string(f" {self.op.data.value}")
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        if self.uniform is not None:
            printer.print_string(" uniform")
        printer.print_string(" ")
        printer.print_region(self.body)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_attribute(self.value.type)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class SubgroupReduceOp(IRDLOperation):
    """`%r = gpu.subgroup_reduce add %v [uniform] [cluster(size = 4, stride = 2)] :
    (f32) -> f32`: a value combined over the threads of a subgroup (or of clusters of
    its threads)."""

    name = "gpu.subgroup_reduce"
    value = operand_def()
    result = result_def()
    op = prop_def(AllReduceOpAttr)
    uniform = opt_prop_def(UnitAttr)
    cluster_size = opt_prop_def(IntegerAttr)
    cluster_stride = prop_def(IntegerAttr, default_value=IntegerAttr(1, i32))

    def __init__(
        self,
        value: SSAValue,
        kind: str,
        *,
        uniform: bool = False,
        cluster_size: int | None = None,
        cluster_stride: int = 1,
        result_type: Attribute | None = None,
    ):
        super().__init__(
            operands=[value],
            result_types=[result_type or value.type],
            properties={
                "op": AllReduceOpAttr(AllReduceKind(kind)),
                "uniform": UnitAttr() if uniform else None,
                "cluster_size": None
                if cluster_size is None
                else IntegerAttr(cluster_size, i32),
                "cluster_stride": IntegerAttr(cluster_stride, i32),
            },
        )

    def verify_(self) -> None:
        check_shuffled_value(self)
        check_same_operand_and_result_type(self.value, self.result)
        _check_reduction_kind(self.op, self.value.type)
        if self.cluster_size is None and self.cluster_stride.value.data != 1:
            raise VerifyException(
                "cluster stride can only be specified if cluster size is specified"
            )
        for what, attr in (
            ("cluster size", self.cluster_size),
            ("cluster stride", self.cluster_stride),
        ):
            v = None if attr is None else attr.value.data
            if v is not None and (v <= 0 or v & (v - 1)):
                raise VerifyException(f"{what} {v} is not a power of two")

    @classmethod
    def parse(cls, parser: Parser) -> SubgroupReduceOp:
        kind = _parse_keyword_of(parser, AllReduceKind, "a reduction")
        value = parser.parse_unresolved_operand()
        uniform = parser.parse_optional_keyword("uniform") is not None
        size, stride = None, 1
        if parser.parse_optional_keyword("cluster") is not None:
            parser.parse_punctuation("(")
            parser.parse_keyword("size")
            parser.parse_punctuation("=")
            size = parser.parse_integer(allow_boolean=False)
            if parser.parse_optional_punctuation(",") is not None:
                parser.parse_keyword("stride")
                parser.parse_punctuation("=")
                stride = parser.parse_integer(allow_boolean=False)
            parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        in_type, out_type = _parse_reduce_type(parser)
        op = cls(
            parser.resolve_operand(value, in_type),
            kind,
            uniform=uniform,
            cluster_size=size,
            cluster_stride=stride,
            result_type=out_type,
        )
        for name in ("cluster_size", "cluster_stride"):  # MLIR's properties
            if name in attrs:
                op.properties[name] = attrs.pop(name)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(f" {self.op.data.value} ")
        printer.print_ssa_value(self.value)
        if self.uniform is not None:
            printer.print_string(" uniform")
        if self.cluster_size is not None:
            printer.print_string(f" cluster(size = {self.cluster_size.value.data}")
            stride = self.cluster_stride.value.data
            if stride != 1:
                printer.print_string(f", stride = {stride}")
            printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_attribute(self.value.type)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)
