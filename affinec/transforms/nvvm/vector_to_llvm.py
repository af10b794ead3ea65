"""Vectors, `ub.poison`, and the nvvm and llvm ops `convert-nvgpu-to-nvvm` leaves at
the gpu level, as llvm ops.

An n-D vector becomes, as in MLIR, LLVM arrays of its innermost 1-D vector:
`vector<4x2xf16>` is `!llvm.array<4 x vector<2xf16>>` (`KernelConverter.type`). So
`vector.extract %v[1, 0]` is an `llvm.extractvalue` of row 1 and an
`llvm.extractelement` of its element 0, `vector.insert` the reverse, and a constant or
a broadcast is built element by element from `llvm.mlir.undef` (or is
`llvm.mlir.zero`). Positions into the outer dimensions must be constants (LLVM
arrays take no dynamic index); the innermost may be dynamic.

nvvm ops and the llvm ops already there keep their form, with operands converted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import product

from xdsl.dialects import llvm, ub, vector
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from affinec.base.diagnostics import PassError
from affinec.base.element_types import intrinsic_suffix
from affinec.dialects import llvm as llvm_extensions
from affinec.dialects import nvvm
from affinec.transforms.nvvm.converter import KernelConverter, converts

# -- ops that keep their form -----------------------------------------------------------

_KEPT = (
    nvvm.IntrinsicOp,
    llvm.ExtractValueOp,
    llvm.InsertValueOp,
    llvm.BitcastOp,
    llvm.UndefOp,
    llvm.ZeroOp,
    llvm.InsertElementOp,
    llvm_extensions.ExtractElementOp,
    llvm_extensions.AddrSpaceCastOp,
    llvm.PtrToIntOp,
    llvm.InlineAsmOp,
    nvvm.PtxOp,
)


@converts(*_KEPT)
def _kept(op: Operation, c: KernelConverter):
    new = type(op).create(
        operands=[c.v(v) for v in op.operands],
        result_types=[c.type(r.type) for r in op.results],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    c.emit(new)
    return list(new.results)


# -- building and taking apart ----------------------------------------------------------


def _index(c: KernelConverter, position: int | SSAValue) -> SSAValue:
    if isinstance(position, int):
        return c.int_constant(position, i32)
    return c.v(position)


def _rows(t: VectorType) -> list[tuple[int, ...]]:
    """The positions of the 1-D rows of an n-D vector type, in order."""
    return list(product(*(range(d) for d in t.get_shape()[:-1])))


@lru_cache(maxsize=1024)
def _position(row: tuple[int, ...]) -> DenseArrayBase:
    """A row's position as `llvm.extractvalue` takes it, made once (an immutable
    attribute, asked for by every access to a row)."""
    return DenseArrayBase.from_list(i64, list(row))


def extract_row(c: KernelConverter, value: SSAValue, row: Sequence[int], t):
    """Row `row` (a position into the outer dimensions) of a lowered vector."""
    if not row:
        return value
    op = llvm.ExtractValueOp(_position(tuple(row)), value, t)
    return c.emit(op)


def insert_row(c: KernelConverter, value: SSAValue, row: Sequence[int], part):
    if not row:
        return part
    return c.emit(llvm.InsertValueOp(_position(tuple(row)), value, part))


def build_vector(
    c: KernelConverter, t: VectorType, element: Callable[[tuple[int, ...]], SSAValue]
) -> SSAValue:
    """The lowered vector of type `t` whose element at each position is
    `element(position)`."""
    row_type = c.row_type(t)
    result = c.emit(llvm.UndefOp(c.type(t)))
    for row in _rows(t):
        part = c.emit(llvm.UndefOp(row_type))
        for k in range(t.get_shape()[-1]):
            part = c.emit(
                llvm.InsertElementOp(part, element((*row, k)), c.int_constant(k, i32))
            )
        result = insert_row(c, result, row, part)
    assert result is not None
    return result


def elementwise(
    c: KernelConverter,
    t: VectorType,
    operands: Sequence[SSAValue],
    make: Callable[..., Operation],
) -> SSAValue:
    """Apply `make` (building an llvm op on 1-D vectors) to each row of lowered n-D
    vector operands, for a result of type `t` (a cast's operands have rows of
    another element type: each is read as its own)."""
    if t.get_num_dims() == 1:
        return c.emit(make(*operands))  # pyright: ignore[reportReturnType]
    result = c.emit(llvm.UndefOp(c.type(t)))
    for row in _rows(t):
        parts = [extract_row(c, v, row, _innermost(v.type)) for v in operands]
        result = insert_row(c, result, row, c.emit(make(*parts)))
    assert result is not None
    return result


def intrinsic_call(
    c: KernelConverter, name: str, operands: Sequence[SSAValue], t: Attribute
) -> SSAValue:
    """A call of the overloaded LLVM intrinsic `name` (`llvm.fma`) on scalars or
    vectors of type `t`, mangled for the type (`llvm.fma.v2f16`); on an n-D vector,
    one call per row."""
    if isinstance(t, VectorType) and t.get_num_dims() > 1:
        row = VectorType(t.get_element_type(), [t.get_shape()[-1]])
        return elementwise(c, t, operands, lambda *rows: _call(name, list(rows), row))
    return c.emit(_call(name, list(operands), t))


def _call(name: str, operands: list[SSAValue], t: Attribute) -> Operation:
    return llvm.CallIntrinsicOp(f"{name}.{intrinsic_suffix(t)}", operands, [t])


def _innermost(t: Attribute) -> Attribute:
    """The 1-D vector type of the rows of a lowered n-D vector type (arrays of
    arrays of rows)."""
    while isinstance(t, llvm.LLVMArrayType):
        t = t.type
    return t


def _static(op: Operation, positions: list, count: int) -> list[int]:
    outer = positions[:count]
    if any(not isinstance(p, int) for p in outer):
        raise PassError(
            op,
            "only the innermost position of an n-D vector may be dynamic (LLVM "
            "arrays take constant indices)",
        )
    return outer  # pyright: ignore[reportReturnType]


@converts(vector.ExtractOp)
def _extract(op: vector.ExtractOp, c: KernelConverter):
    t = op.vector.type
    assert isinstance(t, VectorType)
    positions = op.get_mixed_position()
    rank = t.get_num_dims()
    source = c.v(op.vector)
    if len(positions) < rank:
        outer = _static(op, positions, len(positions))
        return [extract_row(c, source, outer, c.type(op.result.type))]
    outer = _static(op, positions, rank - 1)
    row_type = c.row_type(t)
    row = extract_row(c, source, outer, row_type)
    return [c.emit(llvm_extensions.ExtractElementOp(row, _index(c, positions[-1])))]


@converts(vector.InsertOp)
def _insert(op: vector.InsertOp, c: KernelConverter):
    t = op.result.type
    assert isinstance(t, VectorType)
    positions = op.get_mixed_position()
    rank = t.get_num_dims()
    dest, source = c.v(op.dest), c.v(op.source)
    if len(positions) < rank:
        return [insert_row(c, dest, _static(op, positions, len(positions)), source)]
    outer = _static(op, positions, rank - 1)
    row_type = c.row_type(t)
    row = extract_row(c, dest, outer, row_type)
    row = c.emit(llvm.InsertElementOp(row, source, _index(c, positions[-1])))
    return [insert_row(c, dest, outer, row)]


@converts(vector.BroadcastOp)
def _broadcast(op: vector.BroadcastOp, c: KernelConverter):
    t = op.vector.type
    assert isinstance(t, VectorType)
    if isinstance(op.source.type, VectorType):
        raise PassError(op, "only scalars are broadcast to vectors here")
    value = c.v(op.source)
    return [build_vector(c, t, lambda _: value)]


@converts(ub.PoisonOp)
def _poison(op: ub.PoisonOp, c: KernelConverter):
    return [c.emit(llvm.UndefOp(c.type(op.result.type)))]


def vector_constant(
    c: KernelConverter, op: Operation, value: DenseIntOrFPElementsAttr
) -> SSAValue:
    """A dense vector constant: `llvm.mlir.zero` when all zero, else built."""
    t = value.type
    assert isinstance(t, VectorType)
    values = list(value.get_values())
    if all(v == 0 for v in values):
        return c.emit(llvm.ZeroOp(result_types=[c.type(t)]))  # pyright: ignore
    shape = t.get_shape()
    element = t.get_element_type()
    lowered = c.type(element)

    def constant(position: tuple[int, ...]) -> SSAValue:
        flat = 0
        for p, d in zip(position, shape, strict=True):
            flat = flat * d + p
        v = values[flat]
        attr: Attribute = (
            FloatAttr(v, element)  # pyright: ignore[reportArgumentType]
            if isinstance(v, float)
            else IntegerAttr(v, lowered)  # pyright: ignore[reportArgumentType]
        )
        return c.emit(llvm.ConstantOp(attr, lowered))  # pyright: ignore

    return build_vector(c, t, constant)
