"""`scalars`' integer semantics on lanes: the same results, element by element, for
values that are numpy arrays over a block's threads (`lockstep`).

An `iN` value on lanes is an int64 array holding the signed value (an `i1` one a
bool array), as `scalars` keeps a Python int: 64-bit values wrap by themselves in
numpy's int64, narrower ones are wrapped after each op that can leave their range
(an i32 product fits int64 before wrapping). What `scalars` refuses (a division by
zero, a shift by the width or more) is refused here for the first lane that does
it. A quotient of the most negative 64-bit value, where numpy's int64 would
overflow on the way, is computed lane by lane with `scalars`' own functions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.ir import SSAValue

from affinec.interpreter import scalars
from affinec.interpreter.codegen import FunctionWriter
from affinec.interpreter.scalars import int_width
from affinec.interpreter.support import InterpreterError

INT64_MIN = np.int64(-(1 << 63))


def _wide(x):
    """An integer operand as int64 (a narrower array read from memory widened, so
    that an op's result cannot overflow before it is wrapped)."""
    return np.asarray(x, np.int64)


def wrap(x, bits: int):
    """`x` as a two's-complement signed `bits`-bit integer."""
    if bits == 64:
        return x
    if bits == 1:
        return (np.asarray(x) & 1).astype(bool)
    half = 1 << (bits - 1)
    return ((x + half) & (2 * half - 1)) - half


def unsigned(x, bits: int):
    """The `bits`-bit pattern of `x`, read as unsigned (uint64 for 64 bits)."""
    if bits == 64:
        return _wide(x).view(np.uint64)
    return _wide(x) & ((1 << bits) - 1)


def _nonzero(b) -> None:
    if np.any(np.asarray(b) == 0):
        raise InterpreterError("integer division by zero")


def _lane_by_lane(fn: Callable, a, b, bits: int):
    """`fn` of `scalars` applied lane by lane (its result wrapped to `bits`), where
    int64 would overflow on the way."""
    a, b = np.broadcast_arrays(_wide(a), _wide(b))
    pairs = zip(a.ravel().tolist(), b.ravel().tolist(), strict=True)
    values = [scalars.wrap(fn(x, y), bits) for x, y in pairs]
    return np.array(values, np.int64).reshape(a.shape)


def _extreme(a, b) -> bool:
    return bool(np.any(np.asarray(a) == INT64_MIN) or np.any(np.asarray(b) == -1))


def divs(a, b, bits: int):
    _nonzero(b)
    if bits == 64 and _extreme(a, b):
        return _lane_by_lane(scalars.divs, a, b, bits)
    a, b = _wide(a), _wide(b)
    q = np.abs(a) // np.abs(b)
    return wrap(np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q), bits)


def rems(a, b, bits: int):
    _nonzero(b)
    if bits == 64 and _extreme(a, b):
        return _lane_by_lane(scalars.rems, a, b, bits)
    return wrap(_wide(a) - _wide(b) * divs(a, b, bits), bits)


def floordivs(a, b, bits: int):
    _nonzero(b)
    if bits == 64 and _extreme(a, b):
        return _lane_by_lane(scalars.floordivs, a, b, bits)
    return wrap(np.floor_divide(_wide(a), _wide(b)), bits)


def ceildivs(a, b, bits: int):
    _nonzero(b)
    if bits == 64 and _extreme(a, b):
        return _lane_by_lane(scalars.ceildivs, a, b, bits)
    return wrap(-np.floor_divide(-_wide(a), _wide(b)), bits)


def divu(a, b, bits: int):
    _nonzero(unsigned(b, bits))
    q = unsigned(a, bits) // unsigned(b, bits)
    return q.view(np.int64) if bits == 64 else wrap(q, bits)


def remu(a, b, bits: int):
    _nonzero(unsigned(b, bits))
    r = unsigned(a, bits) % unsigned(b, bits)
    return r.view(np.int64) if bits == 64 else wrap(r, bits)


def ceildivu(a, b, bits: int):
    _nonzero(unsigned(b, bits))
    ua, ub = unsigned(a, bits), unsigned(b, bits)
    q = ua // ub + (ua % ub != 0)  # (ua + ub - 1) // ub would overflow at 64 bits
    return np.asarray(q, ua.dtype).view(np.int64) if bits == 64 else wrap(q, bits)


def _amount(b, bits: int):
    amount = unsigned(b, bits)
    if np.any(amount >= bits):
        k = int(np.argmax(np.broadcast_to(amount >= bits, np.shape(amount))))
        shown = int(np.ravel(amount)[k])
        raise InterpreterError(f"shift by {shown} of an i{bits} value (poison)")
    return np.asarray(amount, np.int64)


def shl(a, b, bits: int):
    return wrap(np.left_shift(_wide(a), _amount(b, bits)), bits)


def shrs(a, b, bits: int):
    return np.right_shift(_wide(a), _amount(b, bits))


def shru(a, b, bits: int):
    amount = _amount(b, bits)
    if bits == 64:
        return np.right_shift(unsigned(a, bits), amount.astype(np.uint64)).view(
            np.int64
        )
    return wrap(np.right_shift(unsigned(a, bits), amount), bits)


INT_BINARY: dict[str, Callable] = {
    "add": lambda a, b, bits: wrap(np.add(_wide(a), b), bits),
    "sub": lambda a, b, bits: wrap(np.subtract(_wide(a), b), bits),
    "mul": lambda a, b, bits: wrap(np.multiply(_wide(a), _wide(b)), bits),
    "and": lambda a, b, bits: np.bitwise_and(a, b),
    "or": lambda a, b, bits: np.bitwise_or(a, b),
    "xor": lambda a, b, bits: np.bitwise_xor(a, b),
    "shl": shl,
    "shrs": shrs,
    "shru": shru,
    "divs": divs,
    "rems": rems,
    "floordivs": floordivs,
    "ceildivs": ceildivs,
    "divu": divu,
    "remu": remu,
    "ceildivu": ceildivu,
    "mins": lambda a, b, bits: np.minimum(_wide(a), b),
    "maxs": lambda a, b, bits: np.maximum(_wide(a), b),
    "maxu": lambda a, b, bits: np.where(unsigned(a, bits) >= unsigned(b, bits), a, b),
    "minu": lambda a, b, bits: np.where(unsigned(a, bits) <= unsigned(b, bits), a, b),
}
"""`scalars.INT_BINARY`'s operations on lanes: (a, b, width) -> result."""


def compare(predicate: str, a, b, bits: int):
    """`scalars.ICMP`'s comparisons on lanes (`u` ones on the unsigned patterns)."""
    if predicate.startswith("u"):
        a, b = unsigned(a, bits), unsigned(b, bits)
    return {
        "eq": np.equal,
        "ne": np.not_equal,
        "slt": np.less,
        "sle": np.less_equal,
        "sgt": np.greater,
        "sge": np.greater_equal,
        "ult": np.less,
        "ule": np.less_equal,
        "ugt": np.greater,
        "uge": np.greater_equal,
    }[predicate](a, b)


def cast(x, source: int, target: int, signed: bool):
    """`scalars.emit_int_cast` on lanes: the source's value (its unsigned pattern
    when not `signed`) wrapped to `target` bits."""
    x = np.asarray(x)
    if source == 1:
        x = -x.astype(np.int64) if signed else x.astype(np.int64)
    elif not signed:
        x = unsigned(x, source)
        if source == 64:
            x = x.view(np.int64)
    return wrap(np.asarray(x, np.int64), target)


# -- writing them (arith's and llvm's integer ops alike) --------------------------------


def emit_binary(w: FunctionWriter, kind: str, result: SSAValue, a: str, b: str) -> None:
    """`result = INT_BINARY[kind](a, b)` at the result's width."""
    fn = w.global_(INT_BINARY[kind], f"lanes_{kind}")
    w.line(f"{w.define(result)} = {fn}({a}, {b}, {int_width(result.type)})")


def emit_compare(
    w: FunctionWriter, predicate: str, result: SSAValue, operand: SSAValue, a, b
) -> None:
    """`result = compare(predicate, a, b)` at `operand`'s width."""
    fn = w.global_(compare, "compare")
    bits = int_width(operand.type)
    w.line(f"{w.define(result)} = {fn}({predicate!r}, {a}, {b}, {bits})")


def emit_cast(
    w: FunctionWriter, result: SSAValue, value: SSAValue, signed: bool
) -> None:
    """`result = cast(value)` from `value`'s width to the result's."""
    fn = w.global_(cast, "cast")
    source, target = int_width(value.type), int_width(result.type)
    w.line(f"{w.define(result)} = {fn}({w[value]}, {source}, {target}, {signed})")
