"""Vectors and aggregates: the vector dialect's extract, insert and broadcast,
`ub.poison`, and llvm's aggregate and vector ops (extractvalue, insertvalue,
extractelement, insertelement, bitcast, undef, zero), and `arith.bitcast`.

A vector is a numpy array of its shape and element type, never written in place
(`vector.insert` copies), so its elements are numpy scalars of the IR's type as
everywhere else. An LLVM array or struct is a Python tuple of its elements: an MMA
fragment `vector<4x2xf16>` is, at the llvm level, `!llvm.array<4 x vector<2xf16>>`,
a tuple of four arrays of shape (2,). A bitcast reinterprets the bytes, so an i32
register holding two f16 values and the `vector<2xf16>` of them convert both ways
(the first element in the low half, as PTX packs them).

    %e = vector.extract %d[1, 0] : f32 from vector<2x2xf32>
    %r = vector.insert %v, %acc[2] : vector<2xf16> into vector<4x2xf16>
    %h = llvm.bitcast %r0 : i32 to vector<2xf16>
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import arith, llvm, ub, vector
from xdsl.dialects.builtin import IndexType, IntegerType, VectorType
from xdsl.ir import Attribute, Operation

from affinec.dialects import llvm as llvm_extensions
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.support import (
    InterpreterError,
    numpy_dtype,
    poisoned,
)


def _position(w: FunctionWriter, positions: list) -> str:
    names = [str(p) if isinstance(p, int) else w[p] for p in positions]
    return ", ".join(names) + "," * (len(names) == 1)


@emits(vector.ExtractOp)
def _extract(op: vector.ExtractOp, w: FunctionWriter) -> None:
    position = _position(w, op.get_mixed_position())
    if position:
        w.line(f"{w.define(op.result)} = {w[op.vector]}[{position}]")
    else:
        w.alias(op.result, w[op.vector])


def _inserted(dest: np.ndarray, position: tuple, value) -> np.ndarray:
    out = dest.copy()
    out[position] = value
    return out


@emits(vector.InsertOp)
def _insert(op: vector.InsertOp, w: FunctionWriter) -> None:
    position = _position(w, op.get_mixed_position())
    fn = w.global_(_inserted, "inserted")
    w.line(f"{w.define(op.result)} = {fn}({w[op.dest]}, ({position}), {w[op.source]})")


def _broadcast(value, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.full(shape, value, dtype)


@emits(vector.BroadcastOp)
def _broadcast_emitter(op: vector.BroadcastOp, w: FunctionWriter) -> None:
    t = op.vector.type
    assert isinstance(t, VectorType)
    shape = tuple(t.get_shape())
    dtype = w.global_(numpy_dtype(t.get_element_type()), "dtype")
    fn = w.global_(_broadcast, "broadcast")
    w.line(f"{w.define(op.vector)} = {fn}({w[op.source]}, {shape}, {dtype})")


# -- values of a type: poison and zero -------------------------------------------------------


def value_of(t: Attribute, fill: str) -> Any:
    """A value of IR type `t` whose every scalar is poison (NaN, the most negative
    integer) for `fill="poison"`, or zero for `fill="zero"`."""
    if isinstance(t, llvm.LLVMArrayType):
        return (value_of(t.type, fill),) * t.size.data
    if isinstance(t, llvm.LLVMStructType):
        return tuple(value_of(x, fill) for x in t.types.data)
    if isinstance(t, llvm.LLVMPointerType):
        return None  # (a pointer member of an aggregate being built: set before use)
    if isinstance(t, VectorType):
        dtype = numpy_dtype(t.get_element_type())
        array = (
            poisoned(tuple(t.get_shape()), dtype)
            if fill == "poison"
            else np.zeros(tuple(t.get_shape()), dtype)
        )
        array.flags.writeable = False
        return array
    if isinstance(t, IntegerType) and t.width.data == 1:
        return False
    if isinstance(t, IntegerType | IndexType):
        return int(poisoned((1,), numpy_dtype(t))[0]) if fill == "poison" else 0
    dtype = numpy_dtype(t)
    return poisoned((1,), dtype)[0] if fill == "poison" else dtype.type(0)


@emits(ub.PoisonOp, llvm.UndefOp, llvm_extensions.PoisonOp)
def _poison(op: Operation, w: FunctionWriter) -> None:
    result = op.results[0]
    w.alias(result, w.global_(value_of(result.type, "poison"), "poison"))


@emits(llvm.ZeroOp)
def _zero(op: llvm.ZeroOp, w: FunctionWriter) -> None:
    if isinstance(op.res.type, llvm.LLVMPointerType):
        raise InterpreterError("null pointers are not interpreted", op)
    w.alias(op.res, w.global_(value_of(op.res.type, "zero"), "zero"))


# -- llvm aggregates ---------------------------------------------------------------------


@emits(llvm.ExtractValueOp)
def _extract_value(op: llvm.ExtractValueOp, w: FunctionWriter) -> None:
    index = "".join(f"[{k}]" for k in op.position.iter_values())
    w.line(f"{w.define(op.res)} = {w[op.container]}{index}")


def _with_value(aggregate: tuple, position: tuple[int, ...], value) -> tuple:
    k, rest = position[0], position[1:]
    inner = _with_value(aggregate[k], rest, value) if rest else value
    return (*aggregate[:k], inner, *aggregate[k + 1 :])


@emits(llvm.InsertValueOp)
def _insert_value(op: llvm.InsertValueOp, w: FunctionWriter) -> None:
    position = tuple(op.position.iter_values())
    fn = w.global_(_with_value, "with_value")
    w.line(f"{w.define(op.res)} = {fn}({w[op.container]}, {position}, {w[op.value]})")


@emits(llvm_extensions.ExtractElementOp)
def _extract_element(op: llvm_extensions.ExtractElementOp, w: FunctionWriter):
    w.line(f"{w.define(op.res)} = {w[op.vector]}[{w[op.position]}]")


@emits(llvm.InsertElementOp)
def _insert_element(op: llvm.InsertElementOp, w: FunctionWriter) -> None:
    fn = w.global_(_inserted, "inserted")
    w.line(
        f"{w.define(op.res)} = {fn}({w[op.vector]}, ({w[op.index]},), {w[op.value]})"
    )


# -- bitcast -----------------------------------------------------------------------------


def layout_of(op: Operation, t: Attribute) -> tuple[np.dtype, tuple[int, ...] | None]:
    """(element dtype, shape, or None for a scalar) of a bitcast operand type."""
    if isinstance(t, VectorType):
        return numpy_dtype(t.get_element_type()), tuple(t.get_shape())
    if isinstance(t, IntegerType) and t.width.data in (8, 16, 32, 64):
        return np.dtype(f"int{t.width.data}"), None
    if isinstance(t, IntegerType):
        raise InterpreterError(f"cannot bitcast {t}", op)
    try:
        return numpy_dtype(t), None
    except InterpreterError:
        raise InterpreterError(f"cannot bitcast {t}", op) from None


def bitcast(value, source: tuple, target: tuple):
    """Reinterpret the bytes of `value` (layouts as `layout_of` gives them)."""
    (src_dtype, src_shape), (dst_dtype, dst_shape) = source, target
    raw = np.array(value if src_shape is not None else [value], src_dtype)
    out = raw.view(dst_dtype)
    if dst_shape is not None:
        return out.reshape(dst_shape)
    scalar = out[0]
    return int(scalar) if dst_dtype.kind == "i" else scalar


@emits(llvm.BitcastOp, arith.BitcastOp)
def _bitcast(op: llvm.BitcastOp | arith.BitcastOp, w: FunctionWriter) -> None:
    (value,), (result,) = op.operands, op.results
    source, target = value.type, result.type
    if isinstance(source, llvm.LLVMPointerType):
        w.alias(result, w[value])
        return
    layouts = w.global_((layout_of(op, source), layout_of(op, target)), "layouts")
    fn = w.global_(bitcast, "bitcast")
    w.line(f"{w.define(result)} = {fn}({w[value]}, *{layouts})")
