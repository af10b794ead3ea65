"""xDSL's scf dialect, reading the result types of `scf.for` and `scf.if` as MLIR
does: after `->`, a parenthesized list or one type alone.

    %r = scf.for %i = %lb to %ub step %s iter_args(%a = %x) -> f32 { ... }
    %q = scf.if %c -> f32 { ... } else { ... }

xDSL's parsers take only the parenthesized form (`-> (f32)`, which is also what
both print). `Scf` is xDSL's dialect with these two ops' parsers replaced; the ops
are xDSL's classes otherwise (subclasses, so every pass and the interpreter treat
them as xDSL's), and affinec's context registers it. Also MLIR's checks that
xDSL's verifiers lack (`OP_CHECKS`): an `scf.if` with results has an else region,
and the values each region passes on (`scf.yield`, `scf.condition`) are as many,
and of the types, as where they go takes (MLIR's `RegionBranchOpInterface`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Self

from xdsl.dialects import scf as xdsl_scf
from xdsl.dialects.builtin import IndexType, i1
from xdsl.dialects.utils import parse_assignment
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.traits import SingleBlockImplicitTerminator, ensure_terminator

from affinec.base.diagnostics import OP_CHECKS, VerificationError
from affinec.dialects.affine_syntax import parse_type_list


class ForOp(xdsl_scf.ForOp):
    """`scf.for`, its carried values' types in MLIR's forms."""

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        variable = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        bounds = [parser.parse_unresolved_operand()]
        for keyword in ("to", "step"):
            parser.parse_keyword(keyword)
            bounds.append(parser.parse_unresolved_operand())
        start = parser.pos
        carried, inits, types = [], [], []
        if parser.parse_optional_keyword("iter_args"):
            pairs = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, lambda: parse_assignment(parser)
            )
            carried = [argument for argument, _ in pairs]
            inits = [operand for _, operand in pairs]
            parser.parse_punctuation("->")
            types = parse_type_list(parser)
        init_values = parser.resolve_operands(inits, types, start)
        arguments = [a.resolve(t) for a, t in zip(carried, types, strict=True)]
        index = parser.parse_type() if parser.parse_optional_punctuation(":") else None
        index = index or IndexType()
        lb, ub, step = (parser.resolve_operand(b, index) for b in bounds)
        body = parser.parse_region((variable.resolve(index), *arguments))
        attributes = parser.parse_optional_attr_dict()
        op = cls(lb, ub, step, init_values, body)
        op.attributes |= attributes
        if not arguments:
            for trait in op.get_traits_of_type(SingleBlockImplicitTerminator):
                ensure_terminator(op, trait)
        return op


class IfOp(xdsl_scf.IfOp):
    """`scf.if`, its result types in MLIR's forms."""

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        condition = parser.parse_operand(i1)
        types = (
            parse_type_list(parser) if parser.parse_optional_punctuation("->") else []
        )
        then_region = cls.parse_region_with_yield(parser)
        else_region = (
            cls.parse_region_with_yield(parser)
            if parser.parse_optional_keyword("else")
            else Region()
        )
        return cls(
            condition,
            types,
            then_region,
            else_region,
            parser.parse_optional_attr_dict(),
        )


def _if_checks(op: Operation) -> str | None:
    """An `scf.if` with results has an else region (without one, the results of a
    false condition are undefined), and its regions yield the results."""
    assert isinstance(op, xdsl_scf.IfOp)
    if op.results and not op.false_region.blocks:
        return "must have an else block if defining values"
    return _control_flow_edges(op)


_Edge = tuple[str, Operation, Sequence[SSAValue], str, Sequence[Attribute]]
"""Where values flow: from (in MLIR's words), the op passing them, the values,
to (in MLIR's words), the types taken there."""


def _edges(op: Operation) -> Iterator[_Edge]:
    """The control flow edges of an scf op with regions, in MLIR's order: into
    the first region, then from each region's terminator."""
    results = op.result_types
    if isinstance(op, xdsl_scf.WhileOp):
        before, after = op.before_region.block, op.after_region.block
        before_types = [a.type for a in before.args]
        yield "parent", op, op.arguments, "Region #0", before_types
        condition = before.last_op
        if isinstance(condition, xdsl_scf.ConditionOp):
            where = "Operation scf.condition"
            yield where, condition, condition.args, "parent", results
            after_types = [a.type for a in after.args]
            yield where, condition, condition.args, "Region #1", after_types
        end = after.last_op
        if isinstance(end, xdsl_scf.YieldOp):
            yield "Operation scf.yield", end, end.operands, "Region #0", before_types
        return
    for region in op.regions:
        for block in region.blocks:
            end = block.last_op
            if isinstance(end, xdsl_scf.YieldOp):
                yield "Operation scf.yield", end, end.operands, "parent", results


def _control_flow_edges(op: Operation) -> None:
    """MLIR's check of each edge: as many values as the successor takes, each of
    its type; a `VerificationError` with a note at the op passing them."""
    for source, point, values, successor, types in _edges(op):
        if len(values) != len(types):
            problem = (
                f"region branch point has {len(values)} operands, but region "
                f"successor needs {len(types)} inputs"
            )
        else:
            problem = next(
                (
                    f"successor operand type #{k} '{v.type}' should match "
                    f"successor input type #{k} '{t}'"
                    for k, (v, t) in enumerate(zip(values, types, strict=True))
                    if v.type != t
                ),
                None,
            )
        if problem is not None:
            message = f"along control flow edge from {source} to {successor}: "
            note = (point, "region branch point")
            raise VerificationError(op, message + problem, (note,))


OP_CHECKS[xdsl_scf.IfOp] = OP_CHECKS[IfOp] = _if_checks
OP_CHECKS[xdsl_scf.ExecuteRegionOp] = _control_flow_edges
OP_CHECKS[xdsl_scf.WhileOp] = _control_flow_edges

_OURS = {xdsl_scf.ForOp: ForOp, xdsl_scf.IfOp: IfOp}

Scf = Dialect(
    "scf",
    [_OURS.get(op, op) for op in xdsl_scf.Scf.operations],
    list(xdsl_scf.Scf.attributes),
)
"""xDSL's scf dialect with MLIR's result-type forms for `scf.for` and `scf.if`."""
