"""xDSL's arith dialect with MLIR's checks that xDSL's verifiers lack: of the float
casts (`arith.extf` widens and `arith.truncf` narrows, element by element of the
same shape) and of the comparisons' predicates (one of MLIR's cases).

    %h = arith.extf %x : f32 to f16                        // refused
    %w = arith.truncf %v : vector<2xf16> to vector<4xf32>  // refused

Without them such a module verified and each level read the op its own way (the
interpreter by the result type, LLVM's `fpext` not at all). `Arith` is xDSL's
dialect; affinec's context registers it from here, and with it the checks
(`OP_CHECKS`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from xdsl.dialects import arith as xdsl_arith
from xdsl.dialects.builtin import ShapedType
from xdsl.ir import Attribute, Dialect, Operation

from affinec.base.diagnostics import OP_CHECKS


def _float_cast(wider: Callable[[int, int], bool]) -> Callable[[Operation], str | None]:
    """MLIR's check of a float cast: the same shape (both scalars, or shaped
    alike), and a result width `wider(result's, operand's)` says it may have."""

    def check(op: Operation) -> str | None:
        source, result = op.operands[0].type, op.results[0].type
        if _shape(source) != _shape(result):
            return "requires the same shape for all operands and results"
        widths = _width(result), _width(source)
        if None not in widths and not wider(*widths):
            return (
                f"operand type '{source}' and result type '{result}' are cast "
                "incompatible"
            )
        return None

    return check


def _shape(t: Attribute) -> tuple[int, ...] | None:
    return tuple(t.get_shape()) if isinstance(t, ShapedType) else None


def _width(t: Attribute) -> int | None:
    element = t.get_element_type() if isinstance(t, ShapedType) else t
    width = getattr(element, "bitwidth", None)
    return width if isinstance(width, int) else None


def comparison_predicate(
    cases: int, words: str | None = None
) -> Callable[[Operation], str | None]:
    """MLIR's check of a comparison's predicate, one of `cases` (xDSL's verifiers
    take any integer, and its printer and the interpreter then fail on it);
    `words` say what the predicate is (by default, arith's: the allowed cases)."""
    allowed = words or (
        f"allowed 64-bit signless integer cases: {', '.join(map(str, range(cases)))}"
    )

    def check(op: Operation) -> str | None:
        if 0 <= op.properties["predicate"].value.data < cases:  # pyright: ignore
            return None
        return f"attribute 'predicate' failed to satisfy constraint: {allowed}"

    return check


OP_CHECKS[xdsl_arith.CmpiOp] = comparison_predicate(10)
OP_CHECKS[xdsl_arith.CmpfOp] = comparison_predicate(16)
OP_CHECKS[xdsl_arith.ExtFOp] = _float_cast(operator.gt)
OP_CHECKS[xdsl_arith.TruncFOp] = _float_cast(operator.lt)

Arith: Dialect = xdsl_arith.Arith
"""xDSL's arith dialect itself (with its interfaces: folding materializes
constants through it); importing it from here registers the checks."""
