"""MLIR's loop tiling of perfect `affine.for` bands: the work behind
`affine-loop-tile` on an `affine.for` at the top of a function.

It does what MLIR's pass does (`mlir/lib/Dialect/Affine/Transforms/LoopTiling.cpp`
and `tilePerfectlyNested`), checked against mlir-opt 22 on cases of our own:

- the bands are the maximal perfect nests of `affine.for` whose outermost loop is
  directly in a function body (`tileable_bands`); a band with a loop that yields
  values or whose bounds depend on another loop of the band is left alone, as MLIR
  leaves it;
- tile sizes (`mlir_tile_sizes`): `tile-size` for every loop, else `tile-sizes`
  (cut or filled with 4 to the band's depth), else MLIR's cache model: the band's
  memory footprint `cache-size` KiB at a time, the excess spread evenly over the
  loops and each size reduced to a divisor of its constant trip count;
- the tiled nest (`tile_band_like_mlir`): tile loops over the original bounds with
  the step times the size, then intra-tile loops from `%t` to `%t + size * step`,
  bounded by `min(%t + size * step, original upper bounds)` where the trip count's
  largest known divisor is not a multiple of the size, and to `%t + trip count *
  step` where the whole trip count is smaller than the size; uses of the original
  variables become the intra-tile ones;
- with `separate`, full tiles (`separate_full_tiles`): an `affine.if` on the tile
  variables holding a copy of the intra-tile nest with constant trip counts, the
  `min`-bounded nest in the else branch (not when a step is not 1, as MLIR).

Where affinec cannot reproduce MLIR's decision it refuses, naming why
(`TilingRefused`): whether tiling violates a dependence is decided for access pairs
whose dependence distances are constants or free (MLIR's own test tiles those),
the cache model's footprint for bands whose loops have constant bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
)
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind

from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.ir.affine_exprs import linear_form, simplify_expr
from affinec.transforms.affine.analysis import (
    compose_map,
    is_defined_inside,
    map_slots,
)
from affinec.transforms.affine.rewriting import (
    as_substitution,
    joint_maps,
    set_map_slots,
)

DEFAULT_TILE_SIZE = 4
"""MLIR's `kDefaultTileSize`."""

_UINT64_MAX = 2**64 - 1


class TilingRefused(Exception):
    """A band affinec cannot tile the way MLIR would; `op` is where, `reason` why."""

    def __init__(self, op: Operation, reason: str) -> None:
        super().__init__(reason)
        self.op = op
        self.reason = reason


# -- bands ------------------------------------------------------------------------------


def perfect_nest(root: affine.ForOp) -> list[affine.ForOp]:
    """`root` and the loops nested in it, each the only op of its parent's body."""
    band = [root]
    while True:
        ops = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(ops) != 1 or not isinstance(ops[0], affine.ForOp):
            return band
        band.append(ops[0])


def tileable_bands(module: ModuleOp) -> list[list[affine.ForOp]]:
    """The perfect nest of every `affine.for` directly in a function body."""
    bands = []
    for f in module.walk():
        if isinstance(f, func.FuncOp) and f.body.blocks:
            for op in f.body.block.ops:
                if isinstance(op, affine.ForOp):
                    bands.append(perfect_nest(op))
    return bands


def mlir_skips(band: Sequence[affine.ForOp]) -> bool:
    """Whether MLIR leaves the band untiled without a word: a loop that yields
    values, or one whose bounds use another loop of the band (not a box)."""
    for loop in band:
        if loop.results:
            return True
        bounds = (*loop.lowerBoundOperands, *loop.upperBoundOperands)
        if any(is_defined_inside(v, band[0]) for v in bounds):
            return True
    return False


# -- trip counts ------------------------------------------------------------------------


def trip_count_exprs(loop: affine.ForOp) -> tuple[list[AffineExpr], int, int] | None:
    """`(upper - lower) ceildiv step` per upper bound result, simplified, with the
    number of dims and symbols of its operand space; None when the lower bound has
    several results (MLIR's `getTripCountMapAndOperands`)."""
    lower, upper = map_slots(loop)
    if len(lower.map.results) != 1:
        return None
    (lo_results, hi_results), num_dims, num_syms, operands = joint_maps(
        [(lower.map, lower.operands), (upper.map, upper.operands)]
    )
    step = loop.step.value.data
    exprs = []
    for hi in hi_results:
        m, _ = compose_map(
            AffineMap(num_dims, num_syms, ((hi - lo_results[0]).ceil_div(step),)),
            operands,
        )
        exprs.append(m.results[0])
    return exprs, num_dims, num_syms


def constant_trip_count(loop: affine.ForOp) -> int | None:
    """The loop's trip count when it is a constant (MLIR's `getConstantTripCount`)."""
    counts = trip_count_exprs(loop)
    if counts is None:
        return None
    values = [e.value for e in counts[0] if isinstance(e, AffineConstantExpr)]
    if len(values) != len(counts[0]):
        return None
    return max(0, min(values))


def largest_known_divisor(e: AffineExpr) -> int:
    """MLIR's `AffineExpr::getLargestKnownDivisor`."""
    if isinstance(e, AffineConstantExpr):
        return abs(e.value)
    if not isinstance(e, AffineBinaryOpExpr):
        return 1
    lhs = largest_known_divisor(e.lhs)
    if e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.CeilDiv):
        divisor = e.rhs.value if isinstance(e.rhs, AffineConstantExpr) else 0
        return abs(lhs // divisor) if divisor and lhs % divisor == 0 else 1
    rhs = largest_known_divisor(e.rhs)
    if e.kind == AffineBinaryOpKind.Mul:
        return lhs * rhs
    return math.gcd(lhs, rhs)


def largest_divisor_of_trip_count(loop: affine.ForOp) -> int:
    """MLIR's `getLargestDivisorOfTripCount` (a zero trip count divides by all)."""
    counts = trip_count_exprs(loop)
    if counts is None:
        return 1
    divisor = 0
    for e in counts[0]:
        if isinstance(e, AffineConstantExpr):
            d = _UINT64_MAX if e.value <= 0 else e.value
        else:
            d = largest_known_divisor(e)
        divisor = math.gcd(divisor, d)
    return divisor


# -- dependences ------------------------------------------------------------------------

_ACCESSES = (
    affine.LoadOp,
    affine.StoreOp,
    affine.VectorLoadOp,
    affine.VectorStoreOp,
    PaddedLoadOp,
)
_WRITES = (affine.StoreOp, affine.VectorStoreOp)


def _enclosing_loops(op: Operation, root: affine.ForOp) -> list[affine.ForOp]:
    loops = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            loops.insert(0, parent)
        if parent is root:
            return loops
        parent = parent.parent_op()
    return loops


def _index_forms(op: Operation) -> list[tuple[dict[SSAValue, int], int]] | None:
    """Each index of an access as coefficients of SSA values plus a constant, or
    None when one is not linear."""
    (slot,) = map_slots(op)
    m, operands = compose_map(slot.map, slot.operands)
    forms = []
    for k in range(len(m.results)):
        expr, values = as_substitution(m, operands, k)
        form = linear_form(expr, len(values), 0)
        if form is None:
            return None
        coefficients = {v: c for v, c in zip(values, form[0], strict=True) if c}
        forms.append((coefficients, form[2]))
    return forms


def _uniform_pair(a: Operation, b: Operation, root: affine.ForOp) -> bool:
    """Whether each dependence distance between `a` and `b` is a constant or free,
    so that MLIR's test (a component in a negative range `lb < ub < 0`) passes: in
    every index the same loop variable of a loop enclosing both, with the same
    factor (or none), the same other terms; each loop variable in one index."""
    fa, fb = _index_forms(a), _index_forms(b)
    if fa is None or fb is None:
        return False
    loops_a, loops_b = _enclosing_loops(a, root), _enclosing_loops(b, root)
    ivs_a = {loop.induction_variable for loop in loops_a}
    ivs_b = {loop.induction_variable for loop in loops_b}
    common = {
        la.induction_variable
        for la, lb in zip(loops_a, loops_b, strict=False)
        if la is lb
    }
    used: set[SSAValue] = set()
    for (ca, _), (cb, _) in zip(fa, fb, strict=True):
        ivs = {v: c for v, c in ca.items() if v in ivs_a}
        other_ivs = {v: c for v, c in cb.items() if v in ivs_b}
        rest_a = {v: c for v, c in ca.items() if v not in ivs_a}
        rest_b = {v: c for v, c in cb.items() if v not in ivs_b}
        if ivs != other_ivs or rest_a != rest_b or len(ivs) > 1:
            return False
        if any(v not in common or v in used for v in ivs):
            return False
        used |= set(ivs)
    return True


def _injective_same_access(a: Operation, b: Operation, root: affine.ForOp) -> bool:
    """Whether `a` and `b` index alike and each index is a mixed-radix number of the
    loop variables (every factor above all the smaller ones times their spans), so
    that they meet only at the same iteration: every distance is 0."""
    fa, fb = _index_forms(a), _index_forms(b)
    if fa is None or fa != fb:
        return False
    loops = {loop.induction_variable: loop for loop in _enclosing_loops(a, root)}
    if loops != {loop.induction_variable: loop for loop in _enclosing_loops(b, root)}:
        return False
    for coefficients, _ in fa:
        terms = []
        for v, c in coefficients.items():
            loop = loops.get(v)
            if loop is None:
                continue
            count = constant_trip_count(loop)
            if count is None:
                return False
            step = loop.step.value.data
            terms.append((abs(c) * step, abs(c) * step * max(0, count - 1)))
        reach = 0
        for unit, span in sorted(terms):
            if unit <= reach:
                return False
            reach += span
    return True


def check_dependences(band: Sequence[affine.ForOp]) -> None:
    """Raise `TilingRefused` unless MLIR's dependence test surely accepts the band
    (every pair of accesses to one memref, one of them a write, is uniform)."""
    root = band[0]
    accesses = [op for op in root.walk() if isinstance(op, _ACCESSES)]
    for a in accesses:
        for b in accesses:
            if a.memref is not b.memref or not (
                isinstance(a, _WRITES) or isinstance(b, _WRITES)
            ):
                continue
            if not (_uniform_pair(a, b, root) or _injective_same_access(a, b, root)):
                raise TilingRefused(
                    root,
                    f"affine-loop-tile cannot tell whether tiling this band keeps its "
                    f"dependences: '{a.name}' and '{b.name}' access the same memref "
                    "with dependence distances that are not constants (MLIR decides "
                    "it with its dependence analysis, which affinec does not have)",
                )


# -- tile sizes -------------------------------------------------------------------------


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
    for loop in _enclosing_loops(op, root):
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
        if not isinstance(op, _ACCESSES):
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


# -- rewriting --------------------------------------------------------------------------


def _identity() -> AffineMap:
    return AffineMap(1, 0, (AffineExpr.dimension(0),))


def _shift(amount: int) -> AffineMap:
    return AffineMap(1, 0, (AffineExpr.dimension(0) + amount,))


def _for_like(
    lower: AffineMap,
    lower_ops: Sequence[SSAValue],
    upper: AffineMap,
    upper_ops: Sequence[SSAValue],
    step: int,
) -> affine.ForOp:
    return affine.ForOp(
        lower,
        upper,
        Block(arg_types=[IndexType()]),
        lower_operands=lower_ops,
        upper_operands=upper_ops,
        step=step,
    )


def _intra_upper(
    loop: affine.ForOp, tile: affine.ForOp, size: int
) -> tuple[AffineMap, list[SSAValue]]:
    """The upper bound of the intra-tile loop of `loop` (see the module docstring)."""
    step = loop.step.value.data
    iv = tile.induction_variable
    count = constant_trip_count(loop)
    if count is not None and count < size:
        return _shift(count * step), [iv]
    if largest_divisor_of_trip_count(loop) % size == 0:
        return _shift(size * step), [iv]
    upper = map_slots(loop)[1]
    um = upper.map
    new_dim = AffineExpr.dimension(um.num_dims)
    results = (new_dim + size * step, *um.results)
    operands = [*upper.operands[: um.num_dims], iv, *upper.operands[um.num_dims :]]
    return AffineMap(um.num_dims + 1, um.num_symbols, results), operands


def tile_band_like_mlir(
    band: Sequence[affine.ForOp], sizes: Sequence[int]
) -> tuple[list[affine.ForOp], list[affine.ForOp]]:
    """Tile the band as MLIR's `tilePerfectlyNested`; return (tile, intra loops)."""
    tiles: list[affine.ForOp] = []
    for loop, size in zip(band, sizes, strict=True):
        lower, upper = map_slots(loop)
        tiles.append(
            _for_like(
                lower.map,
                lower.operands,
                upper.map,
                upper.operands,
                size * loop.step.value.data,
            )
        )
    intra: list[affine.ForOp] = []
    for loop, tile, size in zip(band, tiles, sizes, strict=True):
        upper, upper_ops = _intra_upper(loop, tile, size)
        intra.append(
            _for_like(
                _identity(),
                [tile.induction_variable],
                upper,
                upper_ops,
                loop.step.value.data,
            )
        )
    nest = [*tiles, *intra]
    for outer, inner in zip(nest, nest[1:], strict=False):
        outer.body.block.add_ops([inner, affine.YieldOp()])
    for loop in nest:
        loop.location = band[0].location
    for old, new in zip(band, intra, strict=True):
        old.induction_variable.replace_all_uses_with(new.induction_variable)
    body = band[-1].body.block
    for op in list(body.ops):
        op.detach()
        intra[-1].body.block.add_op(op)
    parent = band[0].parent_block()
    assert parent is not None
    parent.insert_op_before(tiles[0], band[0])
    band[0].detach()
    band[0].erase()
    return tiles, intra


def _full_tile_constraints(
    loop: affine.ForOp,
) -> list[tuple[AffineExpr, list[SSAValue]]]:
    """`ub_k - (%t + size) >= 0` for each upper bound of an intra-tile loop besides
    the tile's own `%t + size`, as (expression over the values, values)."""
    upper = map_slots(loop)[1]
    um = upper.map
    if len(um.results) == 1:
        return []
    full, *others = um.results
    out = []
    for other in others:
        expr, values = as_substitution(
            AffineMap(um.num_dims, um.num_symbols, (other - full,)), upper.operands
        )
        out.append((expr, values))
    return out


def separation_condition(
    intra: Sequence[affine.ForOp],
) -> tuple[AffineSet, list[SSAValue]]:
    """The condition under which every intra-tile loop runs a full tile: over the
    tile variables (dims, in loop order) and the function's values (symbols)."""
    constraints: list[tuple[AffineExpr, list[SSAValue]]] = []
    for loop in intra:
        constraints += _full_tile_constraints(loop)
    dims: list[SSAValue] = []
    syms: list[SSAValue] = []
    tile_ivs = [loop.lowerBoundOperands[0] for loop in intra]
    for _, values in constraints:
        for v in values:
            if v in tile_ivs and v not in dims:
                dims.append(v)
            elif v not in tile_ivs and v not in syms:
                syms.append(v)
    dims.sort(key=tile_ivs.index)
    exprs: list[AffineExpr] = []
    for expr, values in constraints:
        replacements = [
            AffineExpr.dimension(dims.index(v))
            if v in dims
            else AffineExpr.symbol(syms.index(v))
            for v in values
        ]
        e = expr.replace_dims_and_symbols(replacements, [])
        e = _tightened(simplify_expr(e, len(dims), len(syms)), len(dims), len(syms))
        if e not in exprs:
            exprs.append(e)
    if not exprs:
        true = AffineConstraintExpr(
            AffineConstraintKind.eq, AffineExpr.constant(0), AffineExpr.constant(0)
        )
        return AffineSet(0, 0, (true,)), []
    set_ = AffineSet(
        len(dims),
        len(syms),
        tuple(
            AffineConstraintExpr(AffineConstraintKind.ge, e, AffineExpr.constant(0))
            for e in exprs
        ),
    )
    return set_, [*dims, *syms]


def _tightened(e: AffineExpr, num_dims: int, num_syms: int) -> AffineExpr:
    """`e >= 0` divided through by the gcd of its coefficients (the constant rounded
    down), as MLIR normalizes a constraint."""
    form = linear_form(e, num_dims, num_syms)
    if form is None:
        return e
    g = math.gcd(*form[0], *form[1])
    if g <= 1:
        return e
    flat = [c // g for c in (*form[0], *form[1])] + [form[2] // g]
    return AffineExpr.from_flat_form(flat, num_dims, num_syms, [])


def separate_full_tiles(intra: Sequence[affine.ForOp]) -> None:
    """Version the intra-tile nest on `separation_condition`: the then branch a copy
    whose loops run `%t` to `%t + size * step`, the else branch the nest as it is.
    MLIR does it only when every intra-tile loop has step 1; so does this."""
    if any(loop.step.value.data != 1 for loop in intra):
        return
    condition, operands = separation_condition(intra)
    full = intra[0].clone()
    loops = perfect_nest(full)[: len(intra)]
    for loop in loops:
        upper, upper_ops = map_slots(loop)[1].map, map_slots(loop)[1].operands
        if len(upper.results) > 1:
            first = AffineMap(upper.num_dims, upper.num_symbols, (upper.results[0],))
            m, ops = compose_map(first, upper_ops, fold_producers=False)
            _set_upper(loop, m, ops)
    parent = intra[0].parent_block()
    assert parent is not None
    guard = affine.IfOp(condition, operands, Block([full, affine.YieldOp()]))
    parent.insert_op_before(guard, intra[0])
    intra[0].detach()
    guard.else_region.add_block(Block([intra[0], affine.YieldOp()]))
    guard.location = intra[0].location


def _set_upper(loop: affine.ForOp, m: AffineMap, operands: Sequence[SSAValue]) -> None:
    lower = map_slots(loop)[0]
    set_map_slots(loop, [(lower.map, lower.operands), (m, operands)])
