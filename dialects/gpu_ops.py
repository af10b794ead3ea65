"""The gpu dialect's small ops: the ids and sizes of threads, blocks, grids and
subgroups (`gpu.thread_id x`, `gpu.lane_id`, ...), `gpu.barrier`, the terminators of
`gpu.func` and `gpu.launch` (`gpu.return`, `gpu.terminator`), and `gpu.wait`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.dialects.gpu import AsyncTokenType, DimensionAttr, DimensionEnum
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.gpu_common import DIMENSIONS, parse_async, print_async

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


@irdl_op_definition
class GlobalIdOp(_IndexOfDim):
    """`gpu.global_id x`: the thread's index in the grid, block_id * block_dim +
    thread_id."""

    name = "gpu.global_id"


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

    def verify_(self) -> None:
        func = self.parent_op()
        if func is None:
            return  # being built
        if func.name != "gpu.func":
            raise VerifyException("expects parent op 'gpu.func'")
        outputs = tuple(func.function_type.outputs.data)
        if len(self.args) != len(outputs):
            raise VerifyException(
                f"expected {len(outputs)} result operands (the function returns "
                f"{len(outputs)} values, this returns {len(self.args)})"
            )
        if tuple(self.args.types) != outputs:
            raise VerifyException(
                "the return operand types do not match the function's result types"
            )


@irdl_op_definition
class TerminatorOp(IRDLOperation):
    """`gpu.terminator`: the end of a `gpu.launch` body."""

    name = "gpu.terminator"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"


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
        is_async, deps = parse_async(parser)
        op = cls(deps, is_async)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        print_async(printer, self.asyncToken, self.asyncDependencies)
        printer.print_op_attributes(self.attributes)


ID_OPS: dict[str, type[_IndexOfDim]] = {
    "thread_id": ThreadIdOp,
    "block_id": BlockIdOp,
    "block_dim": BlockDimOp,
    "grid_dim": GridDimOp,
}
