"""What the Python code the interpreter writes calls at run time.

Everything here is small and hot: float helpers with IEEE semantics that Python's own
`max` lacks (NaN propagation, signed zeros), integer wrap-around for fixed-width types,
poisoned allocations and the errors the generated code raises.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    MemRefType,
)
from xdsl.ir import Attribute, Operation
from xdsl.printer import Printer

from affinec import dtypes

_BFLOAT16 = dtypes.BFLOAT16.type


class InterpreterError(Exception):
    """An error in the program being interpreted (not in the interpreter)."""


def describe(op: Operation) -> str:
    """One line naming an op for an error message: its printed form and function."""
    import io

    text = io.StringIO()
    Printer(stream=text).print_op(op)
    first = text.getvalue().strip().splitlines()[0].rstrip(" {")
    func = op.parent_op()
    while func is not None and func.name not in ("func.func", "gpu.func"):
        func = func.parent_op()
    where = ""
    if func is not None and "sym_name" in func.properties:
        where = f" in @{func.properties['sym_name'].data}"  # pyright: ignore
    return f"'{first}'{where}"


def out_of_bounds(op: Operation, indices: tuple[int, ...], shape: tuple[int, ...]):
    raise InterpreterError(
        f"{describe(op)}: index {list(indices)} is out of bounds for a memref of "
        f"shape {list(shape)}"
    )


def numpy_dtype(t: Attribute) -> np.dtype:
    """The numpy dtype of the interpreter's values of type `t`."""
    try:
        return dtypes.numpy_dtype(t)
    except TypeError as e:
        raise InterpreterError(f"the interpreter has {e}") from None


def memref_shape(t: MemRefType) -> tuple[int, ...]:
    shape = tuple(t.get_shape())
    if any(d < 0 for d in shape):
        raise InterpreterError(f"dynamic shapes are not supported: {t}")
    return shape


def poisoned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A fresh buffer whose every element is obviously unwritten (NaN, or -2**k)."""
    if dtypes.is_floating(dtype):
        return np.full(shape, np.nan, dtype)
    if dtype.kind == "b":
        return np.zeros(shape, dtype)
    return np.full(shape, np.iinfo(dtype).min, dtype)


def wrap(value: int, bits: int) -> int:
    """`value` as a two's-complement signed integer of `bits` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def fused_multiply_add(a, b, c):
    """`a * b + c` rounded once to the type of `a`, as the GPU's `fma` rounds it.

    Python 3.11 has no `math.fma`. For float16, bf16 and float32 operands the product
    is exact in float64; the sum is computed in float64 *rounded to odd* (the exact
    error of the float64 addition, from Knuth's two-sum, nudges an inexact result to
    the neighbour with an odd last bit), and rounding that to the narrower type is
    then the correct single rounding, because float64 carries more than two extra
    bits (Boldo and Melquiond's round-to-odd theorem). To bf16 that last rounding is
    `round_to_bfloat16`'s, since `ml_dtypes` would round through float32.
    """
    t = type(a)
    to = dtypes.round_to_bfloat16 if t is _BFLOAT16 else t
    p = float(a) * float(b)
    z = float(c)
    s = p + z
    if not math.isfinite(s):
        return to(s)
    v = s - p
    error = (p - (s - v)) + (z - v)
    if error != 0.0 and not struct.unpack("<q", struct.pack("<d", s))[0] & 1:
        s = math.nextafter(s, math.inf if error > 0 else -math.inf)
    return to(s)


def float_converter(source: Attribute, target: Attribute) -> Any:
    """What converts a value (a scalar or an array) of float type `source` to float
    type `target` with one rounding: numpy's scalar type of `target`, except from a
    float64 to bf16, which `ml_dtypes` would round twice (`round_to_bfloat16`)."""
    to = numpy_dtype(target)
    if to == dtypes.BFLOAT16 and numpy_dtype(source).itemsize > 4:
        return dtypes.round_to_bfloat16
    return to.type


def maximumf(a, b):
    """`arith.maximumf`: NaN if either is NaN, and +0 above -0."""
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return b if math.copysign(1.0, float(a)) < 0 else a
    return a if a > b else b


def minimumf(a, b):
    """`arith.minimumf`: NaN if either is NaN, and -0 below +0."""
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return a if math.copysign(1.0, float(a)) < 0 else b
    return a if a < b else b


def maxnumf(a, b):
    """`arith.maxnumf`: the other operand when one is NaN."""
    if a != a:
        return b
    if b != b:
        return a
    return maximumf(a, b)


def minnumf(a, b):
    """`arith.minnumf`: the other operand when one is NaN."""
    if a != a:
        return b
    if b != b:
        return a
    return minimumf(a, b)


def _unordered(a, b) -> bool:
    return bool(a != a or b != b)


CMPF = {
    "false": lambda a, b: False,
    "oeq": lambda a, b: bool(a == b),
    "ogt": lambda a, b: bool(a > b),
    "oge": lambda a, b: bool(a >= b),
    "olt": lambda a, b: bool(a < b),
    "ole": lambda a, b: bool(a <= b),
    "one": lambda a, b: not _unordered(a, b) and bool(a != b),
    "ord": lambda a, b: not _unordered(a, b),
    "ueq": lambda a, b: _unordered(a, b) or bool(a == b),
    "ugt": lambda a, b: _unordered(a, b) or bool(a > b),
    "uge": lambda a, b: _unordered(a, b) or bool(a >= b),
    "ult": lambda a, b: _unordered(a, b) or bool(a < b),
    "ule": lambda a, b: _unordered(a, b) or bool(a <= b),
    "une": lambda a, b: _unordered(a, b) or bool(a != b),
    "uno": _unordered,
    "true": lambda a, b: True,
}
"""`arith.cmpf` predicates by name."""

CMPF_PREDICATES = list(CMPF)
"""In the order of MLIR's `arith::CmpFPredicate` enum (the attribute's integer)."""

CMPI_PREDICATES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
"""In the order of MLIR's `arith::CmpIPredicate` enum."""
