"""The gpu dialect's device code: `gpu.module` (a symbol table of kernels, with the
targets to compile it for, e.g. `#nvvm.target`) and `gpu.func` (a function or kernel,
its workgroup and private memory attributions and its known launch bounds).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    opt_attr_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    NoTerminator,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.affine_syntax import parse_type_list
from affinec.dialects.gpu_common import (
    KERNEL,
    PRIVATE_ADDRESS_SPACE,
    WORKGROUP_ADDRESS_SPACE,
    WORKGROUP_ATTRIBUTIONS,
    attribution_count,
    attributions,
    parse_attributions,
    print_attributions,
    verify_attributions,
)
from affinec.dialects.nvvm_target import GRID_CONSTANT

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

    def verify_(self) -> None:
        if self.targets is not None and (
            not self.targets.data
            or not all(
                getattr(t, "name", "").endswith(".target") for t in self.targets.data
            )
        ):
            raise VerifyException(
                "attribute 'targets' failed to satisfy constraint: array of GPU "
                "target attributes with at least 1 elements"
            )

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
        # an empty module prints as `{\n}`, as MLIR prints it, not with `^bb0:`
        printer.print_region(self.body, print_empty_block=False)


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
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    """Each input's attributes, as MLIR's: a TMA descriptor passed by value is
    `%d: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>}`."""

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
        arg_attrs: Sequence[DictionaryAttr] | None = None,
        results: Sequence[Attribute] = (),
    ):
        props: dict[str, Attribute | None] = {
            "arg_attrs": None
            if not arg_attrs or not any(a.data for a in arg_attrs)
            else ArrayAttr(arg_attrs),
            "function_type": FunctionType.from_lists(list(inputs), list(results)),
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
        return attribution_count(self.workgroup_attributions)

    @property
    def arguments(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[: len(self.function_type.inputs)]

    @property
    def workgroup_args(self) -> Sequence[BlockArgument]:
        return attributions(
            self.body.blocks[0], len(self.function_type.inputs), self.num_workgroup
        )

    @property
    def private_args(self) -> Sequence[BlockArgument]:
        return self.body.blocks[0].args[
            len(self.function_type.inputs) + self.num_workgroup :
        ]

    def argument_attributes(self, k: int) -> dict[str, Attribute]:
        """The attributes of input `k` (none: an empty dict)."""
        if self.arg_attrs is None:
            return {}
        return dict(self.arg_attrs.data[k].data)

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
            raise VerifyException("expected body with at least one block")
        if KERNEL in self.attributes and self.kernel is None:
            raise VerifyException(f"'{KERNEL}' must be a unit attribute")
        inputs = tuple(self.function_type.inputs.data)
        args = tuple(self.body.blocks[0].arg_types)
        if args[: len(inputs)] != inputs:
            raise VerifyException(
                "the entry block's arguments must start with the function's inputs"
            )
        if self.arg_attrs is not None and len(self.arg_attrs.data) != len(inputs):
            raise VerifyException(
                f"{len(self.arg_attrs.data)} argument attribute dictionaries for "
                f"{len(inputs)} inputs"
            )
        for k in range(len(inputs)):
            if GRID_CONSTANT in self.argument_attributes(k):
                raise VerifyException(
                    "'nvvm.grid_constant' belongs on an llvm.func's kernel arguments "
                    "(as MLIR); a gpu.func passes a parameter by value with "
                    "llvm.byval, and convert-gpu-to-nvvm marks it"
                )
        if len(args) < len(inputs) + self.num_workgroup:
            raise VerifyException(
                f"expected at least {len(inputs) + self.num_workgroup} arguments to "
                "body region"
            )
        verify_attributions(self.workgroup_args, WORKGROUP_ADDRESS_SPACE, "workgroup")
        verify_attributions(self.private_args, PRIVATE_ADDRESS_SPACE, "private")
        if self.kernel is not None and self.function_type.outputs.data:
            raise VerifyException("expected void return type for kernel function")
        for what, size in (
            ("known_block_size", self.block_size),
            ("known_grid_size", self.grid_size),
        ):
            if size is not None and len(size) != 3:
                raise VerifyException(
                    f"attribute '{what}' failed to satisfy constraint: i32 dense array "
                    "attribute with 3 elements (if present)"
                )
            if size is not None and min(size) <= 0:
                raise VerifyException(f"{what} needs three positive sizes")

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name = parser.parse_symbol_name()

        def argument() -> tuple[Parser.Argument, DictionaryAttr]:
            arg = parser.parse_optional_argument(expect_type=True)
            if arg is None:
                parser.raise_error("gpu.func requires named arguments")
            return arg, DictionaryAttr(parser.parse_optional_attr_dict())

        parsed = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, argument)
        inputs = [a for a, _ in parsed]
        results: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            results = parse_type_list(parser)
        workgroup = parse_attributions(parser, "workgroup")
        private = parse_attributions(parser, "private")
        kernel = parser.parse_optional_keyword("kernel") is not None
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region([*inputs, *workgroup, *private])
        op = cls(
            name.data,
            [a.type for a in inputs],
            body,
            kernel=kernel,
            workgroup_count=len(workgroup),
            arg_attrs=[d for _, d in parsed],
            results=results,
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

        def argument(k: int) -> None:
            printer.print_block_argument(self.arguments[k])
            if attrs := self.argument_attributes(k):
                printer.print_string(" ")
                printer.print_attr_dict(attrs)

        printer.print_list(range(len(self.arguments)), argument)
        printer.print_string(")")
        if outputs := self.function_type.outputs.data:
            printer.print_string(" -> ")
            if len(outputs) == 1:
                printer.print_attribute(outputs[0])
            else:
                printer.print_string("(")
                printer.print_list(outputs, printer.print_attribute)
                printer.print_string(")")
        print_attributions(printer, "workgroup", self.workgroup_args)
        print_attributions(printer, "private", self.private_args)
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
