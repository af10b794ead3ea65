"""arith ops as Python expressions.

Floats are numpy scalars of the op's type, so `a + b` of two float32 values rounds to
float32 exactly as the GPU does, and float16 and bf16 values round to their own type
(a float64 to bf16 once, `float_converter`). Integers are Python ints: `index`
values unbounded (they never come near 2**63 here), fixed-width `iN` values wrapped
to N bits after each op, `i1` values Python bools.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.ir import Attribute, Operation

from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.support import (
    CMPF,
    CMPF_PREDICATES,
    CMPI_PREDICATES,
    InterpreterError,
    describe,
    float_converter,
    maximumf,
    maxnumf,
    minimumf,
    minnumf,
    numpy_dtype,
    unsigned,
    wrap,
)


def _bits(t: Attribute) -> int | None:
    """The width of a fixed-width integer type; None for index (unbounded here)."""
    if isinstance(t, IndexType):
        return None
    if isinstance(t, IntegerType):
        return t.width.data
    raise InterpreterError(f"expected an integer or index type, got {t}")


def _wrapped(w: FunctionWriter, expr: str, t: Attribute) -> str:
    bits = _bits(t)
    if bits is None or bits == 1:
        return expr
    return f"{w.global_(wrap, 'wrap')}({expr}, {bits})"


@emits(arith.ConstantOp)
def _constant(op: arith.ConstantOp, w: FunctionWriter) -> None:
    value = op.value
    match value:
        case FloatAttr():
            dtype = numpy_dtype(value.type)
            w.alias(op.result, w.global_(dtype.type(value.value.data), "cst"))
        case IntegerAttr():
            v = value.value.data
            if isinstance(value.type, IntegerType) and value.type.width.data == 1:
                w.alias(op.result, repr(bool(v)))
            else:
                w.alias(op.result, f"({v})")
        case DenseIntOrFPElementsAttr():
            shape = tuple(value.get_shape() or ())
            dtype = numpy_dtype(value.get_element_type())
            array = np.array(value.get_values(), dtype).reshape(shape)
            array.flags.writeable = False
            w.alias(op.result, w.global_(array, "cst"))
        case _:
            raise InterpreterError(f"{describe(op)}: unsupported constant {value}")


_FLOAT_INFIX = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
}


@emits(*_FLOAT_INFIX)
def _float_infix(op: arith.FloatingPointLikeBinaryOperation, w: FunctionWriter):
    symbol = _FLOAT_INFIX[type(op)]  # pyright: ignore[reportArgumentType]
    w.line(f"{w.define(op.result)} = {w[op.lhs]} {symbol} {w[op.rhs]}")


_FLOAT_HELPERS = {
    arith.MaximumfOp: maximumf,
    arith.MinimumfOp: minimumf,
    arith.MaxnumfOp: maxnumf,
    arith.MinnumfOp: minnumf,
}


@emits(*_FLOAT_HELPERS)
def _float_helper(op: arith.FloatingPointLikeBinaryOperation, w: FunctionWriter):
    fn = _FLOAT_HELPERS[type(op)]  # pyright: ignore[reportArgumentType]
    helper = w.global_(fn, fn.__name__)
    w.line(f"{w.define(op.result)} = {helper}({w[op.lhs]}, {w[op.rhs]})")


@emits(arith.NegfOp)
def _negf(op: arith.NegfOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.result)} = -{w[op.operand]}")


@emits(arith.ExtFOp, arith.TruncFOp)
def _float_convert(op: arith.ExtFOp | arith.TruncFOp, w: FunctionWriter) -> None:
    # A numpy scalar type converts a vector (an array) element by element too.
    to = w.global_(
        float_converter(_element(op.input.type), _element(op.result.type)), "to"
    )
    w.line(f"{w.define(op.result)} = {to}({w[op.input]})")


def _element(t: Attribute) -> Attribute:
    return t.get_element_type() if isinstance(t, VectorType) else t


@emits(arith.CmpfOp)
def _cmpf(op: arith.CmpfOp, w: FunctionWriter) -> None:
    name = CMPF_PREDICATES[op.predicate.value.data]
    test = w.global_(CMPF[name], f"cmpf_{name}")
    w.line(f"{w.define(op.result)} = {test}({w[op.lhs]}, {w[op.rhs]})")


@emits(arith.SelectOp)
def _select(op: arith.SelectOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.result)} = {w[op.lhs]} if {w[op.cond]} else {w[op.rhs]}")


_INT_INFIX = {
    arith.AddiOp: "+",
    arith.SubiOp: "-",
    arith.MuliOp: "*",
    arith.AndIOp: "&",
    arith.OrIOp: "|",
    arith.XOrIOp: "^",
    arith.ShLIOp: "<<",
    arith.ShRSIOp: ">>",
    arith.FloorDivSIOp: "//",
}


@emits(*_INT_INFIX)
def _int_infix(op: Operation, w: FunctionWriter) -> None:
    symbol = _INT_INFIX[type(op)]  # pyright: ignore[reportArgumentType]
    lhs, rhs = w.names(op.operands)
    result = op.results[0]
    w.line(f"{w.define(result)} = {_wrapped(w, f'{lhs} {symbol} {rhs}', result.type)}")


def _divsi(a: int, b: int) -> int:
    """C division: the quotient rounded toward zero."""
    if b == 0:
        raise InterpreterError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _remsi(a: int, b: int) -> int:
    return a - b * _divsi(a, b)


def _ceildivsi(a: int, b: int) -> int:
    if b == 0:
        raise InterpreterError("integer division by zero")
    return -(-a // b)


_INT_CALLS = {
    arith.DivSIOp: _divsi,
    arith.RemSIOp: _remsi,
    arith.CeilDivSIOp: _ceildivsi,
    arith.MinSIOp: min,
    arith.MaxSIOp: max,
}


@emits(*_INT_CALLS)
def _int_call(op: Operation, w: FunctionWriter) -> None:
    fn = _INT_CALLS[type(op)]  # pyright: ignore[reportArgumentType]
    lhs, rhs = w.names(op.operands)
    result = op.results[0]
    w.line(f"{w.define(result)} = {w.global_(fn, fn.__name__)}({lhs}, {rhs})")


_UNSIGNED = {
    arith.DivUIOp: "//",
    arith.RemUIOp: "%",
    arith.ShRUIOp: ">>",
}


@emits(*_UNSIGNED)
def _unsigned(op: Operation, w: FunctionWriter) -> None:
    result = op.results[0]
    bits = _bits(result.type) or 64
    u = w.global_(unsigned, "unsigned")
    lhs, rhs = (f"{u}({name}, {bits})" for name in w.names(op.operands))
    w.line(
        f"{w.define(result)} = {_wrapped(w, f'{lhs} {_UNSIGNED[type(op)]} {rhs}', result.type)}"  # pyright: ignore[reportArgumentType]
    )


_CMPI = {
    "eq": "==",
    "ne": "!=",
    "slt": "<",
    "sle": "<=",
    "sgt": ">",
    "sge": ">=",
    "ult": "<",
    "ule": "<=",
    "ugt": ">",
    "uge": ">=",
}


@emits(arith.CmpiOp)
def _cmpi(op: arith.CmpiOp, w: FunctionWriter) -> None:
    name = CMPI_PREDICATES[op.predicate.value.data]
    lhs, rhs = w[op.lhs], w[op.rhs]
    if name.startswith("u"):
        bits = _bits(op.lhs.type) or 64
        u = w.global_(unsigned, "unsigned")
        lhs, rhs = f"{u}({lhs}, {bits})", f"{u}({rhs}, {bits})"
    w.line(f"{w.define(op.result)} = {lhs} {_CMPI[name]} {rhs}")


@emits(arith.IndexCastOp, arith.ExtSIOp)
def _sign_preserving(op: Operation, w: FunctionWriter) -> None:
    (value,) = w.names(op.operands)
    result = op.results[0]
    w.line(f"{w.define(result)} = {_wrapped(w, value, result.type)}")


@emits(arith.ExtUIOp)
def _extui(op: arith.ExtUIOp, w: FunctionWriter) -> None:
    bits = _bits(op.input.type) or 64
    value = f"{w.global_(unsigned, 'unsigned')}({w[op.input]}, {bits})"
    if bits == 1:
        value = f"int({w[op.input]})"
    w.line(f"{w.define(op.result)} = {_wrapped(w, value, op.result.type)}")


@emits(arith.TruncIOp)
def _trunci(op: arith.TruncIOp, w: FunctionWriter) -> None:
    bits = _bits(op.result.type)
    if bits == 1:
        w.line(f"{w.define(op.result)} = bool({w[op.input]} & 1)")
    else:
        w.line(f"{w.define(op.result)} = {_wrapped(w, w[op.input], op.result.type)}")


@emits(arith.SIToFPOp, arith.UIToFPOp)
def _int_to_float(op: arith.SIToFPOp | arith.UIToFPOp, w: FunctionWriter) -> None:
    to = w.global_(numpy_dtype(op.result.type).type, "to")
    value = w[op.input]
    if isinstance(op, arith.UIToFPOp):
        value = (
            f"{w.global_(unsigned, 'unsigned')}({value}, {_bits(op.input.type) or 64})"
        )
    w.line(f"{w.define(op.result)} = {to}({value})")


@emits(arith.FPToSIOp, arith.FPToUIOp)
def _float_to_int(op: arith.FPToSIOp | arith.FPToUIOp, w: FunctionWriter) -> None:
    w.line(
        f"{w.define(op.result)} = {_wrapped(w, f'int({w[op.input]})', op.result.type)}"
    )
