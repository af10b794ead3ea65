"""memref ops, and the checked element access every load and store shares.

A memref is a numpy array of its shape and element type (a view for subviews). Every
access is checked against the shape: numpy would wrap a negative index around and
raise a bare IndexError past the end, where we want the op and the indices named. A
check is left out only where the loop bounds prove the index in range.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import memref, vector
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    IndexType,
    IntegerType,
    MemRefType,
    UnrankedMemRefType,
    VectorType,
)
from xdsl.ir import Operation

from affinec.dialects.affine_memory import PrefetchOp as AffinePrefetchOp
from affinec.dialects.affinec import ElementPointerOp
from affinec.dialects.gpu_common import WORKGROUP_ADDRESS_SPACE, memory_space
from affinec.dialects.memref import CastOp as MemRefCastOp
from affinec.dialects.memref import PrefetchOp as MemRefPrefetchOp
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.scalars import python_int
from affinec.interpreter.shared_memory import SharedArray, SharedView, shared_subview
from affinec.interpreter.support import (
    InterpreterError,
    Size,
    access_shape,
    memref_shape,
    numpy_dtype,
    out_of_bounds,
    poisoned,
    shape_text,
)
from affinec.ir.affine_exprs import Interval
from affinec.ir.ranges import value_range


def index_tuple(
    w: FunctionWriter,
    op: Operation,
    indices: Sequence[str],
    ranges: Sequence[Interval | None],
    shape: Sequence[Size],
    *,
    padded: bool = False,
    in_bounds: frozenset[int] = frozenset(),
) -> tuple[str, str | None]:
    """Write the index computation of an access; return the numpy index and the
    in-bounds condition (None when always in bounds).

    Unpadded accesses get a check that raises; for padded ones the caller uses the
    returned condition to read zero instead, except along the dimensions a padded
    load claims `in_bounds`, where the claim is checked as an unpadded access.
    """
    names = named_indices(w, indices)
    strict: list[str] = []
    conditions: list[str] = []
    for k, (name, known, dim) in enumerate(zip(names, ranges, shape, strict=True)):
        if not proven_inside(known, dim):
            (strict if not padded or k in in_bounds else conditions).append(
                f"0 <= {name} < {dim}"
            )
    index = f"({', '.join(names)}{',' * (len(names) == 1)})" if names else "()"
    if strict:
        with w.indented(f"if not ({' and '.join(strict)}):"):
            w.line(
                f"{w.global_(out_of_bounds, 'oob')}({w.op_ref(op)}, {index}, "
                f"{shape_text(shape)})"
            )
    return index, " and ".join(conditions) if conditions else None


def named_indices(w: FunctionWriter, indices: Sequence[str]) -> list[str]:
    """The index expressions of an access, each computed once: a name or a literal
    as it is, anything else into a fresh local."""
    names = []
    for k, expr in enumerate(indices):
        if not (expr.isidentifier() or expr.lstrip("-").isdigit()):
            name = w.fresh(f"i{k}")
            w.line(f"{name} = {expr}")
            expr = name
        names.append(expr)
    return names


def proven_inside(known: Interval | None, dim: Size) -> bool:
    """Whether an index of range `known` lies in `[0, dim)` (no check needed; a
    dynamic size proves nothing)."""
    return (
        isinstance(dim, int) and known is not None and known[0] >= 0 and known[1] < dim
    )


def emit_load(
    w: FunctionWriter,
    op: Operation,
    array: str,
    indices: Sequence[str],
    ranges: Sequence[Interval | None],
    shape: Sequence[Size],
    *,
    padded: bool = False,
    in_bounds: frozenset[int] = frozenset(),
) -> None:
    """`result = array[indices]`, checked (or reading zero, when padded)."""
    index, condition = index_tuple(
        w, op, indices, ranges, shape, padded=padded, in_bounds=in_bounds
    )
    result = w.define(op.results[0])
    read = f"{array}[{index}]"
    if isinstance(op.results[0].type, IntegerType | IndexType):
        # integers are Python ints (`scalars`), not numpy's, which overflow
        read = f"{python_int(op.results[0].type)}({read})"
    if condition is None:
        w.line(f"{result} = {read}")
    else:
        zero = w.global_(numpy_dtype(op.results[0].type).type(0), "zero")
        w.line(f"{result} = {read} if {condition} else {zero}")


def emit_store(
    w: FunctionWriter,
    op: Operation,
    value: str,
    array: str,
    indices: Sequence[str],
    ranges: Sequence[Interval | None],
    shape: Sequence[Size],
) -> None:
    index, _ = index_tuple(w, op, indices, ranges, shape)
    w.line(f"{array}[{index}] = {value}")


def emit_vector_access(
    w: FunctionWriter,
    op: Operation,
    array: str,
    indices: Sequence[str],
    ranges: Sequence[Interval | None],
    shape: Sequence[Size],
    width: int,
    value: str | None = None,
) -> None:
    """A 1-D vector of `width` elements along the innermost dimension from
    `indices`, its first and last elements checked: `array[run] = value`, or, with
    no value, `result = array[run]`."""
    index, _ = index_tuple(w, op, indices, ranges, shape)
    first = w.fresh("first")
    w.line(f"{first} = {index}")
    with w.indented(f"if not {first}[-1] + {width} <= {shape[-1]}:"):
        last = f"{first}[:-1] + ({first}[-1] + {width - 1},)"
        w.line(
            f"{w.global_(out_of_bounds, 'oob')}({w.op_ref(op)}, {last}, "
            f"{shape_text(shape)})"
        )
    run = f"{first}[:-1] + (slice({first}[-1], {first}[-1] + {width}),)"
    if value is None:
        w.line(f"{w.define(op.results[0])} = {array}[{run}].copy()")
    else:
        w.line(f"{array}[{run}] = {value}")


def vector_width(op: Operation, value) -> int:
    """The length of a 1-D vector value (what vector stores write)."""
    t = value.type
    if not isinstance(t, VectorType) or t.get_num_dims() != 1:
        raise InterpreterError(f"expected a 1-D vector, got {t}", op)
    return t.get_shape()[0]


def memref_type(op: Operation, value) -> MemRefType:
    t = value.type
    if not isinstance(t, MemRefType):
        raise InterpreterError(f"expected a memref, got {t}", op)
    return t


def _indexed(w: FunctionWriter, op: Operation, ref, indices) -> tuple:
    """The array, indices, their ranges and the shape of an access through SSA
    indices (memref.load/store, vector.store)."""
    t = memref_type(op, ref)
    ranges = [value_range(v, w.ranges) for v in indices]
    return w[ref], w.names(indices), ranges, access_shape(t, w[ref])


@emits(memref.LoadOp)
def _load(op: memref.LoadOp, w: FunctionWriter) -> None:
    emit_load(w, op, *_indexed(w, op, op.memref, op.indices))


@emits(memref.StoreOp)
def _store(op: memref.StoreOp, w: FunctionWriter) -> None:
    emit_store(w, op, w[op.value], *_indexed(w, op, op.memref, op.indices))


@emits(vector.StoreOp)
def _vector_store(op: vector.StoreOp, w: FunctionWriter) -> None:
    width = vector_width(op, op.vector)
    indexed = _indexed(w, op, op.base, op.indices)
    emit_vector_access(w, op, *indexed, width, value=w[op.vector])


@emits(vector.LoadOp)
def _vector_load(op: vector.LoadOp, w: FunctionWriter) -> None:
    width = vector_width(op, op.result)
    emit_vector_access(w, op, *_indexed(w, op, op.base, op.indices), width)


@emits(memref.AllocOp, memref.AllocaOp)
def _alloc(op: memref.AllocOp | memref.AllocaOp, w: FunctionWriter) -> None:
    t = memref_type(op, op.memref)
    if op.dynamic_sizes:
        raise InterpreterError("dynamic sizes are not supported", op)
    shape = memref_shape(t)
    dtype = numpy_dtype(t.get_element_type())
    w.line(
        f"{w.define(op.memref)} = {w.global_(poisoned, 'poisoned')}({shape}, "
        f"{w.global_(dtype, 'dtype')})"
    )


@emits(memref.DeallocOp)
def _dealloc(op: memref.DeallocOp, w: FunctionWriter) -> None:
    pass


@emits(MemRefPrefetchOp, AffinePrefetchOp)
def _prefetch(op: MemRefPrefetchOp | AffinePrefetchOp, w: FunctionWriter) -> None:
    pass  # a hint to the cache: nothing to compute (and never out of bounds)


@emits(memref.DimOp)
def _dim(op: memref.DimOp, w: FunctionWriter) -> None:
    w.line(f"{w.define(op.result)} = {w[op.source]}.shape[{w[op.index]}]")


@emits(memref.CastOp, MemRefCastOp)
def _cast(op: memref.CastOp | MemRefCastOp, w: FunctionWriter) -> None:
    if isinstance(op.dest.type, UnrankedMemRefType):  # the array keeps its shape
        w.alias(op.dest, w[op.source])
        return
    source, dest = memref_type(op, op.source), memref_type(op, op.dest)
    # xDSL's verifier lets a cast change a static size (MLIR's does not).
    if memref_shape(source) != memref_shape(dest):
        raise InterpreterError(f"casts {source} to {dest}, another shape", op)
    w.alias(op.dest, w[op.source])


@emits(memref.SubviewOp)
def _subview(op: memref.SubviewOp, w: FunctionWriter) -> None:
    """A numpy view: `source[o0:o0+s0*t0:t0, ...]`, rank-reduced where the type drops
    unit dimensions."""
    offsets = _mixed(op.static_offsets.get_values(), w.names(op.offsets))
    sizes = _mixed(op.static_sizes.get_values(), w.names(op.sizes))
    strides = _mixed(op.static_strides.get_values(), w.names(op.strides))
    source_shape = memref_shape(memref_type(op, op.source))
    result_shape = memref_shape(memref_type(op, op.result))
    slices = [
        f"{o}:({o}) + ({s}) * ({t}):{t}"
        for o, s, t in zip(offsets, sizes, strides, strict=True)
    ]
    check = w.global_(_check_subview, "check_subview")
    w.line(
        f"{check}({w.op_ref(op)}, {source_shape}, [{', '.join(offsets)}], "
        f"[{', '.join(sizes)}], [{', '.join(strides)}])"
    )
    if memory_space(memref_type(op, op.source)) == WORKGROUP_ADDRESS_SPACE:
        # a block's shared buffer: the view is an address (a TMA destination)
        fn = w.global_(shared_subview, "shared_subview")
        w.line(
            f"{w.define(op.result)} = {fn}({w.op_ref(op)}, {w[op.source]}, "
            f"({', '.join(offsets)},), {result_shape})"
        )
        return
    view = f"{w[op.source]}[{', '.join(slices)}]"
    w.line(f"{w.define(op.result)} = {view}.reshape({result_shape})")


@emits(memref.ReinterpretCastOp)
def _reinterpret_cast(op: memref.ReinterpretCastOp, w: FunctionWriter) -> None:
    """The same buffer at an offset, sizes and strides of its own: for a block's
    shared buffer, an address (a TMA destination); else a numpy view of the
    buffer's elements."""
    (offset,) = _mixed(op.static_offsets.get_values(), w.names(op.offsets))
    sizes = _mixed(op.static_sizes.get_values(), w.names(op.sizes))
    strides = _mixed(op.static_strides.get_values(), w.names(op.strides))
    fn = w.global_(_reinterpreted, "reinterpreted")
    w.line(
        f"{w.define(op.result)} = {fn}({w.op_ref(op)}, {w[op.source]}, {offset}, "
        f"({', '.join(sizes)},), ({', '.join(strides)},))"
    )


def _reinterpreted(op, source, offset: int, sizes: tuple, strides: tuple):
    flat = source.flat_view() if hasattr(source, "flat_view") else source.reshape(-1)
    span = offset + sum((n - 1) * t for n, t in zip(sizes, strides, strict=True))
    if offset < 0 or any(t < 0 for t in strides) or span >= len(flat):
        raise InterpreterError(
            f"views elements {offset} to {span} of a buffer of {len(flat)}", op
        )
    if isinstance(flat, SharedArray):
        return SharedView(flat, offset, tuple(sizes), tuple(strides))
    e = flat.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        flat[offset:], shape=sizes, strides=tuple(t * e for t in strides)
    )


def _mixed(static: Sequence[int], dynamic: list[str]) -> list[str]:
    """Static sizes and offsets as text, with the dynamic ones' names spliced in."""
    values = iter(dynamic)
    return [next(values) if s == DYNAMIC_INDEX else str(s) for s in static]


def _check_subview(op, shape, offsets, sizes, strides) -> None:
    for d, (n, o, s, t) in enumerate(zip(shape, offsets, sizes, strides, strict=True)):
        if o < 0 or s < 0 or t <= 0 or (s > 0 and o + (s - 1) * t >= n):
            raise InterpreterError(
                f"dimension {d} takes offset {o}, size {s}, stride {t} "
                f"of a dimension of size {n}",
                op,
            )


# -- pointers into memrefs --------------------------------------------------------------


def flat_pointer(op: Operation, array, indices: Sequence[int]) -> tuple:
    """A memref element as a pointer: (the buffer flattened, the element's row-major
    offset), unchecked like a `getelementptr`. A shared buffer's flat view keeps its
    race records."""
    if array.__class__ is np.ndarray:
        if not array.flags.c_contiguous:
            raise InterpreterError("a pointer into a strided view", op)
        buffer = array.reshape(-1)
    elif (flat_view := getattr(array, "flat_view", None)) is not None:
        buffer = flat_view()
    elif array.flags.c_contiguous:
        buffer = array.reshape(-1)
    else:
        raise InterpreterError("a pointer into a strided view", op)
    offset = 0
    for index, dim in zip(indices, array.shape, strict=True):
        offset = offset * dim + index
    return buffer, offset


def checked_pointer(op: Operation, array, indices: Sequence[int]) -> tuple:
    """`flat_pointer`, with the indices checked against the memref's shape."""
    shape = array.shape
    for i, d in zip(indices, shape, strict=True):
        if not 0 <= i < d:
            out_of_bounds(op, tuple(indices), tuple(shape))
    return flat_pointer(op, array, indices)


@emits(ElementPointerOp)
def _element_pointer(op: ElementPointerOp, w: FunctionWriter) -> None:
    indices = ", ".join(w.names(op.indices))
    comma = "," * (len(op.indices) == 1)
    w.line(
        f"{w.define(op.result)} = {w.global_(flat_pointer, 'flat_pointer')}("
        f"{w.op_ref(op)}, {w[op.memref]}, ({indices}{comma}))"
    )
