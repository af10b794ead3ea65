"""The tile sizes of MLIR's `affine-loop-tile` (`mlir_tile_sizes`): `tile-size` for
every loop, else `tile-sizes` (cut or filled with 4 to the band's depth), else MLIR's
cache model: the band's memory footprint as `getMemoryFootprintBytes` counts it
(`footprint_bytes`, per memref the bounding box of its accesses times its element
size), `cache-size` KiB at a time, the excess spread evenly over the loops and each
size reduced to a divisor of its constant trip count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap

from affinec.dialects import affine
from affinec.ir.affine_exprs import linear_form
from affinec.transforms.affine.analysis import (
    compose_map,
    is_defined_inside,
    map_slots,
)
from affinec.transforms.affine.mlir_tile_bands import (
    ACCESSES,
    TilingRefused,
    constant_trip_count,
    enclosing_loops,
)
from affinec.transforms.affine.rewriting import as_substitution

DEFAULT_TILE_SIZE = 4
"""MLIR's `kDefaultTileSize`."""


Symbolic = frozenset[tuple[SSAValue, int]]
"""A sum of values defined outside the band, times factors."""


@dataclass(frozen=True)
class _Span:
    """An index's range: `symbolic + lo` to `symbolic + hi`, or unbounded (a loop
    variable whose trip count is not a constant reaches it)."""

    symbolic: Symbolic
    lo: int
    hi: int
    bounded: bool = True


def _linear(
    op: Operation, m: AffineMap, operands: Sequence[SSAValue], k: int
) -> tuple[dict[SSAValue, int], int]:
    expr, values = as_substitution(m, operands, k)
    form = linear_form(expr, len(values), 0)
    if form is None:
        raise TilingRefused(
            op,
            "the cache-size model of affine-loop-tile takes linear indices and bounds "
            "only (give tile-size or tile-sizes)",
        )
    coefficients: dict[SSAValue, int] = {}
    for v, c in zip(values, form[0], strict=True):
        if c:
            coefficients[v] = coefficients.get(v, 0) + c
    return coefficients, form[2]


def _iv_span(loop: affine.ForOp, root: affine.ForOp) -> _Span | None:
    """The values `loop`'s variable takes (None: the loop does not run)."""
    lower = map_slots(loop)[0]
    if any(is_defined_inside(v, root) for s in map_slots(loop) for v in s.operands):
        raise TilingRefused(
            loop,
            "the cache-size model of affine-loop-tile takes loops whose bounds do not "
            "depend on other loops of the band (give tile-size or tile-sizes)",
        )
    count = constant_trip_count(loop)
    if count is None or len(lower.map.results) != 1:
        return _Span(frozenset(), 0, 0, bounded=False)
    if count == 0:
        return None
    m, operands = compose_map(lower.map, lower.operands)
    coefficients, c = _linear(loop, m, operands, 0)
    span = (count - 1) * loop.step.value.data
    return _Span(frozenset(coefficients.items()), c, c + span)


def _access_spans(op: Operation, root: affine.ForOp) -> list[_Span] | None:
    """The range of each index of `op` as the loops around it run; None when one of
    them does not run."""
    ivs: dict[SSAValue, _Span] = {}
    for loop in enclosing_loops(op, root):
        span = _iv_span(loop, root)
        if span is None:
            return None
        ivs[loop.induction_variable] = span
    (slot,) = map_slots(op)
    m, operands = compose_map(slot.map, slot.operands)
    spans = []
    for k in range(len(m.results)):
        coefficients, c = _linear(op, m, operands, k)
        symbolic: dict[SSAValue, int] = {}
        lo = hi = c
        bounded = True
        for v, factor in coefficients.items():
            span = ivs.get(v)
            if span is None:
                symbolic[v] = symbolic.get(v, 0) + factor
                continue
            bounded &= span.bounded
            for w, f in span.symbolic:
                symbolic[w] = symbolic.get(w, 0) + factor * f
            ends = (factor * span.lo, factor * span.hi)
            lo, hi = lo + min(ends), hi + max(ends)
        spans.append(
            _Span(frozenset((v, f) for v, f in symbolic.items() if f), lo, hi, bounded)
        )
    return spans


def _extent(span: _Span, size: int) -> int | None:
    """The constant extent MLIR finds for an index of a memref dimension of `size`
    (negative: dynamic): the tightest of the access's and the memref's bounds."""
    candidates = []
    if span.bounded:
        candidates.append(span.hi - span.lo + 1)
    if size >= 0:
        candidates.append(size)
        if span.bounded and not span.symbolic:
            candidates.append(min(span.hi, size - 1) - max(span.lo, 0) + 1)
    return max(0, min(candidates)) if candidates else None


def _element_bytes(t: MemRefType) -> int:
    element = t.get_element_type()
    width = getattr(element, "bitwidth", None)
    if isinstance(element, IndexType):
        width = 64
    if width is None:
        width = getattr(getattr(element, "width", None), "data", 32)
    return max(1, -(-width // 8))


def footprint_bytes(band: Sequence[affine.ForOp]) -> int | None:
    """The bytes the band touches, as MLIR's `getMemoryFootprintBytes` counts them:
    per memref, the bounding box of its accesses (clipped to its static shape) times
    its element size. None where MLIR finds no constant size (an index a loop with
    a symbolic trip count reaches, in a dynamic dimension) or cannot unite two boxes
    (offsets by different symbols). `TilingRefused` where affinec cannot say."""
    root = band[0]
    boxes: dict[SSAValue, list[_Span]] = {}
    for op in root.walk():
        if not isinstance(op, ACCESSES):
            continue
        spans = _access_spans(op, root)
        if spans is None:
            continue
        old = boxes.setdefault(op.memref, spans)
        if old is spans:
            continue
        union = []
        for a, b in zip(old, spans, strict=True):
            if a.symbolic != b.symbolic:
                return None
            union.append(
                _Span(
                    a.symbolic,
                    min(a.lo, b.lo),
                    max(a.hi, b.hi),
                    a.bounded and b.bounded,
                )
            )
        boxes[op.memref] = union
    total = 0
    for memref, spans in boxes.items():
        t = memref.type
        assert isinstance(t, MemRefType)
        count = 1
        for span, size in zip(spans, t.get_shape(), strict=True):
            extent = _extent(span, size)
            if extent is None:
                return None
            count *= extent
        total += count * _element_bytes(t)
    return total


def _divisors_of_trip_counts(band: Sequence[affine.ForOp], sizes: list[int]) -> None:
    """MLIR's `adjustToDivisorsOfTripCounts`: each size the largest divisor of its
    loop's constant trip count not above the size (nor above half the count)."""
    for k, loop in enumerate(band):
        count = constant_trip_count(loop)
        if count is None:
            continue
        if count > 1 and sizes[k] > count // 2:
            sizes[k] = count // 2
        while sizes[k] > 0 and count % sizes[k] != 0:
            sizes[k] -= 1


def mlir_tile_sizes(
    band: Sequence[affine.ForOp],
    tile_size: int,
    tile_sizes: Sequence[int],
    cache_size_kib: int,
) -> list[int]:
    """MLIR's `LoopTiling::getTileSizes` for one band."""
    n = len(band)
    if tile_size:
        return [tile_size] * n
    if tile_sizes:
        return [*tile_sizes[:n], *[DEFAULT_TILE_SIZE] * (n - len(tile_sizes))]
    footprint = footprint_bytes(band)
    if footprint is None:
        sizes = [DEFAULT_TILE_SIZE] * n
        _divisors_of_trip_counts(band, sizes)
        return sizes
    excess = -(-footprint // (cache_size_kib * 1024))
    if excess <= 1:
        return [1] * n
    size = math.floor(excess ** (1.0 / n))
    sizes = []
    product = 1
    for k in range(n):
        sizes.append(size if k < n - 1 else max(1, excess // product))
        product *= sizes[-1]
    _divisors_of_trip_counts(band, sizes)
    return sizes
