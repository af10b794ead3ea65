"""The math dialect's `math.fma`: one rounding, exactly as the GPU rounds it."""

from __future__ import annotations

from xdsl.dialects import math

from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.support import fused_multiply_add


@emits(math.FmaOp)
def _fma(op: math.FmaOp, w: FunctionWriter) -> None:
    a, b, c = w.names(op.operands)
    fn = w.global_(fused_multiply_add, "fma")
    w.line(f"{w.define(op.result)} = {fn}({a}, {b}, {c})")
