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
`gpu.launch`, after its twelve id and size arguments) takes the function's inputs,
then one argument per `workgroup` buffer (shared memory, memory space 3), then one per
`private` buffer.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
    i32,
    i64,
)
from xdsl.dialects.gpu import AsyncTokenType, DimensionAttr, DimensionEnum
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    Region,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

CONTAINER_MODULE = "gpu.container_module"
"""Unit attribute on a builtin module that holds `gpu.module`s (as MLIR requires)."""

WORKGROUP_ADDRESS_SPACE = 3
"""The memory space of shared memory (CUDA's `__shared__`, PTX's `.shared`)."""

PRIVATE_ADDRESS_SPACE = 5
"""The memory space of a thread's own memory (registers or `.local`), as NVVM numbers
it. Before the gpu level it marks a buffer each of whose elements only one thread
ever touches (`affinec-place-buffers`)."""


def memory_space(t: Attribute) -> int:
    """The memory space of a memref type as a number (0 when it has none)."""
    space = getattr(t, "memory_space", None)
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
# Ids and sizes
# --------------------------------------------------------------------------------------


class _IndexOfDim(IRDLOperation):
    """`%r = gpu.<op> x [upper_bound N]`: an id or size along one dimension."""

    dimension = prop_def(DimensionAttr)
    upper_bound = opt_prop_def(IntegerAttr)
    result = result_def(IndexType)

    def __init__(self, dim: str, upper_bound: int | None = None):
        props: dict[str, Attribute | None] = {
            "dimension": DimensionAttr(DimensionEnum(dim)),
            "upper_bound": None
            if upper_bound is None
            else IntegerAttr(upper_bound, IndexType()),
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
        bound = None
        if parser.parse_optional_keyword("upper_bound") is not None:
            bound = parser.parse_integer(allow_boolean=False, allow_negative=False)
        op = cls(dim, bound)
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


# --------------------------------------------------------------------------------------
# Terminators and barrier
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


# --------------------------------------------------------------------------------------
# gpu.module, gpu.func
# --------------------------------------------------------------------------------------


@irdl_op_definition
class ModuleOp(IRDLOperation):
    """`gpu.module @name { ... }`: the device code, one symbol table."""

    name = "gpu.module"

    body = region_def("single_block")
    sym_name = attr_def(SymbolNameConstraint())

    traits = traits_def(
        IsolatedFromAbove(), SymbolOpInterface(), SymbolTable(), NoTerminator()
    )

    def __init__(self, name: str, body: Region | Sequence[Operation] = ()):
        if not isinstance(body, Region):
            body = Region(Block(body))
        super().__init__(attributes={"sym_name": StringAttr(name)}, regions=[body])

    @classmethod
    def parse(cls, parser: Parser) -> ModuleOp:
        name = parser.parse_symbol_name()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        op = cls(name.data, region)
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=("sym_name",), print_keyword=True
        )
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
    kernel = opt_prop_def(UnitAttr)
    workgroup_attributions = opt_prop_def(IntegerAttr)
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
            "kernel": UnitAttr() if kernel else None,
            "workgroup_attributions": IntegerAttr(workgroup_count, i64)
            if workgroup_count
            else None,
            "known_block_size": None
            if known_block_size is None
            else DenseArrayBase.from_list(i32, known_block_size),
            "known_grid_size": None
            if known_grid_size is None
            else DenseArrayBase.from_list(i32, known_grid_size),
        }
        super().__init__(
            properties=props,
            attributes={"sym_name": StringAttr(name)},
            regions=[body],
        )

    @property
    def num_workgroup(self) -> int:
        w = self.workgroup_attributions
        return 0 if w is None else w.value.data

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
        inputs = tuple(self.function_type.inputs.data)
        args = tuple(self.body.blocks[0].arg_types)
        if args[: len(inputs)] != inputs:
            raise VerifyException(
                "the entry block's arguments must start with the function's inputs"
            )
        if len(args) < len(inputs) + self.num_workgroup:
            raise VerifyException("fewer entry block arguments than attributions")
        for arg in self.workgroup_args:
            space = getattr(arg.type, "memory_space", None)
            if not (
                isinstance(space, IntegerAttr)
                and space.value.data == WORKGROUP_ADDRESS_SPACE
            ):
                raise VerifyException(
                    f"workgroup attribution of type {arg.type} must be a memref in "
                    f"memory space {WORKGROUP_ADDRESS_SPACE}"
                )
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
        attrs: dict[str, Attribute] = dict(self.attributes)
        del attrs["sym_name"]
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


def _parse_dim3(parser: Parser) -> list[SSAValue]:
    values = parser.parse_comma_separated_list(
        Parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
    )
    if len(values) != 3:
        parser.raise_error(f"expected three sizes (x, y, z), got {len(values)}")
    return values


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """`gpu.launch blocks(%bx, %by, %bz) in (%gx = ..) threads(...) in (...) {...}`.

    The body runs once per thread of every block. Its entry block takes the block ids,
    the thread ids, the grid sizes and the block sizes (three each, x y z), then the
    workgroup attributions.
    """

    name = "gpu.launch"

    gridSizeX = operand_def(IndexType)
    gridSizeY = operand_def(IndexType)
    gridSizeZ = operand_def(IndexType)
    blockSizeX = operand_def(IndexType)
    blockSizeY = operand_def(IndexType)
    blockSizeZ = operand_def(IndexType)
    dynamicSharedMemorySize = opt_operand_def(i32)
    workgroup_attributions = opt_prop_def(IntegerAttr)

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
    ):
        super().__init__(
            operands=[
                *grid,
                *block,
                [dynamic_shared_memory] if dynamic_shared_memory else [],
            ],
            properties={
                "workgroup_attributions": IntegerAttr(workgroup_count, i64)
                if workgroup_count
                else None
            },
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
    def num_workgroup(self) -> int:
        w = self.workgroup_attributions
        return 0 if w is None else w.value.data

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
        return _attributions(self.body.blocks[0], 12, self.num_workgroup)

    def verify_(self) -> None:
        if not self.body.blocks:
            raise VerifyException("a gpu.launch needs a body")
        types = tuple(self.body.blocks[0].arg_types)
        if len(types) < 12 + self.num_workgroup or any(
            not isinstance(t, IndexType) for t in types[:12]
        ):
            raise VerifyException(
                "the body takes 12 index arguments (ids and sizes), then the "
                "attributions"
            )

    @classmethod
    def parse(cls, parser: Parser) -> LaunchOp:
        index = IndexType()

        def parse_ids() -> list[Parser.Argument]:
            ids = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN,
                lambda: parser.parse_argument(expect_type=False).resolve(index),
            )
            if len(ids) != 3:
                parser.raise_error("expected three ids (x, y, z)")
            return ids

        def parse_sizes() -> tuple[list[Parser.Argument], list[SSAValue]]:
            parser.parse_keyword("in")
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
                parser.raise_error("expected three sizes (x, y, z)")
            return [a for a, _ in pairs], [v for _, v in pairs]

        parser.parse_keyword("blocks")
        block_ids = parse_ids()
        grid_args, grid = parse_sizes()
        parser.parse_keyword("threads")
        thread_ids = parse_ids()
        block_args, block = parse_sizes()
        dynamic = None
        if parser.parse_optional_keyword("dynamic_shared_memory_size") is not None:
            dynamic = parser.parse_operand(i32)
        workgroup = _parse_attributions(parser, "workgroup")
        body = parser.parse_region(
            [*block_ids, *thread_ids, *grid_args, *block_args, *workgroup]
        )
        op = cls(
            grid,
            block,
            body,
            dynamic_shared_memory=dynamic,
            workgroup_count=len(workgroup),
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

        printer.print_string(" blocks")
        ids_and_sizes(args[0:3], args[6:9], self.grid_sizes)
        printer.print_string(" threads")
        ids_and_sizes(args[3:6], args[9:12], self.block_sizes)
        if self.dynamicSharedMemorySize is not None:
            printer.print_string(" dynamic_shared_memory_size ")
            printer.print_ssa_value(self.dynamicSharedMemorySize)
        _print_attributions(printer, "workgroup", self.workgroup_args)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class LaunchFuncOp(IRDLOperation):
    """`gpu.launch_func @m::@k blocks in (..) threads in (..) args(%a : t, ...)`."""

    name = "gpu.launch_func"

    kernel = prop_def(SymbolRefAttr)
    gridSizeX = operand_def(IndexType)
    gridSizeY = operand_def(IndexType)
    gridSizeZ = operand_def(IndexType)
    blockSizeX = operand_def(IndexType)
    blockSizeY = operand_def(IndexType)
    blockSizeZ = operand_def(IndexType)
    dynamicSharedMemorySize = opt_operand_def(i32)
    kernelOperands = var_operand_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        kernel: SymbolRefAttr,
        grid: Sequence[SSAValue | Operation],
        block: Sequence[SSAValue | Operation],
        args: Sequence[SSAValue | Operation],
        dynamic_shared_memory: SSAValue | Operation | None = None,
    ):
        super().__init__(
            operands=[
                *grid,
                *block,
                [dynamic_shared_memory] if dynamic_shared_memory else [],
                args,
            ],
            properties={"kernel": kernel},
        )

    @property
    def grid_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return (self.gridSizeX, self.gridSizeY, self.gridSizeZ)

    @property
    def block_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return (self.blockSizeX, self.blockSizeY, self.blockSizeZ)

    @property
    def module_name(self) -> str:
        return self.kernel.root_reference.data

    @property
    def kernel_name(self) -> str:
        return self.kernel.nested_references.data[-1].data

    def verify_(self) -> None:
        if len(self.kernel.nested_references.data) != 1:
            raise VerifyException("the kernel must be named @module::@function")

    @classmethod
    def parse(cls, parser: Parser) -> LaunchFuncOp:
        pos = parser.pos
        kernel = parser.parse_attribute()
        if not isinstance(kernel, SymbolRefAttr):
            parser.raise_error("expected a symbol @module::@kernel", pos)
        parser.parse_keyword("blocks")
        parser.parse_keyword("in")
        grid = _parse_dim3(parser)
        parser.parse_keyword("threads")
        parser.parse_keyword("in")
        block = _parse_dim3(parser)
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
        op = cls(kernel, grid, block, args, dynamic)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_attribute(self.kernel)
        printer.print_string(" blocks in ")
        _print_dim3(printer, self.grid_sizes)
        printer.print_string(" threads in ")
        _print_dim3(printer, self.block_sizes)
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
        BarrierOp,
        BlockDimOp,
        BlockIdOp,
        FuncOp,
        GridDimOp,
        LaunchFuncOp,
        LaunchOp,
        ModuleOp,
        ReturnOp,
        TerminatorOp,
        ThreadIdOp,
    ],
    [AsyncTokenType, DimensionAttr],
)
