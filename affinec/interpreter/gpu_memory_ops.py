"""The host's gpu memory ops: `gpu.alloc` (a fresh, poisoned buffer, dynamic sizes
included), `gpu.dealloc`, `gpu.memcpy`, `gpu.memset`, `gpu.set_default_device` and
`gpu.wait`. The interpreter runs one device whose every operation is done when it
returns, so an async token is nothing to wait for.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation

from affinec.dialects import gpu
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.support import InterpreterError, numpy_dtype, poisoned


def _define_token(op: Operation, w: FunctionWriter) -> None:
    token = getattr(op, "asyncToken", None)
    if token is not None:
        w.line(f"{w.define(token)} = None")


def allocate(op: Operation, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if any(d < 0 for d in shape):
        raise InterpreterError(f"allocates a buffer of negative size {list(shape)}", op)
    return poisoned(shape, dtype)


@emits(gpu.AllocOp)
def _alloc(op: gpu.AllocOp, w: FunctionWriter) -> None:
    t = op.memref.type
    assert isinstance(t, MemRefType)
    sizes = iter(w.names(op.dynamicSizes))
    dims = [str(d) if d >= 0 else next(sizes) for d in t.get_shape()]
    dtype = numpy_dtype(t.get_element_type())
    w.line(
        f"{w.define(op.memref)} = {w.global_(allocate, 'allocate')}({w.op_ref(op)}, "
        f"({', '.join(dims)}{',' * (len(dims) == 1)}), {w.global_(dtype, 'dtype')})"
    )
    _define_token(op, w)


@emits(gpu.DeallocOp, gpu.WaitOp)
def _nothing_to_do(op: gpu.DeallocOp | gpu.WaitOp, w: FunctionWriter) -> None:
    _define_token(op, w)


def copy(op: Operation, dst: np.ndarray, src: np.ndarray) -> None:
    if dst.shape != src.shape:
        raise InterpreterError(
            f"copies an array of shape {list(src.shape)} into one of shape "
            f"{list(dst.shape)}",
            op,
        )
    dst[...] = src


@emits(gpu.MemcpyOp)
def _memcpy(op: gpu.MemcpyOp, w: FunctionWriter) -> None:
    w.line(f"{w.global_(copy, 'copy')}({w.op_ref(op)}, {w[op.dst]}, {w[op.src]})")
    _define_token(op, w)


@emits(gpu.MemsetOp)
def _memset(op: gpu.MemsetOp, w: FunctionWriter) -> None:
    w.line(f"{w[op.dst]}[...] = {w[op.value]}")
    _define_token(op, w)


def set_default_device(op: Operation, device: int) -> None:
    if device != 0:
        raise InterpreterError(
            f"selects device {device}: the interpreter is one device, 0", op
        )


@emits(gpu.SetDefaultDeviceOp)
def _set_default_device(op: gpu.SetDefaultDeviceOp, w: FunctionWriter) -> None:
    fn = w.global_(set_default_device, "set_default_device")
    w.line(f"{fn}({w.op_ref(op)}, {w[op.devIndex]})")
