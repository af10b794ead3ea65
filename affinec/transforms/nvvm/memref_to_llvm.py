"""memref ops as llvm ops: a memref is a bare pointer in its address space, an
access one `getelementptr inbounds` at the row-major offset."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import llvm, memref, vector
from xdsl.dialects.builtin import (
    IntegerAttr,
    IntegerType,
    MemRefType,
    VectorType,
)
from xdsl.ir import Operation, SSAValue

from affinec.diagnostics import PassError
from affinec.dialects.affinec import ElementPointerOp
from affinec.dtypes import element_size
from affinec.transforms.nvvm.converter import KernelConverter, converts


def _address(
    c: KernelConverter, ref: SSAValue, indices: Sequence[SSAValue]
) -> SSAValue:
    t = ref.type
    assert isinstance(t, MemRefType)
    base = c.v(ref)
    shape = t.get_shape()
    if not indices:
        return base
    offset: SSAValue | None = None
    for k, index in enumerate(indices):
        stride = math.prod(shape[k + 1 :])
        term = c.v(index)
        if stride != 1:
            term = c.emit(llvm.MulOp(term, c.int_constant(stride)))
        offset = term if offset is None else c.emit(llvm.AddOp(offset, term))
    assert offset is not None
    gep = llvm.GEPOp(
        base,
        [llvm.GEP_USE_SSA_VAL],
        t.get_element_type(),
        ssa_indices=[offset],
        result_type=base.type,  # pyright: ignore[reportArgumentType]
        inbounds=True,
    )
    return c.emit(gep)  # pyright: ignore[reportReturnType]


@converts(memref.LoadOp)
def _load(op: memref.LoadOp, c: KernelConverter):
    ptr = _address(c, op.memref, op.indices)
    t = op.res.type
    return [c.emit(llvm.LoadOp(ptr, t, alignment=element_size(t)))]


@converts(memref.StoreOp)
def _store(op: memref.StoreOp, c: KernelConverter):
    ptr = _address(c, op.memref, op.indices)
    t = op.value.type
    c.emit(llvm.StoreOp(c.v(op.value), ptr, alignment=element_size(t)))
    return []


@converts(vector.LoadOp)
def _vector_load(op: vector.LoadOp, c: KernelConverter):
    ptr, t, size = _whole_vector(op, op.result.type, c)
    return [c.emit(llvm.LoadOp(ptr, t, alignment=size))]


@converts(vector.StoreOp)
def _vector_store(op: vector.StoreOp, c: KernelConverter):
    ptr, _, size = _whole_vector(op, op.vector.type, c)
    c.emit(llvm.StoreOp(c.v(op.vector), ptr, alignment=size))
    return []


def _whole_vector(
    op: vector.LoadOp | vector.StoreOp, t, c: KernelConverter
) -> tuple[SSAValue, VectorType, int]:
    """A 1-D vector of consecutive elements is loaded or stored whole, aligned to its
    size (its producer guarantees the address is): the address, the type, the
    size in bytes."""
    assert isinstance(t, VectorType)
    if t.get_num_dims() != 1:
        raise PassError(op, f"only 1-D vectors are loaded and stored whole, got {t}")
    ptr = _address(c, op.base, op.indices)
    return ptr, t, t.get_shape()[0] * element_size(t.get_element_type())


@converts(ElementPointerOp)
def _element_pointer(op: ElementPointerOp, c: KernelConverter):
    return [_address(c, op.memref, op.indices)]


@converts(memref.AllocaOp)
def _alloca(op: memref.AllocaOp, c: KernelConverter):
    t = op.memref.type
    assert isinstance(t, MemRefType)
    count = llvm.ConstantOp(IntegerAttr(math.prod(t.get_shape()), 64), IntegerType(64))
    element = t.get_element_type()
    alloca = llvm.AllocaOp(count, element, alignment=max(element_size(element), 4))
    c.entry_ops += [count, alloca]
    return [alloca.res]


@converts(memref.DeallocOp)
def _dealloc(op: Operation, c: KernelConverter):
    return []
