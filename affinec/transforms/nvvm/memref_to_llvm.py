"""memref ops as llvm ops: a memref is a bare pointer in its address space, an
access a `getelementptr` at its row-major offset, in the parts `address_parts`
finds."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from xdsl.dialects import llvm, memref, vector
from xdsl.dialects.builtin import (
    IntegerAttr,
    IntegerType,
    MemRefType,
    VectorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects.affinec import ElementPointerOp
from affinec.dialects.llvm import GEPOp
from affinec.transforms.nvvm.address_parts import LIMIT
from affinec.transforms.nvvm.converter import KernelConverter, converts


def _address(
    c: KernelConverter, ref: SSAValue, indices: Sequence[SSAValue]
) -> SSAValue:
    """The element's address: `base + invariant + varying + constant`, one
    `getelementptr` a part (`address_parts`), or, where the parts might not hold
    their true values, the row-major offset as one sum."""
    t = ref.type
    assert isinstance(t, MemRefType)
    base = c.v(ref)
    shape = t.get_shape()
    if not indices:
        return base
    element = t.get_element_type()
    strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
    size = math.prod(shape) if all(d >= 0 for d in shape) else LIMIT
    parts = c.addresses.split(list(indices), strides, size)
    if parts is None:
        offsets: list[SSAValue | int] = [_sum(c, zip(indices, strides, strict=True))]
    else:
        offsets = [
            offset
            for part in (parts.invariant, parts.varying, parts.unrolled)
            if (offset := _sum(c, part.items())) is not None
        ]
        if parts.constant or not offsets:
            offsets.append(parts.constant)
    # `inbounds` only on the whole offset: a part of it alone need not stay in the
    # buffer
    whole = len(offsets) == 1
    address = base
    for offset in offsets:
        address = c.emit(_offset(c, address, element, offset, whole))
    return address


GEP_CONSTANT_INDICES = range(-(2**31) + 1, 2**31)
"""The offsets a `getelementptr` holds as constants: 32-bit ones, but -2**31, which
marks an index given as a value (`llvm.GEP_USE_SSA_VAL`). Others (an access far
out of its buffer, which only a hand-written module makes) are given as values."""


def _sum(c: KernelConverter, terms: Iterable[tuple[SSAValue, int]]) -> SSAValue | None:
    """`sum(coefficient * value)` over `terms`, in the converted values."""
    total: SSAValue | None = None
    for value, coefficient in terms:
        term = c.v(value)
        if coefficient != 1:
            term = c.emit(llvm.MulOp(term, c.int_constant(coefficient, term.type)))
        total = term if total is None else c.emit(llvm.AddOp(total, term))
    return total


def _offset(
    c: KernelConverter,
    base: SSAValue,
    element: Attribute,
    offset: SSAValue | int,
    inbounds: bool,
) -> GEPOp:
    """`base + offset` elements: a constant index where `GEP_CONSTANT_INDICES`
    holds the offset, else a value."""
    if isinstance(offset, int) and offset not in GEP_CONSTANT_INDICES:
        offset = c.int_constant(offset)
    if isinstance(offset, int):
        return GEPOp(
            base,
            [offset],
            element,
            result_type=base.type,  # pyright: ignore[reportArgumentType]
            inbounds=inbounds,
        )
    return GEPOp(
        base,
        [llvm.GEP_USE_SSA_VAL],
        element,
        ssa_indices=[offset],
        result_type=base.type,  # pyright: ignore[reportArgumentType]
        inbounds=inbounds,
    )


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
