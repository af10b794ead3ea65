"""The structured ops' common part, as MLIR's named linalg ops have it: the custom
form `linalg.NAME [{attrs}] ins(...) outs(...)` read and printed (`NamedStructuredOp`),
the body MLIR builds for a named contraction (`body_block`) and the verifier's check
that an op carries it, and the two families: convolutions with their `strides`,
`dilations` and memoized indexing maps (`WindowedOp`), and products with their
`indexing_maps` property (`ProductOp`). The named ops themselves are in
`affinec.dialects.linalg`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    MemRefType,
    ShapedType,
)
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    opt_prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands


class NamedStructuredOp(IRDLOperation):
    """`linalg.NAME [{attrs}] ins(%a, %b : A, B) outs(%c : C)` on memrefs."""

    inputs = var_operand_def()
    outputs = var_operand_def()
    results_ = var_result_def()
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(
        AccessesOperands(reads=("inputs", "outputs"), writes=("outputs",))
    )

    RANKS: ClassVar[tuple[int, int, int]]
    """The ranks of the two inputs and the output."""
    PROPERTIES: ClassVar[tuple[str, ...]] = ()
    """The properties MLIR's custom form writes in the attribute dictionary."""

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        attributes: dict[str, Attribute] | None = None,
    ):
        """The op with MLIR's body; `attributes` as the custom form writes them
        (the properties among them taken as such)."""
        attributes = dict(attributes or {})
        properties = {n: attributes.pop(n) for n in self.PROPERTIES if n in attributes}
        element_types = [_element_type(v.type) for v in (*inputs, *outputs)]
        super().__init__(
            operands=[inputs, outputs],
            result_types=[[]],
            properties=properties,
            attributes=attributes,
            regions=[Region(body_block(*element_types))],
        )
        self.memoize()

    def memoize(self) -> None:
        """Record what MLIR records on the op once it is verified (nothing here)."""

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        """The indexing maps of the two inputs and the output, as MLIR writes them."""
        raise NotImplementedError

    def types(self) -> tuple[MemRefType, MemRefType, MemRefType]:
        a, b = (v.type for v in self.inputs)
        (c,) = (v.type for v in self.outputs)
        return a, b, c  # pyright: ignore[reportReturnType]

    def verify_(self) -> None:
        if self.results_:
            raise VerifyException(
                "the tensor form (with results) is not taken: bufferize to memrefs first"
            )
        if len(self.inputs) != 2 or len(self.outputs) != 1:
            raise VerifyException("takes two inputs and one output")
        self._mlir_checks()
        # affinec's own limits: static memrefs of the op's ranks
        for v in (*self.inputs, *self.outputs):
            if not isinstance(v.type, MemRefType):
                raise VerifyException(f"takes memrefs, got {v.type}")
            if any(d < 0 for d in v.type.get_shape()):
                raise VerifyException(f"takes static shapes, got {v.type}")
        ranks = tuple(t.get_num_dims() for t in self.types())
        if ranks != self.RANKS:
            raise VerifyException(f"takes operands of ranks {self.RANKS}, got {ranks}")
        expected = self.output_shape()
        got = tuple(self.types()[2].get_shape())
        if got != expected:
            raise VerifyException(
                f"the output's shape is {got}, the inputs make it {expected}"
            )
        element_types = [_element_type(t) for t in self.types()]
        if _shape_of_body(self.body.block) != _shape_of_body(
            body_block(*element_types)
        ):
            raise VerifyException(
                "the body must be the one MLIR builds for the op (the inputs cast "
                "to the output's type, multiplied and added to the output)"
            )

    def output_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def _mlir_checks(self) -> None:
        """MLIR's checks of a structured op, in its order and words: each
        operand's rank against its indexing map, then (where every loop's size
        is known from a static operand dimension the loop indexes alone) the
        operands' sizes against the ranges the maps infer from those loops."""
        maps = self.default_maps()
        operand_types = [v.type for v in (*self.inputs, *self.outputs)]
        for k, v in enumerate(self.outputs, start=len(self.inputs)):
            if not isinstance(v.type, ShapedType):
                raise VerifyException(
                    f"operand #{k} must be variadic of shaped of any type values, "
                    f"but got '{v.type}'"
                )
        shapes: list[tuple[int, ...]] = []
        for k, (m, t) in enumerate(zip(maps, operand_types, strict=True)):
            shape = tuple(t.get_shape()) if isinstance(t, ShapedType) else ()
            if len(shape) != len(m.results):
                raise VerifyException(
                    f"expected operand #{k} rank ({len(shape)}) to match the result "
                    f"rank of indexing_map ({len(m.results)})"
                )
            shapes.append(shape)
        loops: list[int | None] = [None] * maps[0].num_dims
        for m, shape in zip(maps, shapes, strict=True):
            for e, size in zip(m.results, shape, strict=True):
                if isinstance(e, AffineDimExpr) and loops[e.position] is None:
                    loops[e.position] = size
        if any(size is None or size < 0 for size in loops):
            return  # a loop of unknown size: MLIR checks nothing more
        for k, (m, shape) in enumerate(zip(maps, shapes, strict=True)):
            low = m.eval([0] * len(loops), [])
            high = m.eval([size - 1 for size in loops], [])  # pyright: ignore
            for d, size in enumerate(shape):
                if size <= 0:
                    continue
                inferred = max(low[d], high[d]) + 1
                if min(low[d], high[d]) < 0:
                    raise VerifyException(
                        f"unexpected result less than 0 at expression #{d} in {m}"
                    )
                exact = isinstance(m.results[d], AffineDimExpr)
                if exact and inferred != size:
                    raise VerifyException(
                        f"inferred input/output operand #{k} has shape's dimension "
                        f"#{d} to be {inferred}, but found {size}"
                    )
                if not exact and inferred > size:
                    raise VerifyException(
                        f"inferred input/output operand #{k} has shape's dimension "
                        f"#{d} to be greater than or equal to {inferred}, but found "
                        f"{size}"
                    )

    @classmethod
    def parse(cls, parser: Parser) -> NamedStructuredOp:
        # MLIR writes a product's maps as a keyword: `indexing_maps = [...]`
        maps = None
        if parser.parse_optional_keyword("indexing_maps") is not None:
            parser.parse_punctuation("=")
            maps = parser.parse_attribute()
        attributes = parser.parse_optional_attr_dict()
        if maps is not None:
            attributes["indexing_maps"] = maps

        def operands(keyword: str) -> list[SSAValue]:
            parser.parse_keyword(keyword)
            parser.parse_punctuation("(")
            names = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
            parser.parse_punctuation(")")
            if len(names) != len(types):
                parser.raise_error(
                    f"{len(names)} {keyword} operands but {len(types)} types"
                )
            return [
                parser.resolve_operand(n, t) for n, t in zip(names, types, strict=True)
            ]

        inputs = operands("ins")
        outputs = operands("outs")
        if parser.parse_optional_punctuation("->") is not None:
            parser.raise_error(
                "the tensor form (with results) is not taken: bufferize to memrefs "
                "first"
            )
        return cls(inputs, outputs, attributes)

    def print(self, printer: Printer) -> None:
        shown = {
            name: value
            for name, value in (*self.properties.items(), *self.attributes.items())
            if self.shows(name)
        }
        if shown:
            printer.print_string(" ")
            printer.print_attr_dict(dict(sorted(shown.items())))
        for keyword, values in (("ins", self.inputs), ("outs", self.outputs)):
            printer.print_string(f" {keyword}(")
            printer.print_list(values, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in values], printer.print_attribute)
            printer.print_string(")")

    def shows(self, name: str) -> bool:
        """Whether the custom form writes `name` in the attribute dictionary."""
        return name != "operandSegmentSizes"


MEMOIZED_MAPS = "linalg.memoized_indexing_maps"


def _is_i64_pair(attr: Attribute) -> bool:
    """Whether `attr` is dense elements of two signless 64-bit integers."""
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        return False
    shaped = attr.get_type()
    return tuple(shaped.get_shape()) == (
        2,
    ) and shaped.get_element_type() == IntegerType(64)


class WindowedOp(NamedStructuredOp):
    """A convolution: `strides` and `dilations` (MLIR's default 1, 1) and, once
    built or read, its indexing maps memoized as MLIR memoizes them."""

    # any attribute, so that the verifier refuses a wrong one in MLIR's words
    strides = opt_prop_def(Attribute)
    dilations = opt_prop_def(Attribute)

    PROPERTIES: ClassVar[tuple[str, ...]] = ("strides", "dilations")

    def window(self, name: str) -> tuple[int, int]:
        """`strides` or `dilations` (MLIR's default: 1, 1)."""
        attr = self.properties.get(name)
        if attr is None:
            return (1, 1)
        if not isinstance(attr, DenseIntOrFPElementsAttr):
            raise VerifyException(f"'{name}' must be a dense array of two integers")
        values = [int(v) for v in attr.get_values()]
        if len(values) != 2 or min(values) < 1:
            raise VerifyException(f"'{name}' takes two positive integers, got {values}")
        return (values[0], values[1])

    def output_window(self, h: int, w: int, r: int, s: int) -> tuple[int, int]:
        """The output's height and width from the input's and the filter's (the
        verifier's check of the window, through `window`)."""
        (sh, sw), (dh, dw) = self.window("strides"), self.window("dilations")
        return (h - (r - 1) * dh - 1) // sh + 1, (w - (s - 1) * dw - 1) // sw + 1

    def memoize(self) -> None:
        try:
            maps = self.default_maps()
        except VerifyException:
            return  # a window the verifier refuses: it says why
        self.attributes[MEMOIZED_MAPS] = ArrayAttr([AffineMapAttr(m) for m in maps])

    def verify_(self) -> None:
        # MLIR's constraint on the two properties, checked in its order
        for name in ("dilations", "strides"):
            attr = self.properties.get(name)
            if attr is not None and not _is_i64_pair(attr):
                raise VerifyException(
                    f"attribute '{name}' failed to satisfy constraint: 64-bit "
                    "signless int elements attribute of shape [2]"
                )
        super().verify_()
        memo = self.attributes.get(MEMOIZED_MAPS)
        if memo is not None and memo != ArrayAttr(
            [AffineMapAttr(m) for m in self.default_maps()]
        ):
            raise VerifyException(f"'{MEMOIZED_MAPS}' are not the op's indexing maps")

    def shows(self, name: str) -> bool:
        return super().shows(name) and name != MEMOIZED_MAPS

    def window_exprs(self, position: int, tap: int) -> tuple[AffineExpr, AffineExpr]:
        """The input's two spatial indices, `o * stride + t * dilation`, for the
        output's spatial dimensions from `position` and the taps' from `tap`."""
        (sh, sw), (dh, dw) = self.window("strides"), self.window("dilations")
        d = AffineExpr.dimension
        return (
            d(position) * sh + d(tap) * dh,
            d(position + 1) * sw + d(tap + 1) * dw,
        )


class ProductOp(NamedStructuredOp):
    """A matrix product: its `indexing_maps` property, MLIR's default only."""

    indexing_maps = opt_prop_def(ArrayAttr[AffineMapAttr])

    PROPERTIES: ClassVar[tuple[str, ...]] = ("indexing_maps",)

    def memoize(self) -> None:
        if self.indexing_maps is None:
            self.indexing_maps = self._default_attr()

    def _default_attr(self) -> ArrayAttr[AffineMapAttr]:
        return ArrayAttr([AffineMapAttr(m) for m in self.default_maps()])

    def verify_(self) -> None:
        # first: a transposed operand's shapes would read as a mismatch below
        if self.indexing_maps is not None and self.indexing_maps != (
            self._default_attr()
        ):
            raise VerifyException(
                "affinec takes the product's default indexing maps only (no "
                "transposed or broadcast operand)"
            )
        super().verify_()

    def shows(self, name: str) -> bool:
        return super().shows(name) and name != "indexing_maps"


def _element_type(t: Attribute) -> Attribute:
    """A shaped type's element type (the tensor form's too, which the verifier
    refuses with its own message)."""
    element_type = getattr(t, "get_element_type", None)
    return element_type() if element_type is not None else t


def body_block(a: Attribute, b: Attribute, c: Attribute) -> Block:
    """The body MLIR builds for a named contraction of inputs of element types `a`
    and `b` into `c`: each input cast to `c`, multiplied, added to the output (in
    floats, or in signless integers extended with their sign, as MLIR does)."""
    block = Block(arg_types=[a, b, c])
    x, y, out = block.args
    integers = isinstance(c, IntegerType)
    kinds = (
        (IntegerType,)
        if integers
        else (Float16Type, BFloat16Type, Float32Type, Float64Type)
    )
    for t in (a, b, c):
        if not isinstance(t, kinds):
            raise VerifyException(
                f"a named op of {a}, {b} into {c}: affinec takes float elements, or "
                "integers throughout"
            )

    def cast(value: SSAValue) -> SSAValue:
        if value.type == c:
            return value
        wider = c.bitwidth > value.type.bitwidth  # pyright: ignore
        if integers:
            op = arith.ExtSIOp(value, c) if wider else arith.TruncIOp(value, c)
        else:
            op = arith.ExtFOp(value, c) if wider else arith.TruncFOp(value, c)
        block.add_op(op)
        return op.result

    x, y = cast(x), cast(y)
    product = arith.MuliOp(x, y) if integers else arith.MulfOp(x, y)
    block.add_op(product)
    total = (
        arith.AddiOp(out, product.result)
        if integers
        else arith.AddfOp(out, product.result)
    )
    block.add_op(total)
    block.add_op(YieldOp(total.result))
    return block


def _shape_of_body(block: Block) -> tuple:
    """A body as op names, result types and operands (block arguments and earlier
    results by position), and its arguments' types: equal for the same body."""
    numbers: dict[SSAValue, tuple[str, int]] = {
        a: ("arg", k) for k, a in enumerate(block.args)
    }
    ops: list[tuple] = []
    for k, op in enumerate(block.ops):
        ops.append(
            (
                op.name,
                tuple(numbers.get(v, ("outside", 0)) for v in op.operands),
                tuple(r.type for r in op.results),
                _flags(op),
            )
        )
        numbers.update({r: ("op", k) for r in op.results})
    return tuple(a.type for a in block.args), tuple(ops)


def _flags(op: Operation) -> tuple:
    return tuple(op.properties.get(name) for name in ("fastmath", "overflowFlags"))
