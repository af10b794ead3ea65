"""arith ops as Python expressions, with the semantics of `scalars` (shared with the
llvm dialect): floats are numpy scalars of the op's type, integers Python ints wrapped
to their width (index as 64 bits), `i1` values Python bools.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    VectorType,
)
from xdsl.ir import Operation

from affinec.interpreter import scalars
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.support import (
    CMPF_PREDICATES,
    CMPI_PREDICATES,
    LANEWISE,
    InterpreterError,
    maximumf,
    maxnumf,
    minimumf,
    minnumf,
    numpy_dtype,
)


@emits(arith.ConstantOp)
def _constant(op: arith.ConstantOp, w: FunctionWriter) -> None:
    value = op.value
    match value:
        case FloatAttr():
            dtype = numpy_dtype(value.type)
            w.alias(op.result, w.global_(dtype.type(value.value.data), "cst"))
        case IntegerAttr():
            w.alias(op.result, scalars.int_constant(value.value.data, value.type))
        case DenseIntOrFPElementsAttr():
            shape = tuple(value.get_shape() or ())
            dtype = numpy_dtype(value.get_element_type())
            array = np.array(value.get_values(), dtype).reshape(shape)
            array.flags.writeable = False
            w.alias(op.result, w.global_(array, "cst"))
        case _:
            raise InterpreterError(f"unsupported constant {value}", op)


_FLOAT_INFIX = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
}


@emits(*_FLOAT_INFIX)
def _float_infix(op: arith.FloatingPointLikeBinaryOperation, w: FunctionWriter):
    symbol = _FLOAT_INFIX[type(op)]  # pyright: ignore[reportArgumentType]
    scalars.emit_float_binary(w, symbol, op.result, op.lhs, op.rhs)


_FLOAT_HELPERS = {
    arith.MaximumfOp: maximumf,
    arith.MinimumfOp: minimumf,
    arith.MaxnumfOp: maxnumf,
    arith.MinnumfOp: minnumf,
}


@emits(*_FLOAT_HELPERS)
def _float_helper(op: arith.FloatingPointLikeBinaryOperation, w: FunctionWriter):
    fn = _FLOAT_HELPERS[type(op)]  # pyright: ignore[reportArgumentType]
    if isinstance(op.result.type, VectorType):
        fn = LANEWISE[fn]
    helper = w.global_(fn, fn.__name__)
    w.line(f"{w.define(op.result)} = {helper}({w[op.lhs]}, {w[op.rhs]})")


@emits(arith.NegfOp)
def _negf(op: arith.NegfOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.result)} = -{w[op.operand]}")


@emits(arith.ExtFOp, arith.TruncFOp)
def _float_convert(op: arith.ExtFOp | arith.TruncFOp, w: FunctionWriter) -> None:
    scalars.emit_float_cast(w, op.result, op.input)


@emits(arith.CmpfOp)
def _cmpf(op: arith.CmpfOp, w: FunctionWriter) -> None:
    predicate = CMPF_PREDICATES[op.predicate.value.data]
    scalars.emit_fcmp(w, predicate, op.result, op.lhs, op.rhs)


@emits(arith.SelectOp)
def _select(op: arith.SelectOp, w: FunctionWriter) -> None:
    scalars.emit_select(w, op.result, op.cond, op.lhs, op.rhs)


INT_BINARY_OPS = {
    arith.AddiOp: "add",
    arith.SubiOp: "sub",
    arith.MuliOp: "mul",
    arith.AndIOp: "and",
    arith.OrIOp: "or",
    arith.XOrIOp: "xor",
    arith.ShLIOp: "shl",
    arith.ShRSIOp: "shrs",
    arith.ShRUIOp: "shru",
    arith.DivSIOp: "divs",
    arith.RemSIOp: "rems",
    arith.FloorDivSIOp: "floordivs",
    arith.CeilDivSIOp: "ceildivs",
    arith.DivUIOp: "divu",
    arith.RemUIOp: "remu",
    arith.CeilDivUIOp: "ceildivu",
    arith.MinSIOp: "mins",
    arith.MaxSIOp: "maxs",
    arith.MaxUIOp: "maxu",
    arith.MinUIOp: "minu",
}
"""arith's integer operations by their `scalars.INT_BINARY` name."""


@emits(*INT_BINARY_OPS)
def _int_binary(op: Operation, w: FunctionWriter) -> None:
    kind = INT_BINARY_OPS[type(op)]  # pyright: ignore[reportArgumentType]
    scalars.emit_int_binary(w, kind, op.results[0], *op.operands)


@emits(arith.CmpiOp)
def _cmpi(op: arith.CmpiOp, w: FunctionWriter) -> None:
    predicate = CMPI_PREDICATES[op.predicate.value.data]
    scalars.emit_icmp(w, predicate, op.result, op.lhs, op.rhs)


@emits(arith.IndexCastOp, arith.ExtSIOp, arith.TruncIOp)
def _sign_preserving(op: Operation, w: FunctionWriter) -> None:
    scalars.emit_int_cast(w, op.results[0], op.operands[0], signed=True)


@emits(arith.ExtUIOp)
def _extui(op: arith.ExtUIOp, w: FunctionWriter) -> None:
    scalars.emit_int_cast(w, op.result, op.input, signed=False)


@emits(arith.SIToFPOp, arith.UIToFPOp)
def _int_to_float(op: arith.SIToFPOp | arith.UIToFPOp, w: FunctionWriter) -> None:
    signed = isinstance(op, arith.SIToFPOp)
    scalars.emit_int_to_float(w, op.result, op.input, signed)


@emits(arith.FPToSIOp, arith.FPToUIOp)
def _float_to_int(op: arith.FPToSIOp | arith.FPToUIOp, w: FunctionWriter) -> None:
    signed = isinstance(op, arith.FPToSIOp)
    scalars.emit_float_to_int(w, op.result, op.input, signed)
