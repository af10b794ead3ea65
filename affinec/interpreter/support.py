"""What the Python code the interpreter writes calls at run time.

Everything here is small and hot: float helpers with IEEE semantics that Python's own
`max` lacks (NaN propagation, signed zeros), poisoned allocations and the errors the
generated code raises. Integer semantics live in `scalars`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    MemRefType,
)
from xdsl.ir import Attribute, Operation
from xdsl.printer import Printer

from affinec.base import dtypes
from affinec.base.diagnostics import OpError, is_user_error
from affinec.base.element_types import UnsupportedType
from affinec.hardware.chips import CHIPS

_BFLOAT16 = dtypes.BFLOAT16.type


class InterpreterError(OpError):
    """An error in the program being interpreted (not in the interpreter).

    `op` is the op at fault, once known: raise sites that have it at hand pass it;
    for the others the interpreter fills it in, from the op being decoded or, at run
    time, from the op whose generated line raised. The error reads as the op's
    one-line description (`describe`), then the message, and `format_exception`
    locates it at the op's source.
    """

    names_op = False
    """`__str__` describes the op itself."""

    def __init__(self, message: str, op: Operation | None = None) -> None:
        super().__init__(op, message)

    def __str__(self) -> str:
        if self.op is None:
            return self.message
        return f"{describe(self.op)}: {self.message}"


@contextmanager
def errors_at(op: Operation) -> Iterator[None]:
    """An `InterpreterError` raised here without an op is about `op`."""
    try:
        yield
    except InterpreterError as e:
        if e.op is None:
            e.op = op
        raise


def describe(op: Operation) -> str:
    """One line naming an op for an error message: its printed form and function."""
    import io

    text = io.StringIO()
    try:
        Printer(stream=text).print_op(op)
        first = text.getvalue().strip().splitlines()[0].rstrip(" {")
    except Exception as e:
        if not is_user_error(e):
            raise
        first = op.name  # an op xDSL parses but cannot print (an f128 constant)
    func = op.parent_op()
    while func is not None and func.name not in ("func.func", "gpu.func"):
        func = func.parent_op()
    where = ""
    if func is not None and "sym_name" in func.properties:
        where = f" in @{func.properties['sym_name'].data}"  # pyright: ignore
    return f"'{first}'{where}"


def out_of_bounds(op: Operation, indices: tuple[int, ...], shape: tuple[int, ...]):
    raise InterpreterError(
        f"index {list(indices)} is out of bounds for a memref of shape {list(shape)}",
        op,
    )


def numpy_dtype(t: Attribute) -> np.dtype:
    """The numpy dtype of the interpreter's values of type `t`."""
    try:
        return dtypes.numpy_dtype(t)
    except UnsupportedType as e:
        raise InterpreterError(str(e)) from None


def memref_shape(t: MemRefType) -> tuple[int, ...]:
    """The static shape of a buffer the interpreter allocates itself."""
    shape = tuple(t.get_shape())
    if any(d < 0 for d in shape):
        raise InterpreterError(f"dynamic shapes are not supported: {t}")
    return shape


Size = int | str
"""A size as generated code reads it: a number, or the expression reading a
dynamic size off the array (`input.shape[0]`)."""


def access_shape(t: MemRefType, array: str) -> tuple[Size, ...]:
    """The shape an access to `array` (a memref of type `t`) is checked against."""
    return tuple(
        f"{array}.shape[{k}]" if d < 0 else d for k, d in enumerate(t.get_shape())
    )


def tuple_text(items: Sequence[object]) -> str:
    """A Python tuple of `items` (source texts, or numbers) in generated code."""
    return f"({', '.join(map(str, items))}{',' * (len(items) == 1)})"


def shape_text(shape: Sequence[Size]) -> str:
    """A shape as a Python tuple in generated code."""
    return tuple_text(shape)


# -- limits ---------------------------------------------------------------------------------

MAX_BUFFER_BYTES = 1 << 30
"""The largest buffer the interpreter allocates (1 GiB): a bigger one is a mistake in
the IR (or a spec far beyond what interpretation is for), refused before numpy tries."""

MAX_THREADS_PER_BLOCK = max(c.max_threads_per_block for c in CHIPS.values())
"""The most any chip launches: a block of more threads cannot run anywhere."""

MAX_GRID_BLOCKS = (1 << 31) - 1
"""The most blocks a launch has along a dimension (a lockstep block's ids must fit
the ranges its index arithmetic was checked against)."""

DEFAULT_MAX_STEPS = 1 << 28
"""The loop iterations (and simulated threads) one run may take by default: about
minutes of interpretation. A loop that would run longer is refused when it starts,
when its trip count alone is over what is left."""


class StepLimitError(InterpreterError):
    """A run went over its step budget (a loop that does not end, or a module far
    bigger than its spec)."""


class StepBudget:
    """The loop iterations and simulated threads a run may still take.

    Generated code charges every counted loop on entry (`spend(lower, upper)`, so a loop
    of 2**63 iterations is refused at once), every iteration of a `while` loop or a
    backward branch (`tick()`), and every thread of a launch. `why` says where the
    limit comes from, for the message.
    """

    __slots__ = ("left", "limit", "why")

    def __init__(self, limit: int, why: str = "the interpreter's limit") -> None:
        self.limit = limit
        self.left = limit
        self.why = why

    def reset(self) -> None:
        self.left = self.limit

    def spend(self, lower: int, upper: int, step: int = 1) -> range:
        """The iterations of a counted loop, charged before the first."""
        if step <= 0:
            raise InterpreterError(f"a loop with step {step} (it must be positive)")
        trips = range(lower, upper, step)
        try:
            self.left -= len(trips)
        except OverflowError:  # more than 2**63 iterations
            self.left = -1
        if self.left < 0:
            self._exhausted()
        return trips

    def spend_each(self, threads: int, lower: int, upper: int, step: int = 1) -> range:
        """`spend` for a loop that each of `threads` threads runs (in lockstep)."""
        trips = self.spend(lower, upper, step)
        self.threads(len(trips) * (threads - 1))
        return trips

    def tick(self) -> None:
        self.left -= 1
        if self.left < 0:
            self._exhausted()

    def threads(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            self._exhausted()

    def _exhausted(self) -> None:
        raise StepLimitError(
            f"the run goes past {self.limit:,} loop iterations and simulated threads "
            f"({self.why}): a loop that does not end, or far more work than expected"
        )


def check_buffer(shape: tuple[int, ...], itemsize: int, what: str = "buffer") -> None:
    """Refuse a buffer over `MAX_BUFFER_BYTES`, before allocating it."""
    if any(d < 0 for d in shape):
        raise InterpreterError(f"a {what} of negative size {list(shape)}")
    size = math.prod(shape) * itemsize
    if size > MAX_BUFFER_BYTES:
        raise InterpreterError(
            f"a {what} of shape {list(shape)} needs {size:,} bytes, over the "
            f"interpreter's limit of {MAX_BUFFER_BYTES:,}"
        )


def poisoned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A fresh buffer whose every element is obviously unwritten (NaN, or -2**k)."""
    check_buffer(shape, dtype.itemsize)
    if dtypes.is_floating(dtype):
        return np.full(shape, np.nan, dtype)
    if dtype.kind == "b":
        return np.zeros(shape, dtype)
    return np.full(shape, np.iinfo(dtype).min, dtype)


_float64_bytes = struct.Struct("<d").pack


def fused_multiply_add(a, b, c):
    """`a * b + c` rounded once to the type of `a`, as the GPU's `fma` rounds it.

    Python 3.11 has no `math.fma`. For float16, bf16 and float32 operands the product
    is exact in float64; the sum is computed in float64 *rounded to odd* (the exact
    error of the float64 addition, from Knuth's two-sum, nudges an inexact result to
    the neighbour with an odd last bit), and rounding that to the narrower type is
    then the correct single rounding, because float64 carries more than two extra
    bits (Boldo and Melquiond's round-to-odd theorem). To bf16 that last rounding is
    `round_to_bfloat16`'s, since `ml_dtypes` would round through float32. A float64
    product is not exact in float64: `_fused_multiply_add_f64` computes it exactly.
    """
    if isinstance(a, np.ndarray):  # a vector's elements, each rounded once
        return fused_multiply_add_lanes(a, b, c)
    t = type(a)
    if t is np.float64 or t is float:
        return t(_fused_multiply_add_f64(float(a), float(b), float(c)))
    to = dtypes.round_to_bfloat16 if t is _BFLOAT16 else t
    p = float(a) * float(b)
    z = float(c)
    s = p + z
    if not math.isfinite(s):
        return to(s)
    v = s - p
    error = (p - (s - v)) + (z - v)
    # the last bit of the float64: the lowest of its little-endian bytes
    if error != 0.0 and not _float64_bytes(s)[0] & 1:
        s = math.nextafter(s, math.inf if error > 0 else -math.inf)
    return to(s)


def _fused_multiply_add_f64(a: float, b: float, c: float) -> float:
    """`a * b + c` on float64s, rounded once: exactly in rationals (Python's
    conversion of a fraction to a float rounds to nearest even)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c  # infinities and NaNs as IEEE 754 has them
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # The sum of two zeros is -0 when both are; any other exact zero is +0
        # (rounding to nearest).
        product_negative = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        if a * b == 0 and c == 0 and product_negative and math.copysign(1.0, c) < 0:
            return -0.0
        return 0.0
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def fused_multiply_add_lanes(a, b, c):
    """`fused_multiply_add` on arrays (any of `a`, `b`, `c` may be a scalar): the same
    rounding to odd in float64, lane by lane, then one rounding to the operands'
    type."""
    if np.result_type(a, b, c) == np.float64:
        rounded_once = np.vectorize(_fused_multiply_add_f64, otypes=[np.float64])
        return rounded_once(a, b, c)
    p = np.multiply(a, b, dtype=np.float64)
    s = np.add(p, c, dtype=np.float64)
    v = s - p
    error = (p - (s - v)) + (np.asarray(c, np.float64) - v)
    nudge = error != 0.0
    if nudge.any():
        nudge &= np.isfinite(s) & ((s.view(np.int64) & 1) == 0)
        s = np.where(nudge, np.nextafter(s, np.where(error > 0, np.inf, -np.inf)), s)
    if a.dtype == dtypes.BFLOAT16:
        return dtypes.round_to_bfloat16(s)
    return s.astype(a.dtype)


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


def maximumf_lanes(a, b):
    """`maximumf` lane by lane (NaN and signed zeros as one lane's)."""
    same = np.where(np.signbit(a), b, a)
    return np.where(
        a != a, a, np.where(b != b, b, np.where(a == b, same, np.maximum(a, b)))
    )


def minimumf_lanes(a, b):
    """`minimumf` lane by lane (NaN and signed zeros as one lane's)."""
    same = np.where(np.signbit(a), a, b)
    return np.where(
        a != a, a, np.where(b != b, b, np.where(a == b, same, np.minimum(a, b)))
    )


def maxnumf_lanes(a, b):
    """`maxnumf` lane by lane."""
    return np.where(a != a, b, np.where(b != b, a, maximumf_lanes(a, b)))


def minnumf_lanes(a, b):
    """`minnumf` lane by lane."""
    return np.where(a != a, b, np.where(b != b, a, minimumf_lanes(a, b)))


LANEWISE = {
    maximumf: maximumf_lanes,
    minimumf: minimumf_lanes,
    maxnumf: maxnumf_lanes,
    minnumf: minnumf_lanes,
    fused_multiply_add: fused_multiply_add_lanes,
}
"""Each scalar float helper's lane-by-lane form (for vectors, and for a block's
threads in lockstep)."""


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
