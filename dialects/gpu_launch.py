"""The gpu dialect's launches: `gpu.launch` (a kernel written inline: its body runs
once per thread, with the block and thread ids, the grid and block sizes, optional
clusters, dynamic shared memory and memory attributions as MLIR has them) and
`gpu.launch_func` (a launch of a `gpu.func` kernel by its `@module::@kernel` name), each
with MLIR's custom syntax and operand segments.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    SymbolRefAttr,
    i32,
    i64,
)
from xdsl.dialects.gpu import AsyncTokenType
from xdsl.ir import Attribute, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.gpu_common import (
    CONTAINER_MODULE,
    DIMENSIONS,
    KERNEL,
    PRIVATE_ADDRESS_SPACE,
    WORKGROUP_ADDRESS_SPACE,
    WORKGROUP_ATTRIBUTIONS,
    attribution_count,
    attributions,
    parse_async,
    parse_attributions,
    print_async,
    print_attributions,
    verify_attributions,
)

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


class _LaunchSizes:
    """The grid, block and cluster sizes of `gpu.launch` and `gpu.launch_func`,
    which name their operands alike."""

    @property
    def grid_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return tuple(getattr(self, f"gridSize{d.upper()}") for d in DIMENSIONS)  # pyright: ignore[reportReturnType]

    @property
    def block_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        return tuple(getattr(self, f"blockSize{d.upper()}") for d in DIMENSIONS)  # pyright: ignore[reportReturnType]

    @property
    def cluster_sizes(self) -> tuple[SSAValue, SSAValue, SSAValue] | None:
        sizes = tuple(getattr(self, f"clusterSize{d.upper()}") for d in DIMENSIONS)
        if all(v is None for v in sizes):
            return None
        if any(v is None for v in sizes):
            raise VerifyException("give all three cluster sizes or none")
        return sizes  # pyright: ignore[reportReturnType]


@irdl_op_definition
class LaunchOp(_LaunchSizes, IRDLOperation):
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
    def num_workgroup(self) -> int:
        return attribution_count(self.workgroup_attributions)

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
        return attributions(self.body.blocks[0], self.num_id_args, self.num_workgroup)

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
                f"unexpected number of region arguments (the body takes {ids} index "
                "arguments, the ids and sizes, then the attributions)"
            )
        verify_attributions(self.workgroup_args, WORKGROUP_ADDRESS_SPACE, "workgroup")
        verify_attributions(self.private_args, PRIVATE_ADDRESS_SPACE, "private")

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

        is_async, deps = parse_async(parser)
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
        workgroup = parse_attributions(parser, "workgroup")
        private = parse_attributions(parser, "private")
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

        print_async(printer, self.asyncToken, self.asyncDependencies)
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
        print_attributions(printer, "workgroup", self.workgroup_args)
        print_attributions(printer, "private", self.private_args)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        attrs = {
            k: v for k, v in self.attributes.items() if k != WORKGROUP_ATTRIBUTIONS
        }
        printer.print_op_attributes(attrs)


_LAUNCH_SIZE_TYPES = (IndexType, IntegerType)


def _symbol(table: Operation, name: str) -> Operation | None:
    """The op of `table`'s body named `name` (`sym_name`), if any."""
    if not table.regions or not table.regions[0].blocks:
        return None
    for op in table.regions[0].blocks.first.ops:
        sym = op.properties.get("sym_name") or op.attributes.get("sym_name")
        if isinstance(sym, StringAttr) and sym.data == name:
            return op
    return None


@irdl_op_definition
class LaunchFuncOp(_LaunchSizes, IRDLOperation):
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
        self._verify_kernel_reference()

    def _verify_kernel_reference(self) -> None:
        """MLIR's checks of the kernel a launch names, in its words: the closest
        module holds kernels (`gpu.container_module`), the container is a
        `gpu.module` (or a `gpu.binary`), the kernel is a function marked
        `gpu.kernel` there, taking the operands the launch passes (as many, of its
        argument types)."""
        module = self.parent_op()
        while module is not None and module.name != "builtin.module":
            module = module.parent_op()
        if module is None:
            return  # a launch being built, not yet in a module
        if CONTAINER_MODULE not in module.attributes:
            raise VerifyException(
                "expected the closest surrounding module to have the "
                f"'{CONTAINER_MODULE}' attribute"
            )
        container = _symbol(module, self.module_name)
        if container is None:
            raise VerifyException(f"kernel container '{self.module_name}' is undefined")
        if container.name == "gpu.binary":
            return
        if container.name != "gpu.module":
            raise VerifyException(f"kernel module '{self.module_name}' is undefined")
        kernel = _symbol(container, self.kernel_name)
        if kernel is None:
            raise VerifyException(f"kernel function '{self.kernel}' is undefined")
        if kernel.name not in ("gpu.func", "llvm.func", "func.func"):
            raise VerifyException(
                f"referenced kernel '{self.kernel}' is not a function"
            )
        if KERNEL not in kernel.attributes:
            raise VerifyException(
                f"kernel function is missing the '{KERNEL}' attribute"
            )
        if kernel.name == "gpu.func":
            inputs = kernel.function_type.inputs.data
            if len(self.kernelOperands) != len(inputs):
                raise VerifyException(
                    f"got {len(self.kernelOperands)} kernel operands but expected "
                    f"{len(inputs)}"
                )
            for k, (value, t) in enumerate(
                zip(self.kernelOperands, inputs, strict=True)
            ):
                if value.type != t:
                    raise VerifyException(
                        f"type of function argument {k} does not match"
                    )

    @classmethod
    def parse(cls, parser: Parser) -> LaunchFuncOp:
        is_async, deps = parse_async(parser)
        async_object = None
        if parser.parse_optional_punctuation("<") is not None:
            unresolved = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            async_object = parser.resolve_operand(unresolved, parser.parse_type())
            parser.parse_punctuation(">")
        pos = parser.pos
        kernel = parser.parse_attribute()
        if not isinstance(kernel, SymbolRefAttr):
            parser.raise_error(
                "invalid kind of attribute specified (expected a symbol "
                "@module::@kernel)",
                pos,
            )
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
        print_async(printer, self.asyncToken, self.asyncDependencies)
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
