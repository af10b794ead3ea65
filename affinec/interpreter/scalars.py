"""Scalar arithmetic, once, for every dialect that has it: `arith`, `llvm` (and the
`nvgpu` ops to come) register their op classes against the operations here.

Integers are Python ints in two's complement: an `iN` value is kept in
`[-2**(N-1), 2**(N-1))` by wrapping after every op that can leave it, an `index` value
is a 64-bit integer (the width of the index type on the GPUs we target), an `i1` value
is a Python bool. Unsigned operations reinterpret their operands (`x & (2**N - 1)`).
What LLVM calls undefined behaviour or poison — a division by zero, a shift by the
width or more, a float that does not fit the integer it is converted to — stops the
interpreter with an error rather than giving an arbitrary value: the interpreter's
job is to prove passes, and such a value is never one a pass may rely on.

Floats are numpy scalars of the op's type, so `a + b` of two float32 values rounds to
float32 exactly as the GPU does.

The emitters here write one line each: `emit_int_binary(w, "divs", result, a, b)`
defines `result` as the signed quotient of the values named `a` and `b`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import IndexType, IntegerType, VectorType
from xdsl.ir import Attribute, SSAValue

from affinec.interpreter.codegen import FunctionWriter
from affinec.interpreter.support import (
    CMPF,
    InterpreterError,
    float_converter,
    numpy_dtype,
)
from affinec.ir.ranges import value_range

INDEX_BITS = 64
"""The width of `index` values (wrapped like an i64)."""

MAX_BITS = 64
"""The widest integer type the interpreter takes: memory holds at most 64-bit
integers (numpy's), and a width of millions of bits would make every op crawl."""


def int_width(t: Attribute) -> int:
    """The width in bits of the integer or index type `t`."""
    if isinstance(t, IndexType):
        return INDEX_BITS
    if isinstance(t, IntegerType):
        width = t.width.data
        if not 1 <= width <= MAX_BITS:
            raise InterpreterError(
                f"the interpreter supports integers of 1 to {MAX_BITS} bits, not {t}"
            )
        return width
    raise InterpreterError(f"expected an integer or index type, got {t}")


def python_int(t: Attribute) -> str:
    """The Python type the values of integer or index type `t` are kept as (its
    name, for generated code): `bool` for i1, else `int`."""
    return "bool" if int_width(t) == 1 else "int"


# -- helpers the generated code calls -------------------------------------------------------


def wrap(value: int, bits: int) -> int:
    """`value` as a two's-complement signed integer of `bits` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def unsigned(value: int, bits: int) -> int:
    """The `bits`-bit pattern of `value`, read as an unsigned integer."""
    return value & ((1 << bits) - 1)


def _nonzero(divisor: int) -> int:
    if divisor == 0:
        raise InterpreterError("integer division by zero")
    return divisor


def divs(a: int, b: int) -> int:
    """C division: the quotient rounded toward zero."""
    q = abs(a) // abs(_nonzero(b))
    return q if (a < 0) == (b < 0) else -q


def rems(a: int, b: int) -> int:
    """The remainder of `divs`: it has the sign of the dividend."""
    return a - b * divs(a, b)


def floordivs(a: int, b: int) -> int:
    return a // _nonzero(b)


def ceildivs(a: int, b: int) -> int:
    return -(-a // _nonzero(b))


def divu(a: int, b: int, bits: int) -> int:
    return unsigned(a, bits) // _nonzero(unsigned(b, bits))


def remu(a: int, b: int, bits: int) -> int:
    return unsigned(a, bits) % _nonzero(unsigned(b, bits))


def ceildivu(a: int, b: int, bits: int) -> int:
    return -(-unsigned(a, bits) // _nonzero(unsigned(b, bits)))


def maxu(a: int, b: int, bits: int) -> int:
    return a if unsigned(a, bits) >= unsigned(b, bits) else b


def minu(a: int, b: int, bits: int) -> int:
    return a if unsigned(a, bits) <= unsigned(b, bits) else b


def _shift_amount(b: int, bits: int) -> int:
    """A shift amount, read as unsigned; poison (an error) from the width on."""
    amount = unsigned(b, bits)
    if amount >= bits:
        raise InterpreterError(f"shift by {amount} of an i{bits} value (poison)")
    return amount


def shl(a: int, b: int, bits: int) -> int:
    return wrap(a << _shift_amount(b, bits), bits)


def shrs(a: int, b: int, bits: int) -> int:
    return a >> _shift_amount(b, bits)


def shru(a: int, b: int, bits: int) -> int:
    return wrap(unsigned(a, bits) >> _shift_amount(b, bits), bits)


def float_to_int(value, bits: int, signed: bool) -> int:
    """`fptosi` / `fptoui`: the value rounded toward zero, which must fit."""
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    value = float(value)  # exact; Python compares it with any int exactly
    if value != value or not low - 1 < value < high:
        kind = "a signed" if signed else "an unsigned"
        raise InterpreterError(
            f"{value} does not fit {kind} i{bits} (the conversion is poison)"
        )
    return wrap(int(value), bits) if bits > 1 else bool(int(value) & 1)


# -- expressions ----------------------------------------------------------------------------


def wrapped(expr: str, bits: int) -> str:
    """Python source of `expr` wrapped to a signed `bits`-bit integer (inline: it is
    on the hot path of every index computation)."""
    if bits == 1:
        return f"bool(({expr}) & 1)"
    half = 1 << (bits - 1)
    return f"((({expr}) + {half}) & {2 * half - 1}) - {half}"


def unsigned_expr(name: str, bits: int) -> str:
    return f"({name} & {(1 << bits) - 1})"


def _infix(
    symbol: str, wrap_result: bool
) -> Callable[[FunctionWriter, str, str, int], str]:
    def expr(w: FunctionWriter, a: str, b: str, bits: int) -> str:
        text = f"{a} {symbol} {b}"
        return wrapped(text, bits) if wrap_result else f"({text})"

    return expr


def _call(fn: Callable, with_bits: bool, wrap_result: bool):
    def expr(w: FunctionWriter, a: str, b: str, bits: int) -> str:
        args = f"{a}, {b}, {bits}" if with_bits else f"{a}, {b}"
        text = f"{w.global_(fn, fn.__name__)}({args})"
        return wrapped(text, bits) if wrap_result else text

    return expr


INT_BINARY: dict[str, Callable[[FunctionWriter, str, str, int], str]] = {
    "add": _infix("+", True),
    "sub": _infix("-", True),
    "mul": _infix("*", True),
    # Bitwise ops of two values in range stay in range (bools stay bools).
    "and": _infix("&", False),
    "or": _infix("|", False),
    "xor": _infix("^", False),
    "shl": _call(shl, True, False),
    "shrs": _call(shrs, True, False),
    "shru": _call(shru, True, False),
    # The one quotient that leaves the range, INT_MIN / -1, wraps (as the GPU's).
    "divs": _call(divs, False, True),
    "rems": _call(rems, False, False),
    "floordivs": _call(floordivs, False, True),
    "ceildivs": _call(ceildivs, False, True),
    "divu": _call(divu, True, True),
    "remu": _call(remu, True, True),
    "ceildivu": _call(ceildivu, True, True),
    "mins": _call(min, False, False),
    "maxs": _call(max, False, False),
    "maxu": _call(maxu, True, False),
    "minu": _call(minu, True, False),
}
"""Integer binary operations by name: each gives the Python expression of its
result from the names of its operands and the width."""


# -- emitters -------------------------------------------------------------------------------


def emit_int_binary(
    w: FunctionWriter, kind: str, result: SSAValue, a: SSAValue, b: SSAValue
) -> None:
    """`result = a <kind> b`, for a `kind` of `INT_BINARY`."""
    bits = int_width(result.type)
    expr = None
    if kind in ("divu", "remu"):
        expr = _unsigned_by_constant(w, kind, a, w[b], bits)
    if expr is None:
        expr = INT_BINARY[kind](w, w[a], w[b], bits)
    w.line(f"{w.define(result)} = {expr}")


def _unsigned_by_constant(
    w: FunctionWriter, kind: str, a: SSAValue, b: str, bits: int
) -> str | None:
    """An unsigned quotient or remainder by a constant from 2 to half the range,
    inline (the index arithmetic of every thread divides by tile extents): its
    result is never negative as a signed value, so it needs no wrapping, and a
    dividend known to be a non-negative signed value needs no masking."""
    text = b.strip("()")
    if not text.lstrip("-").isdigit() or not 2 <= int(text) < 1 << (bits - 1):
        return None
    known = value_range(a, w.ranges)
    inside = known is not None and known[0] >= 0 and known[1] < 1 << (bits - 1)
    dividend = w[a] if inside else unsigned_expr(w[a], bits)
    return f"({dividend} {'//' if kind == 'divu' else '%'} {text})"


def emit_float_binary(
    w: FunctionWriter, symbol: str, result: SSAValue, a: SSAValue, b: SSAValue
) -> None:
    """`result = a <symbol> b` of two numpy floats (rounded to their type)."""
    w.line(f"{w.define(result)} = {w[a]} {symbol} {w[b]}")


ICMP = {
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
"""Integer comparisons by predicate name (`u` ones compare the unsigned patterns)."""


def emit_icmp(
    w: FunctionWriter, predicate: str, result: SSAValue, a: SSAValue, b: SSAValue
) -> None:
    lhs, rhs = w[a], w[b]
    if predicate.startswith("u"):
        bits = int_width(a.type)
        lhs, rhs = unsigned_expr(lhs, bits), unsigned_expr(rhs, bits)
    w.line(f"{w.define(result)} = {lhs} {ICMP[predicate]} {rhs}")


def emit_fcmp(
    w: FunctionWriter, predicate: str, result: SSAValue, a: SSAValue, b: SSAValue
) -> None:
    test = w.global_(CMPF[predicate], f"cmpf_{predicate}")
    w.line(f"{w.define(result)} = {test}({w[a]}, {w[b]})")


def emit_select(
    w: FunctionWriter, result: SSAValue, cond: SSAValue, a: SSAValue, b: SSAValue
) -> None:
    w.line(f"{w.define(result)} = {w[a]} if {w[cond]} else {w[b]}")


def emit_int_cast(
    w: FunctionWriter, result: SSAValue, value: SSAValue, signed: bool
) -> None:
    """Sign- or zero-extension, truncation, `index_cast`: the source's value (its
    unsigned pattern when not `signed`) wrapped to the result's width."""
    source = int_width(value.type)
    name = w[value]
    if source == 1:
        name = f"(-int({name}))" if signed else f"int({name})"
    elif not signed:
        name = unsigned_expr(name, source)
    w.line(f"{w.define(result)} = {wrapped(name, int_width(result.type))}")


def element_type(t: Attribute) -> Attribute:
    """The scalar type of `t`'s values: its element type for a vector (an array,
    which numpy's scalar types convert element by element)."""
    return t.get_element_type() if isinstance(t, VectorType) else t


def int_to_float(value: int, to: type) -> Any:
    """`sitofp` / `uitofp` of the integer `value` to numpy's float type `to`, rounded
    once to nearest even. Converting the Python int straight to `to` would round it to
    float64 first (and a bf16 through float32): twice, wrong where the first rounding
    lands on a tie of the second (2**60 + 2**52 + 1 to bf16). An array (a vector)
    converts element by element."""
    if isinstance(value, np.ndarray):
        flat = [int_to_float(int(x), to) for x in value.ravel()]
        return np.array(flat, np.dtype(to)).reshape(value.shape)
    precision = ml_dtypes.finfo(to).nmant + 1  # the significand's bits
    magnitude = abs(value)
    excess = magnitude.bit_length() - precision
    if excess > 0:
        kept, rest = divmod(magnitude, 1 << excess)
        half = 1 << (excess - 1)
        if rest > half or (rest == half and kept & 1):
            kept += 1
        magnitude = kept << excess
    # exact in float64 now (at most `precision` significant bits), and to `to` too
    # unless it overflows to an infinity, as it should
    with np.errstate(over="ignore"):
        return to(float(-magnitude if value < 0 else magnitude))


def emit_int_to_float(
    w: FunctionWriter, result: SSAValue, value: SSAValue, signed: bool
) -> None:
    to = w.global_(numpy_dtype(element_type(result.type)).type, "to")
    name = w[value]
    if not signed:
        name = unsigned_expr(name, int_width(element_type(value.type)))
    fn = w.global_(int_to_float, "int_to_float")
    w.line(f"{w.define(result)} = {fn}({name}, {to})")


def emit_float_to_int(
    w: FunctionWriter, result: SSAValue, value: SSAValue, signed: bool
) -> None:
    fn = w.global_(float_to_int, "float_to_int")
    bits = int_width(result.type)
    w.line(f"{w.define(result)} = {fn}({w[value]}, {bits}, {signed})")


def emit_float_cast(w: FunctionWriter, result: SSAValue, value: SSAValue) -> None:
    """`extf`, `truncf`: the value rounded once to the result's type (each element
    of a vector; `float_converter` knows bf16)."""
    source, target = element_type(value.type), element_type(result.type)
    to = w.global_(float_converter(source, target), "to")
    w.line(f"{w.define(result)} = {to}({w[value]})")


def int_constant(value: int, t: Attribute) -> str:
    """Python source of an integer constant of type `t`, wrapped to its width."""
    bits = int_width(t)
    return repr(bool(value & 1)) if bits == 1 else f"({wrap(value, bits)})"
