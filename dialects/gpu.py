"""The gpu dialect in MLIR's syntax.

xDSL 0.74's gpu dialect prints every op in the generic form. This file defines the ops
affinec's lowering produces, op for op with MLIR's names, properties and custom syntax,
so the lowered IR reads like MLIR's:

    gpu.module @conv_kernel {
      gpu.func @conv_kernel(%in: memref<8xf32>) workgroup(%tile : memref<64xf32, 3>)
          kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
        %tx = gpu.thread_id x upper_bound 64
        %bx = gpu.block_id x
        gpu.barrier
        gpu.return
      }
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
      gpu.terminator
    }
    gpu.launch_func @conv_kernel::@conv_kernel blocks in (%c4, %c1, %c1)
        threads in (%c64, %c1, %c1) args(%in : memref<8xf32>)

Memory attributions follow MLIR: the entry block of a `gpu.func` (or the body of a
`gpu.launch`, after its twelve id and size arguments and the six of its clusters, if
any) takes the function's inputs, then one argument per `workgroup` buffer (shared
memory, memory space 3), then one per `private` buffer.

The generic form is MLIR 22's, both ways: a kernel is marked by the discardable
`gpu.kernel` attribute and the number of workgroup attributions is the
`workgroup_attributions` attribute (as mlir-opt prints them); `gpu.launch` has MLIR's
eleven operand segments (async dependencies, grid, block and cluster sizes, dynamic
shared memory) and `gpu.launch_func` its thirteen (those, the kernel operands and the
async object). Also defined, as MLIR has them: `gpu.wait`, `gpu.shuffle`,
`gpu.all_reduce` / `gpu.yield`, `gpu.subgroup_reduce`, `gpu.lane_id`,
`gpu.subgroup_id`, `gpu.num_subgroups`, `gpu.subgroup_size`, and `gpu.module` with
targets. affinec's lowering and interpreter handle only the ops its pipeline
produces; its passes refuse the others by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
    i1,
    i32,
    i64,
)
from xdsl.dialects.gpu import AsyncTokenType, DimensionAttr, DimensionEnum
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    Pure,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

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
class AddressSpaceAttr(EnumAttribute[AddressSpace], SpacedOpaqueSyntaxAttribute):
    """`#gpu.address_space<workgroup>`: MLIR's symbolic memory spaces, which the
    NVVM lowering numbers 1, 3 and 5."""

    name = "gpu.address_space"


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
# Ids and sizes
# --------------------------------------------------------------------------------------


def _parse_upper_bound(parser: Parser) -> int | None:
    if parser.parse_optional_keyword("upper_bound") is None:
        return None
    return parser.parse_integer(allow_boolean=False, allow_negative=False)


def _upper_bound_attr(bound: int | None) -> IntegerAttr | None:
    return None if bound is None else IntegerAttr(bound, IndexType())


class _IndexOfDim(IRDLOperation):
    """`%r = gpu.<op> x [upper_bound N]`: an id or size along one dimension."""

    dimension = prop_def(DimensionAttr)
    upper_bound = opt_prop_def(IntegerAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(self, dim: str, upper_bound: int | None = None):
        props: dict[str, Attribute | None] = {
            "dimension": DimensionAttr(DimensionEnum(dim)),
            "upper_bound": _upper_bound_attr(upper_bound),
        }
        super().__init__(result_types=[IndexType()], properties=props)

    @property
    def dim(self) -> str:
        return self.dimension.data.value

    @property
    def bound(self) -> int | None:
        return None if self.upper_bound is None else self.upper_bound.value.data

    @classmethod
    def parse(cls, parser: Parser):
        pos = parser.pos
        dim = parser.parse_identifier()
        if dim not in DIMENSIONS:
            parser.raise_error(f"expected x, y or z, got '{dim}'", pos)
        op = cls(dim, _parse_upper_bound(parser))
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(f" {self.dim}")
        if self.upper_bound is not None:
            printer.print_string(f" upper_bound {self.bound}")
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class ThreadIdOp(_IndexOfDim):
    """`gpu.thread_id x`: the thread's index in its block."""

    name = "gpu.thread_id"


@irdl_op_definition
class BlockIdOp(_IndexOfDim):
    """`gpu.block_id x`: the block's index in the grid."""

    name = "gpu.block_id"


@irdl_op_definition
class BlockDimOp(_IndexOfDim):
    """`gpu.block_dim x`: threads per block."""

    name = "gpu.block_dim"


@irdl_op_definition
class GridDimOp(_IndexOfDim):
    """`gpu.grid_dim x`: blocks per grid."""

    name = "gpu.grid_dim"


class _SubgroupIndex(IRDLOperation):
    """`%r = gpu.<op> [upper_bound N] : index`: a subgroup (warp) id or size."""

    upper_bound = opt_prop_def(IntegerAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    PRINTS_TYPE: ClassVar[bool] = True
    """MLIR's syntax ends in `: index`, but for `gpu.lane_id`."""

    def __init__(self, upper_bound: int | None = None):
        super().__init__(
            result_types=[IndexType()],
            properties={"upper_bound": _upper_bound_attr(upper_bound)},
        )

    @classmethod
    def parse(cls, parser: Parser):
        op = cls(_parse_upper_bound(parser))
        op.attributes |= parser.parse_optional_attr_dict()
        if cls.PRINTS_TYPE:
            parser.parse_punctuation(":")
            pos = parser.pos
            if not isinstance(parser.parse_type(), IndexType):
                parser.raise_error("expected 'index'", pos)
        return op

    def print(self, printer: Printer):
        if self.upper_bound is not None:
            printer.print_string(f" upper_bound {self.upper_bound.value.data}")
        printer.print_op_attributes(self.attributes)
        if self.PRINTS_TYPE:
            printer.print_string(" : index")


@irdl_op_definition
class LaneIdOp(_SubgroupIndex):
    """`gpu.lane_id`: the thread's index in its subgroup (warp)."""

    name = "gpu.lane_id"
    PRINTS_TYPE: ClassVar[bool] = False


@irdl_op_definition
class SubgroupIdOp(_SubgroupIndex):
    """`gpu.subgroup_id : index`: the subgroup's index in the block."""

    name = "gpu.subgroup_id"


@irdl_op_definition
class NumSubgroupsOp(_SubgroupIndex):
    """`gpu.num_subgroups : index`: subgroups per block."""

    name = "gpu.num_subgroups"


@irdl_op_definition
class SubgroupSizeOp(_SubgroupIndex):
    """`gpu.subgroup_size : index`: threads per subgroup."""

    name = "gpu.subgroup_size"


# --------------------------------------------------------------------------------------
# Terminators, barrier, wait
# --------------------------------------------------------------------------------------


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`gpu.barrier`: every thread of the block waits here for all the others."""

    name = "gpu.barrier"
    assembly_format = "attr-dict"


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """`gpu.return`: the end of a `gpu.func`."""

    name = "gpu.return"
    args = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict ($args^ `:` type($args))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])


@irdl_op_definition
class TerminatorOp(IRDLOperation):
    """`gpu.terminator`: the end of a `gpu.launch` body."""

    name = "gpu.terminator"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`gpu.yield %v : f32`: the end of a `gpu.all_reduce` region."""

    name = "gpu.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])


def _parse_async(parser: Parser) -> tuple[bool, list[SSAValue]]:
    """`async [%t0, %t1]`, either part optional, as MLIR's async ops begin."""
    is_async = parser.parse_optional_keyword("async") is not None
    deps = parser.parse_optional_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(AsyncTokenType())
    )
    return is_async, deps or []


def _print_async(
    printer: Printer, token: SSAValue | None, deps: Sequence[SSAValue]
) -> None:
    if token is not None:
        printer.print_string(" async")
    if deps:
        printer.print_string(" [")
        printer.print_list(deps, printer.print_ssa_value)
        printer.print_string("]")


@irdl_op_definition
class WaitOp(IRDLOperation):
    """`%t = gpu.wait async [%a, %b]`: wait for (or join) async tokens."""

    name = "gpu.wait"
    asyncDependencies = var_operand_def(AsyncTokenType)
    asyncToken = opt_result_def(AsyncTokenType)

    def __init__(self, deps: Sequence[SSAValue] = (), is_async: bool = False):
        super().__init__(
            operands=[deps], result_types=[[AsyncTokenType()] if is_async else []]
        )

    @classmethod
    def parse(cls, parser: Parser) -> WaitOp:
        is_async, deps = _parse_async(parser)
        op = cls(deps, is_async)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        _print_async(printer, self.asyncToken, self.asyncDependencies)
        printer.print_op_attributes(self.attributes)


# --------------------------------------------------------------------------------------
# Shuffles and reductions
# --------------------------------------------------------------------------------------


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
        if self.shuffleResult.type != self.value.type:
            raise VerifyException("the result must have the value's type")

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
    allowed = _INTEGER_REDUCTIONS if isinstance(t, IntegerType) else _FLOAT_REDUCTIONS
    if kind.data.value not in allowed:
        raise VerifyException(
            f"'{kind.data.value}' reduction operation is not compatible with type {t}"
        )


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
    ):
        super().__init__(
            operands=[value],
            result_types=[value.type],
            properties={
                "op": None if kind is None else AllReduceOpAttr(AllReduceKind(kind)),
                "uniform": UnitAttr() if uniform else None,
            },
            regions=[body or Region()],
        )

    def verify_(self) -> None:
        if self.result.type != self.value.type:
            raise VerifyException("the result must have the value's type")
        if (self.op is None) == (not self.body.blocks):
            raise VerifyException("expected either an op attribute or a non-empty body")
        _check_reduction_kind(self.op, self.value.type)
        if self.body.blocks:
            t = self.value.type
            if tuple(self.body.block.arg_types) != (t, t):
                raise VerifyException(f"the body takes two arguments of type {t}")
            for b in self.body.blocks:
                term = b.last_op
                if isinstance(term, YieldOp) and tuple(term.values.types) != (t,):
                    raise VerifyException(f"the body must yield one {t}")

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
        in_type, _ = _parse_reduce_type(parser)
        op = cls(parser.resolve_operand(value, in_type), kind, body, uniform)
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
    ):
        super().__init__(
            operands=[value],
            result_types=[value.type],
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
        if self.result.type != self.value.type:
            raise VerifyException("the result must have the value's type")
        _check_reduction_kind(self.op, self.value.type)
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
        in_type, _ = _parse_reduce_type(parser)
        op = cls(
            parser.resolve_operand(value, in_type),
            kind,
            uniform=uniform,
            cluster_size=size,
            cluster_stride=stride,
        )
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


# --------------------------------------------------------------------------------------
# Memory attributions, shared by gpu.func and gpu.launch
# --------------------------------------------------------------------------------------


def _print_attributions(printer: Printer, keyword: str, args: Sequence[BlockArgument]):
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


def _parse_attributions(parser: Parser, keyword: str) -> list[Parser.Argument]:
    if parser.parse_optional_keyword(keyword) is None:
        return []

    def parse_one() -> Parser.Argument:
        arg = parser.parse_argument(expect_type=False)
        parser.parse_punctuation(":")
        return arg.resolve(parser.parse_type())

    return parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_one)


def _attributions(block: Block, start: int, count: int) -> Sequence[BlockArgument]:
    return block.args[start : start + count]


def _count(attr: IntegerAttr | None) -> int:
    return 0 if attr is None else attr.value.data


def _verify_attributions(args: Sequence[BlockArgument], space: int, what: str) -> None:
    for arg in args:
        if not isinstance(arg.type, MemRefType) or memory_space(arg.type) != space:
            raise VerifyException(
                f"{what} attribution of type {arg.type} must be a memref in memory "
                f"space {space}"
            )


# --------------------------------------------------------------------------------------
# gpu.module, gpu.func
# --------------------------------------------------------------------------------------


@irdl_op_definition
class ModuleOp(IRDLOperation):
    """`gpu.module @name [#nvvm.target<chip = "sm_90">] { ... }`: the device code, one
    symbol table, and the targets to compile it for."""

    name = "gpu.module"

    body = region_def("single_block")
    sym_name = prop_def(SymbolNameConstraint())
    targets = opt_prop_def(ArrayAttr)
    offloadingHandler = opt_prop_def(Attribute)

    traits = traits_def(
        IsolatedFromAbove(), SymbolOpInterface(), SymbolTable(), NoTerminator()
    )

    def __init__(
        self,
        name: str,
        body: Region | Sequence[Operation] = (),
        targets: Sequence[Attribute] | None = None,
    ):
        if not isinstance(body, Region):
            body = Region(Block(body))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "targets": None if targets is None else ArrayAttr(targets),
            },
            regions=[body],
        )

    @classmethod
    def parse(cls, parser: Parser) -> ModuleOp:
        name = parser.parse_symbol_name()
        handler = None
        if parser.parse_optional_punctuation("<") is not None:
            handler = parser.parse_attribute()
            parser.parse_punctuation(">")
        targets = None
        if parser.parse_optional_punctuation("[") is not None:
            targets = []
            if parser.parse_optional_punctuation("]") is None:
                targets = parser.parse_comma_separated_list(
                    Parser.Delimiter.NONE, parser.parse_attribute
                )
                parser.parse_punctuation("]")
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        op = cls(name.data, region, targets)
        op.offloadingHandler = handler
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        if self.offloadingHandler is not None:
            printer.print_string(" <")
            printer.print_attribute(self.offloadingHandler)
            printer.print_string(">")
        if self.targets is not None:
            printer.print_string(" [")
            printer.print_list(self.targets.data, printer.print_attribute)
            printer.print_string("]")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body)


@irdl_op_definition
class FuncOp(IRDLOperation):
    """`gpu.func @f(%a: t) workgroup(%w : t) private(%p : t) kernel attributes {...}`.

    The entry block's arguments are the inputs, then the workgroup attributions, then
    the private ones. `known_block_size` / `known_grid_size` (MLIR's names) record the
    launch bounds the kernel was built for.
    """

    name = "gpu.func"

    body = region_def()
    sym_name = attr_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    workgroup_attributions = opt_attr_def(IntegerAttr)
    known_block_size = opt_prop_def(DenseArrayBase.constr(i32))
    known_grid_size = opt_prop_def(DenseArrayBase.constr(i32))

    traits = traits_def(IsolatedFromAbove(), HasParent(ModuleOp), SymbolOpInterface())

    def __init__(
        self,
        name: str,
        inputs: Sequence[Attribute],
        body: Region,
        *,
        kernel: bool = False,
        workgroup_count: int = 0,
        known_block_size: Sequence[int] | None = None,
        known_grid_size: Sequence[int] | None = None,
    ):
        props: dict[str, Attribute | None] = {
            "function_type": FunctionType.from_lists(list(inputs), []),
            "known_block_size": None
            if known_block_size is None
            else DenseArrayBase.from_list(i32, known_block_size),
            "known_grid_size": None
            if known_grid_size is None
            else DenseArrayBase.from_list(i32, known_grid_size),
        }
        attrs: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            WORKGROUP_ATTRIBUTIONS: IntegerAttr(workgroup_count, i64),
        }
        if kernel:
            attrs[KERNEL] = UnitAttr()
        # In MLIR's (sorted) order, so that the generic form reads as mlir-opt's.
        attrs = dict(sorted(attrs.items()))
        super().__init__(properties=props, attributes=attrs, regions=[body])

    @property
    def kernel(self) -> UnitAttr | None:
        """The `gpu.kernel` marker, when the function is a kernel."""
        marker = self.attributes.get(KERNEL)
        return marker if isinstance(marker, UnitAttr) else None

    @property
    def num_workgroup(self) -> int:
        return _count(self.workgroup_attributions)

    @property
    def arguments(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[: len(self.function_type.inputs)]

    @property
    def workgroup_args(self) -> Sequence[BlockArgument]:
        return _attributions(
            self.body.blocks[0], len(self.function_type.inputs), self.num_workgroup
        )

    @property
    def private_args(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[
            len(self.function_type.inputs) + self.num_workgroup :
        ]

    @property
    def block_size(self) -> tuple[int, ...] | None:
        k = self.known_block_size
        return None if k is None else tuple(k.get_values())  # pyright: ignore

    @property
    def grid_size(self) -> tuple[int, ...] | None:
        k = self.known_grid_size
        return None if k is None else tuple(k.get_values())  # pyright: ignore

    def verify_(self) -> None:
        if not self.body.blocks:
            raise VerifyException("a gpu.func needs a body")
        if KERNEL in self.attributes and self.kernel is None:
            raise VerifyException(f"'{KERNEL}' must be a unit attribute")
        inputs = tuple(self.function_type.inputs.data)
        args = tuple(self.body.blocks[0].arg_types)
        if args[: len(inputs)] != inputs:
            raise VerifyException(
                "the entry block's arguments must start with the function's inputs"
            )
        if len(args) < len(inputs) + self.num_workgroup:
            raise VerifyException("fewer entry block arguments than attributions")
        _verify_attributions(self.workgroup_args, WORKGROUP_ADDRESS_SPACE, "workgroup")
        _verify_attributions(self.private_args, PRIVATE_ADDRESS_SPACE, "private")
        if self.kernel is not None and self.function_type.outputs.data:
            raise VerifyException("a kernel returns nothing")
        for what, size in (
            ("known_block_size", self.block_size),
            ("known_grid_size", self.grid_size),
        ):
            if size is not None and (len(size) != 3 or min(size) <= 0):
                raise VerifyException(f"{what} needs three positive sizes")

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name = parser.parse_symbol_name()
        inputs = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=True)
        )
        workgroup = _parse_attributions(parser, "workgroup")
        private = _parse_attributions(parser, "private")
        kernel = parser.parse_optional_keyword("kernel") is not None
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region([*inputs, *workgroup, *private])
        op = cls(
            name.data,
            [a.type for a in inputs],
            body,
            kernel=kernel,
            workgroup_count=len(workgroup),
        )
        if attrs is not None:
            extra = dict(attrs.data)
            for prop in ("known_block_size", "known_grid_size"):
                if prop in extra:
                    op.properties[prop] = extra.pop(prop)
            op.attributes |= extra
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        printer.print_list(self.arguments, printer.print_block_argument)
        printer.print_string(")")
        _print_attributions(printer, "workgroup", self.workgroup_args)
        _print_attributions(printer, "private", self.private_args)
        if self.kernel is not None:
            printer.print_string(" kernel")
        attrs: dict[str, Attribute] = {
            k: v
            for k, v in self.attributes.items()
            if k not in ("sym_name", KERNEL, WORKGROUP_ATTRIBUTIONS)
        }
        for prop in ("known_block_size", "known_grid_size"):
            value = self.properties.get(prop)
            if value is not None:
                attrs[prop] = value
        printer.print_op_attributes(attrs, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)


# --------------------------------------------------------------------------------------
# gpu.launch, gpu.launch_func
# --------------------------------------------------------------------------------------


def _print_dim3(printer: Printer, values: Sequence[SSAValue]) -> None:
    printer.print_string("(")
    printer.print_list(values, printer.print_ssa_value)
    printer.print_string(")")


def _parse_dim3(parser: Parser) -> list[UnresolvedOperand]:
    pos = parser.pos
    values = parser.parse_comma_separated_list(
        Parser.Delimiter.PAREN, parser.parse_unresolved_operand
    )
    if len(values) != 3:
        parser.raise_error(f"expected three sizes (x, y, z), got {len(values)}", pos)
    return values


def _cluster_sizes(op: IRDLOperation) -> tuple[SSAValue, SSAValue, SSAValue] | None:
    sizes = tuple(getattr(op, f"clusterSize{d.upper()}") for d in DIMENSIONS)
    if all(v is None for v in sizes):
        return None
    if any(v is None for v in sizes):
        raise VerifyException("give all three cluster sizes or none")
    return sizes  # pyright: ignore[reportReturnType]


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """`gpu.launch [async [%t]] [clusters(..) in (..)] blocks(%bx, %by, %bz) in
    (%gx = ..) threads(...) in (...) {...}`.

    The body runs once per thread of every block. Its entry block takes the block ids,
    the thread ids, the grid sizes and the block sizes (three each, x y z), then (with
    clusters) the cluster ids and sizes, then the workgroup and private attributions.
    `module(@m) function(@f)` name the kernel that outlining makes of it.
    """

    name = "gpu.launch"

    asyncDependencies = var_operand_def(AsyncTokenType)
    gridSizeX = operand_def(IndexType)
    gridSizeY = operand_def(IndexType)
    gridSizeZ = operand_def(IndexType)
    blockSizeX = operand_def(IndexType)
    blockSizeY = operand_def(IndexType)
    blockSizeZ = operand_def(IndexType)
    clusterSizeX = opt_operand_def(IndexType)
    clusterSizeY = opt_operand_def(IndexType)
    clusterSizeZ = opt_operand_def(IndexType)
    dynamicSharedMemorySize = opt_operand_def(i32)
    asyncToken = opt_result_def(AsyncTokenType)
    kernelFunc = opt_prop_def(SymbolRefAttr, prop_name="function")
    kernelModule = opt_prop_def(SymbolRefAttr, prop_name="module")
    workgroup_attributions = opt_attr_def(IntegerAttr)

    body = region_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        grid: Sequence[SSAValue | Operation],
        block: Sequence[SSAValue | Operation],
        body: Region,
        *,
        dynamic_shared_memory: SSAValue | Operation | None = None,
        workgroup_count: int = 0,
        async_dependencies: Sequence[SSAValue] = (),
        is_async: bool = False,
        clusters: Sequence[SSAValue | Operation] | None = None,
        kernel_module: str | None = None,
        kernel_function: str | None = None,
    ):
        cluster = [[c] for c in clusters] if clusters is not None else [[], [], []]
        super().__init__(
            operands=[
                async_dependencies,
                *grid,
                *block,
                *cluster,
                [dynamic_shared_memory] if dynamic_shared_memory else [],
            ],
            result_types=[[AsyncTokenType()] if is_async else []],
            properties={
                "function": None
                if kernel_function is None
                else SymbolRefAttr(kernel_function),
                "module": None
                if kernel_module is None
                else SymbolRefAttr(kernel_module),
            },
            attributes={WORKGROUP_ATTRIBUTIONS: IntegerAttr(workgroup_count, i64)},
            regions=[body],
        )

    @staticmethod
    def body_arg_types() -> list[Attribute]:
        return [IndexType()] * 12

    @property
    def grid_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return (self.gridSizeX, self.gridSizeY, self.gridSizeZ)

    @property
    def block_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return (self.blockSizeX, self.blockSizeY, self.blockSizeZ)

    @property
    def cluster_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue] | None:
        return _cluster_sizes(self)

    @property
    def num_workgroup(self) -> int:
        return _count(self.workgroup_attributions)

    @property
    def num_id_args(self) -> int:
        """12, or 18 with clusters: the entry arguments before the attributions."""
        return 12 if self.cluster_sizes is None else 18

    @property
    def block_ids(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[0:3]

    @property
    def thread_ids(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[3:6]

    @property
    def grid_size_args(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[6:9]

    @property
    def block_size_args(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[9:12]

    @property
    def workgroup_args(self) -> Sequence[BlockArgument]:
        return _attributions(self.body.blocks[0], self.num_id_args, self.num_workgroup)

    @property
    def private_args(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[self.num_id_args + self.num_workgroup :]

    def verify_(self) -> None:
        if not self.body.blocks:
            raise VerifyException("a gpu.launch needs a body")
        ids = self.num_id_args
        types = tuple(self.body.blocks[0].arg_types)
        if len(types) < ids + self.num_workgroup or any(
            not isinstance(t, IndexType) for t in types[:ids]
        ):
            raise VerifyException(
                f"the body takes {ids} index arguments (ids and sizes), then the "
                "attributions"
            )
        _verify_attributions(self.workgroup_args, WORKGROUP_ADDRESS_SPACE, "workgroup")
        _verify_attributions(self.private_args, PRIVATE_ADDRESS_SPACE, "private")

    @classmethod
    def parse(cls, parser: Parser) -> LaunchOp:
        index = IndexType()

        def parse_ids() -> list[Parser.Argument]:
            pos = parser.pos
            ids = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN,
                lambda: parser.parse_argument(expect_type=False).resolve(index),
            )
            if len(ids) != 3:
                parser.raise_error("expected three ids (x, y, z)", pos)
            return ids

        def parse_sizes() -> tuple[list[Parser.Argument], list[SSAValue]]:
            parser.parse_keyword("in")
            pos = parser.pos
            pairs: list[tuple[Parser.Argument, SSAValue]] = (
                parser.parse_comma_separated_list(
                    Parser.Delimiter.PAREN,
                    lambda: (
                        parser.parse_argument(expect_type=False).resolve(index),
                        parser.parse_punctuation("=") and parser.parse_operand(index),
                    ),
                )
            )
            if len(pairs) != 3:
                parser.raise_error("expected three sizes (x, y, z)", pos)
            return [a for a, _ in pairs], [v for _, v in pairs]

        is_async, deps = _parse_async(parser)
        cluster_ids, cluster_args, clusters = [], [], None
        if parser.parse_optional_keyword("clusters") is not None:
            cluster_ids = parse_ids()
            cluster_args, clusters = parse_sizes()
        parser.parse_keyword("blocks")
        block_ids = parse_ids()
        grid_args, grid = parse_sizes()
        parser.parse_keyword("threads")
        thread_ids = parse_ids()
        block_args, block = parse_sizes()
        dynamic = None
        if parser.parse_optional_keyword("dynamic_shared_memory_size") is not None:
            dynamic = parser.parse_operand(i32)
        names: dict[str, str] = {}
        for keyword in ("module", "function"):
            if parser.parse_optional_keyword(keyword) is not None:
                parser.parse_punctuation("(")
                names[keyword] = parser.parse_symbol_name().data
                parser.parse_punctuation(")")
        workgroup = _parse_attributions(parser, "workgroup")
        private = _parse_attributions(parser, "private")
        body = parser.parse_region(
            [
                *block_ids,
                *thread_ids,
                *grid_args,
                *block_args,
                *cluster_ids,
                *cluster_args,
                *workgroup,
                *private,
            ]
        )
        op = cls(
            grid,
            block,
            body,
            dynamic_shared_memory=dynamic,
            workgroup_count=len(workgroup),
            async_dependencies=deps,
            is_async=is_async,
            clusters=clusters,
            kernel_module=names.get("module"),
            kernel_function=names.get("function"),
        )
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        args = self.body.blocks[0].args

        def ids_and_sizes(ids, sizes, values) -> None:
            printer.print_string("(")
            printer.print_list(ids, printer.print_ssa_value)
            printer.print_string(") in (")
            for k, (a, v) in enumerate(zip(sizes, values, strict=True)):
                if k:
                    printer.print_string(", ")
                printer.print_ssa_value(a)
                printer.print_string(" = ")
                printer.print_ssa_value(v)
            printer.print_string(")")

        _print_async(printer, self.asyncToken, self.asyncDependencies)
        if (clusters := self.cluster_sizes) is not None:
            printer.print_string(" clusters")
            ids_and_sizes(args[12:15], args[15:18], clusters)
        printer.print_string(" blocks")
        ids_and_sizes(args[0:3], args[6:9], self.grid_sizes)
        printer.print_string(" threads")
        ids_and_sizes(args[3:6], args[9:12], self.block_sizes)
        if self.dynamicSharedMemorySize is not None:
            printer.print_string(" dynamic_shared_memory_size ")
            printer.print_ssa_value(self.dynamicSharedMemorySize)
        for keyword, name in (
            ("module", self.kernelModule),
            ("function", self.kernelFunc),
        ):
            if name is not None:
                printer.print_string(f" {keyword}(")
                printer.print_attribute(name)
                printer.print_string(")")
        _print_attributions(printer, "workgroup", self.workgroup_args)
        _print_attributions(printer, "private", self.private_args)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        attrs = {
            k: v for k, v in self.attributes.items() if k != WORKGROUP_ATTRIBUTIONS
        }
        printer.print_op_attributes(attrs)


_LAUNCH_SIZE_TYPES = (IndexType, IntegerType)


@irdl_op_definition
class LaunchFuncOp(IRDLOperation):
    """`gpu.launch_func [async [%t]] @m::@k [clusters in (..)] blocks in (..)
    threads in (..) [: i32] args(%a : t, ...)`; sizes are all index, i32 or i64."""

    name = "gpu.launch_func"

    kernel = prop_def(SymbolRefAttr)
    asyncDependencies = var_operand_def(AsyncTokenType)
    gridSizeX = operand_def()
    gridSizeY = operand_def()
    gridSizeZ = operand_def()
    blockSizeX = operand_def()
    blockSizeY = operand_def()
    blockSizeZ = operand_def()
    clusterSizeX = opt_operand_def()
    clusterSizeY = opt_operand_def()
    clusterSizeZ = opt_operand_def()
    dynamicSharedMemorySize = opt_operand_def(i32)
    kernelOperands = var_operand_def()
    asyncObject = opt_operand_def()
    asyncToken = opt_result_def(AsyncTokenType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        kernel: SymbolRefAttr,
        grid: Sequence[SSAValue | Operation],
        block: Sequence[SSAValue | Operation],
        args: Sequence[SSAValue | Operation],
        dynamic_shared_memory: SSAValue | Operation | None = None,
        *,
        async_dependencies: Sequence[SSAValue] = (),
        is_async: bool = False,
        clusters: Sequence[SSAValue | Operation] | None = None,
        async_object: SSAValue | None = None,
    ):
        cluster = [[c] for c in clusters] if clusters is not None else [[], [], []]
        super().__init__(
            operands=[
                async_dependencies,
                *grid,
                *block,
                *cluster,
                [dynamic_shared_memory] if dynamic_shared_memory else [],
                args,
                [async_object] if async_object is not None else [],
            ],
            result_types=[[AsyncTokenType()] if is_async else []],
            properties={"kernel": kernel},
        )

    @property
    def grid_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return (self.gridSizeX, self.gridSizeY, self.gridSizeZ)

    @property
    def block_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return (self.blockSizeX, self.blockSizeY, self.blockSizeZ)

    @property
    def cluster_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue] | None:
        return _cluster_sizes(self)

    @property
    def module_name(self) -> str:
        return self.kernel.root_reference.data

    @property
    def kernel_name(self) -> str:
        return self.kernel.nested_references.data[-1].data

    @property
    def size_type(self) -> Attribute:
        return self.gridSizeX.type

    def verify_(self) -> None:
        if len(self.kernel.nested_references.data) != 1:
            raise VerifyException("the kernel must be named @module::@function")
        sizes = [*self.grid_sizes, *self.block_sizes, *(self.cluster_sizes or ())]
        t = self.size_type
        if not (
            isinstance(t, IndexType)
            or (isinstance(t, IntegerType) and t.width.data in (32, 64))
        ):
            raise VerifyException(f"launch sizes must be index, i32 or i64, not {t}")
        if any(v.type != t for v in sizes):
            raise VerifyException("all launch sizes must have the same type")

    @classmethod
    def parse(cls, parser: Parser) -> LaunchFuncOp:
        is_async, deps = _parse_async(parser)
        async_object = None
        if parser.parse_optional_punctuation("<") is not None:
            unresolved = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            async_object = parser.resolve_operand(unresolved, parser.parse_type())
            parser.parse_punctuation(">")
        pos = parser.pos
        kernel = parser.parse_attribute()
        if not isinstance(kernel, SymbolRefAttr):
            parser.raise_error("expected a symbol @module::@kernel", pos)
        clusters = None
        if parser.parse_optional_keyword("clusters") is not None:
            parser.parse_keyword("in")
            clusters = _parse_dim3(parser)
        parser.parse_keyword("blocks")
        parser.parse_keyword("in")
        grid = _parse_dim3(parser)
        parser.parse_keyword("threads")
        parser.parse_keyword("in")
        block = _parse_dim3(parser)
        size_type: Attribute = IndexType()
        if parser.parse_optional_punctuation(":") is not None:
            size_type = parser.parse_type()
        dynamic = None
        if parser.parse_optional_keyword("dynamic_shared_memory_size") is not None:
            dynamic = parser.parse_operand(i32)
        args: list[SSAValue] = []
        if parser.parse_optional_keyword("args") is not None:

            def parse_arg() -> SSAValue:
                unresolved = parser.parse_unresolved_operand()
                parser.parse_punctuation(":")
                return parser.resolve_operand(unresolved, parser.parse_type())

            args = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_arg)

        def resolve(values: list[UnresolvedOperand]) -> list[SSAValue]:
            return [parser.resolve_operand(v, size_type) for v in values]

        op = cls(
            kernel,
            resolve(grid),
            resolve(block),
            args,
            dynamic,
            async_dependencies=deps,
            is_async=is_async,
            clusters=None if clusters is None else resolve(clusters),
            async_object=async_object,
        )
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        _print_async(printer, self.asyncToken, self.asyncDependencies)
        if self.asyncObject is not None:
            printer.print_string(" <")
            printer.print_ssa_value(self.asyncObject)
            printer.print_string(" : ")
            printer.print_attribute(self.asyncObject.type)
            printer.print_string(">")
        printer.print_string(" ")
        printer.print_attribute(self.kernel)
        if (clusters := self.cluster_sizes) is not None:
            printer.print_string(" clusters in ")
            _print_dim3(printer, clusters)
        printer.print_string(" blocks in ")
        _print_dim3(printer, self.grid_sizes)
        printer.print_string(" threads in ")
        _print_dim3(printer, self.block_sizes)
        if not isinstance(self.size_type, IndexType):
            printer.print_string(" : ")
            printer.print_attribute(self.size_type)
        if self.dynamicSharedMemorySize is not None:
            printer.print_string(" dynamic_shared_memory_size ")
            printer.print_ssa_value(self.dynamicSharedMemorySize)
        if self.kernelOperands:
            printer.print_string(" args(")
            for k, v in enumerate(self.kernelOperands):
                if k:
                    printer.print_string(", ")
                printer.print_ssa_value(v)
                printer.print_string(" : ")
                printer.print_attribute(v.type)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes)


ID_OPS: dict[str, type[_IndexOfDim]] = {
    "thread_id": ThreadIdOp,
    "block_id": BlockIdOp,
    "block_dim": BlockDimOp,
    "grid_dim": GridDimOp,
}


Gpu = Dialect(
    "gpu",
    [
        AllReduceOp,
        BarrierOp,
        BlockDimOp,
        BlockIdOp,
        FuncOp,
        GridDimOp,
        LaneIdOp,
        LaunchFuncOp,
        LaunchOp,
        ModuleOp,
        NumSubgroupsOp,
        ReturnOp,
        ShuffleOp,
        SubgroupIdOp,
        SubgroupReduceOp,
        SubgroupSizeOp,
        TerminatorOp,
        ThreadIdOp,
        WaitOp,
        YieldOp,
    ],
    [AddressSpaceAttr, AllReduceOpAttr, AsyncTokenType, DimensionAttr, ShuffleModeAttr],
)
