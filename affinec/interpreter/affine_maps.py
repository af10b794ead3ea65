"""How affine maps, loop bounds and integer sets become Python text: what the
interpreter's emitters of affine ops, of vectorized bands (`lanes`) and of
lockstep blocks share."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineMap

from affinec.dialects import affine
from affinec.interpreter.codegen import FunctionWriter
from affinec.ir import ranges
from affinec.ir.affine_exprs import Interval, constraints_to_python, to_python


def map_results(
    w: FunctionWriter, m: AffineMap, operands: Sequence[SSAValue]
) -> list[str]:
    """Python expressions of the results of `m` applied to `operands`."""
    names = w.names(operands)
    dims, syms = names[: m.num_dims], names[m.num_dims :]
    return [to_python(e, dims, syms) for e in m.results]


def map_ranges(
    w: FunctionWriter, m: AffineMap, operands: Sequence[SSAValue]
) -> list[Interval | None]:
    """What the loop bounds around it prove about each result of `m`."""
    return ranges.map_ranges(m, operands, w.ranges)


def bound(
    w: FunctionWriter, m: AffineMap, operands: Sequence[SSAValue], fold: str
) -> str:
    """A loop bound: the one result of `m`, or `fold` (max, min) of its results."""
    exprs = map_results(w, m, operands)
    return exprs[0] if len(exprs) == 1 else f"{fold}({', '.join(exprs)})"


def for_bounds(op: affine.ForOp, w: FunctionWriter) -> str:
    """The `range` arguments of an `affine.for`: lower, upper and step if not 1."""
    lower = bound(w, op.lowerBoundMap.data, op.lowerBoundOperands, "max")
    upper = bound(w, op.upperBoundMap.data, op.upperBoundOperands, "min")
    step = op.step.value.data
    return f"{lower}, {upper}" + (f", {step}" if step != 1 else "")


def folded(exprs: list[str], fold: str) -> str:
    """`fold` (max, min) of `exprs`, or the one expression."""
    return exprs[0] if len(exprs) == 1 else f"{fold}({', '.join(exprs)})"


def if_condition(op: affine.IfOp, w: FunctionWriter, lanes: bool = False) -> str:
    """The Python condition of an `affine.if`'s integer set (with `lanes`, of
    arrays over lanes: each test in parentheses, joined by `&`)."""
    s = op.condition.data
    names = w.names(op.args)
    dims, syms = names[: s.num_dims], names[s.num_dims :]
    tests = constraints_to_python(s, dims, syms)
    if lanes:
        return " & ".join(f"({t})" for t in tests) or "True"
    return " and ".join(tests) or "True"


__all__ = ["bound", "folded", "for_bounds", "if_condition", "map_ranges", "map_results"]
