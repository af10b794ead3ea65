"""`affine.parallel`, a band of parallel loops with `max`/`min` groups of bounds, and
its reductions (MLIR's `arith::AtomicRMWKind`: names, enum values, which fit a type,
and the identities affinec starts them from)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseIntElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.affine_loops import ensure_yield, verify_yield
from affinec.dialects.affine_syntax import (
    SSAOperandSpace,
    parse_index_literal,
    parse_ssa_expr,
    parse_ssa_expr_list,
    parse_type_list,
    write_ssa_expr,
)
from affinec.dialects.affine_validity import (
    verify_dims_and_symbols,
    verify_divisors,
)

# --------------------------------------------------------------------------------------
# affine.parallel
# --------------------------------------------------------------------------------------

REDUCTION_IDENTITY: dict[str, float | int] = {
    "addf": 0.0,
    "mulf": 1.0,
    "maximumf": float("-inf"),
    "minimumf": float("inf"),
    "addi": 0,
    "muli": 1,
}
"""The reductions affinec's lowering and interpreter perform, and the value each
starts from."""

REDUCTION_ENUM: dict[str, int] = {
    "addf": 0,
    "addi": 1,
    "andi": 2,
    "assign": 3,
    "maximumf": 4,
    "maxnumf": 5,
    "maxs": 6,
    "maxu": 7,
    "minimumf": 8,
    "minnumf": 9,
    "mins": 10,
    "minu": 11,
    "mulf": 12,
    "muli": 13,
    "ori": 14,
    "xori": 15,
}
"""MLIR's `arith::AtomicRMWKind`, the integers the generic form of `affine.parallel`
stores its reductions as."""

REDUCTION_NAMES = {v: k for k, v in REDUCTION_ENUM.items()}

REDUCTION_KINDS = tuple(REDUCTION_ENUM)


def _count_mismatch(ivs: int, lower: int, upper: int, steps: int) -> str:
    return (
        f"the number of region arguments ({ivs}) and the number of map groups for "
        f"lower ({lower}) and upper bound ({upper}), and the number of steps "
        f"({steps}) must all match"
    )


"""Every reduction MLIR's syntax names (the verifier checks which fits a type)."""

_FLOAT_REDUCTIONS = {"addf", "mulf", "maximumf", "maxnumf", "minimumf", "minnumf"}
_INTEGER_REDUCTIONS = {"addi", "muli", "maxs", "maxu", "mins", "minu", "andi", "ori"}


def reduction_fits(kind: str, t: Attribute) -> bool:
    """Whether an `affine.parallel` may reduce values of type `t` with `kind`
    (MLIR's rule: `assign` fits any type, `xori` none)."""
    if kind == "assign":
        return True
    if isinstance(t, IndexType | IntegerType):
        return kind in _INTEGER_REDUCTIONS
    return kind in _FLOAT_REDUCTIONS


def _parse_bound_list(
    parser: Parser, keyword: str
) -> tuple[AffineMap, list[int], list[SSAValue]]:
    """`(0, max(%a, 2), symbol(%n))`: one bound, or a `max`/`min` group, per dimension."""
    space = SSAOperandSpace()
    results: list[AffineExpr] = []
    groups: list[int] = []

    def parse_bound() -> None:
        if parser.parse_optional_keyword(keyword) is not None:
            group = parse_ssa_expr_list(parser, space, Parser.Delimiter.PAREN)
        else:
            group = [parse_ssa_expr(parser, space)]
        results.extend(group)
        groups.append(len(group))

    parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_bound)
    return space.map(results), groups, space.operands(parser)


def _print_bound_list(
    printer: Printer,
    m: AffineMap,
    groups: Sequence[int],
    operands: Sequence[SSAValue],
    keyword: str,
) -> None:
    printer.print_string("(")
    k = 0
    for g, size in enumerate(groups):
        if g:
            printer.print_string(", ")
        if size != 1:
            printer.print_string(f"{keyword}(")
        for j in range(size):
            if j:
                printer.print_string(", ")
            write_ssa_expr(
                m.results[k + j],
                printer.print_string,
                printer.print_ssa_value,
                operands,
                m.num_dims,
            )
        if size != 1:
            printer.print_string(")")
        k += size
    printer.print_string(")")


def _groups_attr(groups: Sequence[int]) -> DenseIntElementsAttr:
    return _groups_attr_of(tuple(groups))


# Bands are rebuilt many times a compile from a few groupings and steps: their
# attributes (immutable) made once each, not once a band (a tenth of a band's build).
@lru_cache(maxsize=1024)
def _groups_attr_of(groups: tuple[int, ...]) -> DenseIntElementsAttr:
    return DenseIntElementsAttr.from_list(TensorType(i32, [len(groups)]), list(groups))


@lru_cache(maxsize=1024)
def _i64(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@irdl_op_definition
class ParallelOp(IRDLOperation):
    """A band of parallel loops: `affine.parallel (%i, %j) = (0, 0) to (8, %n) {...}`.

    Each dimension's lower bound is the max of its group of lower-bound results, its
    upper bound the min of its group of upper-bound results. With `reduce`, the body
    yields one value per reduction and the op returns their combination.
    """

    name = "affine.parallel"

    map_operands = var_operand_def(IndexType)
    reductions = prop_def(ArrayAttr[IntegerAttr])
    lowerBoundsMap = prop_def(AffineMapAttr)
    lowerBoundsGroups = prop_def(DenseIntElementsAttr)
    upperBoundsMap = prop_def(AffineMapAttr)
    upperBoundsGroups = prop_def(DenseIntElementsAttr)
    steps = prop_def(ArrayAttr[IntegerAttr[IntegerType]])
    res = var_result_def()

    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        lower: AffineMap,
        lower_groups: Sequence[int],
        upper: AffineMap,
        upper_groups: Sequence[int],
        body: Region | Block,
        *,
        lower_operands: Sequence[SSAValue] = (),
        upper_operands: Sequence[SSAValue] = (),
        steps: Sequence[int] | None = None,
        reductions: Sequence[str] = (),
        result_types: Sequence[Attribute] = (),
    ):
        if isinstance(body, Block):
            body = Region(body)
        if steps is None:
            steps = [1] * len(lower_groups)
        super().__init__(
            operands=[[*lower_operands, *upper_operands]],
            result_types=[result_types],
            properties={
                "reductions": ArrayAttr([_i64(REDUCTION_ENUM[r]) for r in reductions]),
                "lowerBoundsMap": AffineMapAttr(lower),
                "lowerBoundsGroups": _groups_attr(lower_groups),
                "upperBoundsMap": AffineMapAttr(upper),
                "upperBoundsGroups": _groups_attr(upper_groups),
                "steps": ArrayAttr([_i64(s) for s in steps]),
            },
            regions=[body],
        )

    @staticmethod
    def from_extents(
        extents: Sequence[int], body: Region | Block, **kwargs: object
    ) -> ParallelOp:
        """The simple band `(0, ..., 0) to (e0, ..., en)`."""
        n = len(extents)
        return ParallelOp(
            AffineMap(0, 0, tuple(AffineExpr.constant(0) for _ in extents)),
            [1] * n,
            AffineMap(0, 0, tuple(AffineExpr.constant(e) for e in extents)),
            [1] * n,
            body,
            **kwargs,  # pyright: ignore[reportArgumentType]
        )

    @property
    def induction_variables(self) -> Sequence[SSAValue]:
        return self.body.block.args

    @property
    def lower_bound_operands(self) -> Sequence[SSAValue]:
        m = self.lowerBoundsMap.data
        return self.map_operands[: m.num_dims + m.num_symbols]

    @property
    def upper_bound_operands(self) -> Sequence[SSAValue]:
        m = self.lowerBoundsMap.data
        return self.map_operands[m.num_dims + m.num_symbols :]

    @property
    def lower_groups(self) -> list[int]:
        return list(self.lowerBoundsGroups.get_values())

    @property
    def upper_groups(self) -> list[int]:
        return list(self.upperBoundsGroups.get_values())

    @property
    def step_values(self) -> list[int]:
        return [s.value.data for s in self.steps.data]

    @property
    def reduction_kinds(self) -> list[str]:
        """The reductions by name (`"addf"`, ...); "?" for a number MLIR lacks."""
        return [REDUCTION_NAMES.get(r.value.data, "?") for r in self.reductions.data]

    def verify_(self) -> None:
        lower, upper = self.lowerBoundsMap.data, self.upperBoundsMap.data
        verify_divisors((*lower.results, *upper.results))
        num_lower = lower.num_dims + lower.num_symbols
        num_upper = upper.num_dims + upper.num_symbols
        if len(self.map_operands) != num_lower + num_upper:
            raise VerifyException(
                f"bound maps take {num_lower + num_upper} operands, "
                f"got {len(self.map_operands)}"
            )
        verify_dims_and_symbols(self, self.lower_bound_operands, lower.num_dims)
        verify_dims_and_symbols(self, self.upper_bound_operands, upper.num_dims)
        n = len(self.body.block.args)
        counts = (n, len(self.lower_groups), len(self.upper_groups), len(self.steps))
        if len(set(counts)) != 1:
            raise VerifyException(_count_mismatch(*counts))
        for what, groups, m in (
            ("lower", self.lower_groups, lower),
            ("upper", self.upper_groups, upper),
        ):
            if any(g == 0 for g in groups):
                raise VerifyException(
                    f"expected {what} bound map to have at least one result"
                )
            if any(g < 0 for g in groups) or sum(groups) != len(m.results):
                raise VerifyException(
                    f"{what} bound groups {groups} do not cover "
                    f"the {len(m.results)} results of its {what} bounds map"
                )
        if any(s <= 0 for s in self.step_values):
            raise VerifyException(f"steps must be positive, got {self.step_values}")
        if any(not isinstance(t, IndexType) for t in self.body.block.arg_types):
            raise VerifyException("induction variables must be of index type")
        if len(self.reductions) != len(self.res):
            raise VerifyException("a reduction must be specified for each output")
        for r, kind, t in zip(
            self.reductions.data, self.reduction_kinds, self.result_types, strict=True
        ):
            if kind == "?":
                raise VerifyException(
                    f"reduction {r.value.data} is not one of MLIR's (0 to 15)"
                )
            if not reduction_fits(kind, t):
                raise VerifyException("result type cannot match reduction attribute")
        verify_yield(self, self.body, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> ParallelOp:
        start = parser.pos
        ivs = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_punctuation("=")
        lower, lower_groups, lower_operands = _parse_bound_list(parser, "max")
        parser.parse_keyword("to")
        upper, upper_groups, upper_operands = _parse_bound_list(parser, "min")
        steps = [1] * len(ivs)
        if parser.parse_optional_keyword("step") is not None:
            pos = parser.pos
            steps = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN,
                lambda: parse_index_literal(parser, "constant too large for index"),
            )
            if any(s <= 0 for s in steps):
                parser.raise_error(
                    "expected step to be representable as a positive signed integer",
                    pos,
                )
        counts = (len(ivs), len(lower_groups), len(upper_groups), len(steps))
        if len(set(counts)) != 1:
            parser.raise_error(_count_mismatch(*counts), start)
        reductions: list[str] = []
        result_types: list[Attribute] = []
        if parser.parse_optional_keyword("reduce") is not None:
            pos = parser.pos
            reductions = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_str_literal
            )
            for r in reductions:
                if r not in REDUCTION_KINDS:
                    parser.raise_error(
                        f'invalid reduction value: "{r}" (expected one of '
                        f"{', '.join(REDUCTION_KINDS)})",
                        pos,
                    )
            parser.parse_punctuation("->")
            result_types = parse_type_list(parser)
        elif parser.parse_optional_punctuation("->") is not None:
            result_types = parse_type_list(parser)  # the verifier wants reductions
        body = parser.parse_region([iv.resolve(IndexType()) for iv in ivs])
        ensure_yield(body.block)
        op = cls(
            lower,
            lower_groups,
            upper,
            upper_groups,
            body,
            lower_operands=lower_operands,
            upper_operands=upper_operands,
            steps=steps,
            reductions=reductions,
            result_types=result_types,
        )
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer):
        printer.print_string(" (")
        printer.print_list(self.induction_variables, printer.print_ssa_value)
        printer.print_string(") = ")
        _print_bound_list(
            printer,
            self.lowerBoundsMap.data,
            self.lower_groups,
            self.lower_bound_operands,
            "max",
        )
        printer.print_string(" to ")
        _print_bound_list(
            printer,
            self.upperBoundsMap.data,
            self.upper_groups,
            self.upper_bound_operands,
            "min",
        )
        if any(s != 1 for s in self.step_values):
            printer.print_string(f" step ({', '.join(map(str, self.step_values))})")
        if self.res:
            reductions = ", ".join(f'"{r}"' for r in self.reduction_kinds)
            printer.print_string(f" reduce ({reductions}) -> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.body,
            print_entry_block_args=False,
            print_block_terminators=bool(self.res),
        )
        printer.print_op_attributes(self.attributes)
