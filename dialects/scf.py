"""xDSL's scf dialect, reading the result types of `scf.for` and `scf.if` as MLIR
does: after `->`, a parenthesized list or one type alone.

    %r = scf.for %i = %lb to %ub step %s iter_args(%a = %x) -> f32 { ... }
    %q = scf.if %c -> f32 { ... } else { ... }

xDSL's parsers take only the parenthesized form (`-> (f32)`, which is also what
both print). `Scf` is xDSL's dialect with these two ops' parsers replaced; the ops
are xDSL's classes otherwise (subclasses, so every pass and the interpreter treat
them as xDSL's), and affinec's context registers it. Also MLIR's check that an
`scf.if` with results has an else region (`OP_CHECKS`), which xDSL's verifier
lacks.
"""

from __future__ import annotations

from typing import Self

from xdsl.dialects import scf as xdsl_scf
from xdsl.dialects.builtin import IndexType, i1
from xdsl.dialects.utils import parse_assignment
from xdsl.ir import Dialect, Operation, Region
from xdsl.parser import Parser
from xdsl.traits import SingleBlockImplicitTerminator, ensure_terminator

from affinec.base.diagnostics import OP_CHECKS
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


def _else_for_results(op: Operation) -> str | None:
    """MLIR's check that xDSL's verifier lacks: an `scf.if` with results has an
    else region (without one, the results of a false condition are undefined)."""
    assert isinstance(op, xdsl_scf.IfOp)
    if op.results and not op.false_region.blocks:
        return "must have an else block if defining values"
    return None


OP_CHECKS[xdsl_scf.IfOp] = OP_CHECKS[IfOp] = _else_for_results

_OURS = {xdsl_scf.ForOp: ForOp, xdsl_scf.IfOp: IfOp}

Scf = Dialect(
    "scf",
    [_OURS.get(op, op) for op in xdsl_scf.Scf.operations],
    list(xdsl_scf.Scf.attributes),
)
"""xDSL's scf dialect with MLIR's result-type forms for `scf.for` and `scf.if`."""
