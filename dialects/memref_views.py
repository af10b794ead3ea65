"""MLIR's checks of memref views that xDSL's verifiers lack: which types a
`memref.cast` may change between, the result type and the bounds of a
`memref.subview`, and the result type of a `memref.reinterpret_cast`.

    %a = memref.cast %m : memref<8xf32> to memref<4xf32>       // refused
    %s = memref.subview %m[1, 2] [4, 4] [1, 1]
           : memref<8x8xf32> to memref<4x4xf32>                // refused:
    // the view's rows are 8 apart and start at element 10, so its type is
    // memref<4x4xf32, strided<[8, 1], offset: 10>>

Without them such a module verified: the interpreter takes a subview as a numpy
slice of its source (ignoring the result type's layout) while code that reads
the type addresses other elements, and a slice past the source's end is cut short.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations
from typing import NoReturn

from xdsl.dialects import memref as xdsl_memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    MemRefType,
    StridedLayoutAttr,
    UnrankedMemRefType,
)
from xdsl.ir import Attribute, Operation

from affinec.base.diagnostics import OP_CHECKS, verification_error

Strides = tuple[Sequence[int | None], int | None]
"""A layout's strides and offset, None where dynamic (MLIR's `getStridesAndOffset`)."""


def _strides_and_offset(t: MemRefType) -> Strides | None:
    """None when the layout is not strided (an affine map)."""
    strides = t.get_strides()
    return None if strides is None else (strides, t.get_offset())


def cast_compatible(source: Attribute, dest: Attribute) -> bool:
    """Whether `memref.cast` may go from `source` to `dest` (MLIR's
    `areCastCompatible`): the same element type and memory space; between ranked
    types the same rank, sizes, strides and offset wherever both are static;
    ranked to unranked or back, but not unranked to unranked."""
    ranked = isinstance(source, MemRefType), isinstance(dest, MemRefType)
    if not all(isinstance(t, MemRefType | UnrankedMemRefType) for t in (source, dest)):
        return False
    if source.element_type != dest.element_type:  # pyright: ignore
        return False
    if source.memory_space != dest.memory_space:  # pyright: ignore
        return False
    if not all(ranked):
        return any(ranked)
    assert isinstance(source, MemRefType) and isinstance(dest, MemRefType)
    if len(source.get_shape()) != len(dest.get_shape()):
        return False
    shapes = zip(source.get_shape(), dest.get_shape(), strict=True)
    if not all(_agree(a, b) for a, b in shapes):
        return False
    if source.layout == dest.layout:
        return True
    a, b = _strides_and_offset(source), _strides_and_offset(dest)
    if a is None or b is None or len(a[0]) != len(b[0]):
        return False
    pairs = [*zip(a[0], b[0], strict=True), (a[1], b[1])]
    return all(x is None or y is None or x == y for x, y in pairs)


def _agree(a: int, b: int) -> bool:
    return DYNAMIC_INDEX in (a, b) or a == b


def _subview_checks(op: Operation) -> None:
    """MLIR's checks of a subview, in its order and words (errors that do not name
    the op): the memory space, a strided source, the result's rank, sizes and
    element type (dropping unit dimensions allowed), its offset and strides, then
    the slice within the source's bounds."""
    assert isinstance(op, xdsl_memref.SubviewOp)
    source, result = op.source.type, op.result.type
    if not isinstance(source, MemRefType) or not isinstance(result, MemRefType):
        return  # xDSL's constraints say so
    if source.memory_space != result.memory_space:
        _refuse(
            op,
            f"different memory spaces specified for base memref type '{source}' and "
            f"subview memref type '{result}'",
        )
    layout = _strides_and_offset(source)
    if layout is None:
        _refuse(op, f"base type '{source}' is not strided")
    offsets = op.static_offsets.get_values()
    sizes = op.static_sizes.get_values()
    steps = op.static_strides.get_values()
    rank = len(source.get_shape())
    _check_counts(op, offsets, sizes, steps, (rank, rank))
    if len(result.get_shape()) > len(source.get_shape()):
        _refuse(
            op,
            "expected result rank to be smaller or equal to the source rank, but "
            f"got '{result}'",
        )
    expected = _slice_type(source, layout, offsets, sizes, steps)
    reductions = list(_reductions(expected.get_shape(), result.get_shape()))
    mismatch = None
    if not reductions:
        mismatch = "sizes"
    elif expected.element_type != result.element_type:
        _refuse(
            op,
            f"expected result element type to be '{expected.element_type}', but got "
            f"'{result}'",
        )
    elif not _strides_match(expected, result, reductions):
        mismatch = "layout"
    if mismatch is not None:
        _refuse(
            op,
            f"expected result type to be '{expected}' or a rank-reduced version. "
            f"(mismatch of result {mismatch}), but got '{result}'",
        )
    _check_bounds(op, source.get_shape(), offsets, sizes, steps)


def _slice_type(
    source: MemRefType,
    layout: Strides,
    offsets: Sequence[int],
    sizes: Sequence[int],
    steps: Sequence[int],
) -> MemRefType:
    """The type of the slice before any unit dimension is dropped (MLIR's
    `SubViewOp::inferResultType`): strides the source's times the steps, the
    offset the source's plus each offset times its stride."""
    strides, offset = layout
    scaled = [
        None if s is None or t == DYNAMIC_INDEX else s * t
        for s, t in zip(strides, steps, strict=True)
    ]
    for o, s in zip(offsets, strides, strict=True):
        offset = (
            None
            if offset is None or s is None or o == DYNAMIC_INDEX
            else offset + o * s
        )
    return MemRefType(
        source.element_type,
        sizes,
        StridedLayoutAttr(scaled, offset),
        source.memory_space,
    )


def _reductions(shape: Sequence[int], reduced: Sequence[int]) -> Iterator[set[int]]:
    """Each set of unit dimensions of `shape` whose removal leaves `reduced`."""
    units = [k for k, size in enumerate(shape) if size == 1]
    for dropped in combinations(units, len(shape) - len(reduced)):
        kept = [size for k, size in enumerate(shape) if k not in dropped]
        if kept == list(reduced):
            yield set(dropped)


def _strides_match(
    expected: MemRefType, result: MemRefType, reductions: list[set[int]]
) -> bool:
    """The result's offset is the slice's, and its strides are those of the
    dimensions one of the possible reductions keeps (MLIR picks one by the
    strides; any that matches means the same elements)."""
    want = _strides_and_offset(expected)
    got = _strides_and_offset(result)
    if want is None or got is None or want[1] != got[1]:
        return False
    return any(
        [s for k, s in enumerate(want[0]) if k not in dropped] == list(got[0])
        for dropped in reductions
    )


def _check_bounds(
    op: Operation,
    shape: Sequence[int],
    offsets: Sequence[int],
    sizes: Sequence[int],
    steps: Sequence[int],
) -> None:
    """Each static offset within its dimension, and the last element the slice
    reads with it (MLIR's `verifyInBoundsSlice`)."""
    for k, (dim, offset, size, step) in enumerate(
        zip(shape, offsets, sizes, steps, strict=True)
    ):
        if DYNAMIC_INDEX in (dim, offset):
            continue
        if offset >= dim:
            _refuse(op, f"offset {k} is out-of-bounds: {offset} >= {dim}")
        if DYNAMIC_INDEX in (size, step):
            continue
        last = offset + (size - 1) * step
        if last >= dim:
            _refuse(
                op, f"slice along dimension {k} runs out-of-bounds: {last} >= {dim}"
            )


def _reinterpret_cast_checks(op: Operation) -> None:
    """MLIR's checks of `memref.reinterpret_cast` that xDSL's verifier lacks (it
    checks the sizes): the source's memory space and element type, and a result
    type whose offset and strides are the op's wherever both are static."""
    assert isinstance(op, xdsl_memref.ReinterpretCastOp)
    source, result = op.source.type, op.result.type
    if not isinstance(source, MemRefType) or not isinstance(result, MemRefType):
        return
    for what, a, b in (
        ("memory spaces", source.memory_space, result.memory_space),
        ("element types", source.element_type, result.element_type),
    ):
        if a != b:
            _refuse(
                op,
                f"different {what} specified for source type '{source}' and result "
                f"memref type '{result}'",
            )
    sizes, steps = op.static_sizes.get_values(), op.static_strides.get_values()
    offsets = op.static_offsets.get_values()
    _check_counts(op, offsets, sizes, steps, (1, len(result.get_shape())))
    layout = _strides_and_offset(result)
    if layout is None:
        return  # an affine map: the interpreter and the lowering refuse it
    strides, offset = layout
    (expected,) = offsets
    if offset is not None and offset != expected:
        _refuse(
            op,
            f"expected result type with offset = {_said(expected)} instead of {offset}",
        )
    for k, (stride, step) in enumerate(zip(strides, steps, strict=False)):
        if stride is not None and stride != step:
            _refuse(
                op,
                f"expected result type with stride = {_said(step)} instead of "
                f"{stride} in dim = {k}",
            )


def _check_counts(
    op: Operation,
    offsets: Sequence[int],
    sizes: Sequence[int],
    steps: Sequence[int],
    ranks: tuple[int, int],
) -> None:
    """MLIR's first checks of a view's offsets, sizes and strides: as many sizes
    as strides, and as offsets unless there is one (a reinterpreting cast's base
    offset), then as many offsets and sizes as `ranks` says."""
    pairs = [("sizes", sizes, "strides", steps)]
    if len(offsets) != 1:
        pairs.insert(0, ("offsets", offsets, "sizes", sizes))
    for a, xs, b, ys in pairs:
        if len(xs) != len(ys):
            _refuse(
                op,
                f"expected mixed {a} rank to match mixed {b} rank ({len(xs)} vs "
                f"{len(ys)}) so the rank of the result type is well-formed.",
            )
    for what, values, rank in (
        ("offset", offsets, ranks[0]),
        ("size", sizes, ranks[1]),
    ):
        if len(values) != rank:
            _refuse(op, f"expected {rank} {what} values, got {len(values)}")


def _said(value: int) -> str:
    return "dynamic" if value == DYNAMIC_INDEX else str(value)


def _refuse(op: Operation, message: str) -> NoReturn:
    raise verification_error(op, message, names_op=False)  # MLIR's `emitError`


OP_CHECKS[xdsl_memref.SubviewOp] = _subview_checks
OP_CHECKS[xdsl_memref.ReinterpretCastOp] = _reinterpret_cast_checks
