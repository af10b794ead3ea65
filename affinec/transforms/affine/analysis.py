"""Read-only analyses of affine loop nests that the loop passes share (MLIR's
Affine/Analysis): nothing here changes the IR; `affinec.loop_transforms` does.

- `map_slots(op)`: every affine map an op applies to its operands (an access, a bound,
  a condition), in one shape, so code that reads or rewrites maps does not care which
  op it has.
- `compose_map(m, operands, subst)`: a map over SSA values with some of them replaced
  by affine expressions of others (an induction variable by `%i0 * 16 + %i1`),
  constants and `affine.apply` producers folded in, operands de-duplicated, unused ones
  dropped, results simplified. Tiling, peeling, normalization and canonicalization are
  all this one composition.
- `value_range(v)` (from `affinec.ir.ranges`): the interval an index value takes.
- `perfect_band(loop)`: the perfectly nested `affine.for` loops starting at `loop`.
- `summation_order_kept(extents, sizes)`: whether tiling a reduction band keeps the
  order in which each output element is summed.
- `sink_blocker(parallel, loops)`: why interleaving the iterations of an
  `affine.parallel` (to interchange it with loops inside it, or to distribute it over
  its statements) could change what it computes, or None.
- `refuse_unsupported(module, pass_name)`: what the affine passes read but cannot
  transform (semi-affine maps, `affine.vector_load` and the other ops of
  `affine.PASSES_REFUSE`), refused located before a pass rewrites anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import AffineSetAttr, IndexType, IntegerAttr
from xdsl.ir import Attribute, Block, Operation, OpResult, SSAValue
from xdsl.ir.affine import (
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
    AffineSymExpr,
)
from xdsl.traits import is_side_effect_free

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affine_syntax import format_expr
from affinec.dialects.affinec import BLOCK, THREAD, PaddedLoadOp, enclosing_mappings
from affinec.ir.affine_exprs import (
    Interval,
    expr_range,
    linear_form,
    simplify_expr,
)
from affinec.ir.ranges import value_range

AccessOp = affine.LoadOp | affine.StoreOp | PaddedLoadOp
MAP_OPS = (
    affine.LoadOp,
    affine.StoreOp,
    PaddedLoadOp,
    affine.ApplyOp,
    affine.MinOp,
    affine.MaxOp,
    affine.ForOp,
    affine.ParallelOp,
    affine.IfOp,
)


# -- what the passes take -----------------------------------------------------------


def semi_affine_result(op: Operation) -> AffineExpr | None:
    """The first semi-affine expression among `op`'s maps (a product of two
    non-constants, a division or remainder by a symbol), or None."""
    for slot in map_slots(op):
        for e in slot.map.results:
            if not e.is_pure_affine():
                return e
    return None


def refuse_unsupported(module: Operation, pass_name: str) -> None:
    """Raise `PassError` at the first op `pass_name` cannot transform: an op of
    `affine.PASSES_REFUSE` or one with a semi-affine map (whose meaning the affine
    transformations, built on xDSL's affine expressions, would not keep)."""
    for op in module.walk():
        if isinstance(op, affine.PASSES_REFUSE) and not _epilogue_access(op):
            raise PassError(
                op,
                f"is not supported by {pass_name} (affinec parses and prints it only)",
            )
        if not _maps_pure(op) and (e := semi_affine_result(op)) is not None:
            raise PassError(
                op,
                f"has a semi-affine map ({format_expr(e)}), which {pass_name} cannot "
                "transform: its products need a constant factor and its divisions a "
                "constant divisor",
            )


_PURE: dict[int, tuple[Attribute, bool]] = {}
"""Whether each map or condition attribute `_maps_pure` has seen is pure affine, by
the attribute's identity (the attribute kept with the answer, so that no other
object takes its identity meanwhile): an op a pass leaves alone keeps its
attributes, and the next pass asks again."""


def _maps_pure(op: Operation) -> bool:
    """Whether every map `map_slots(op)` gives is pure affine (as
    `semi_affine_result(op) is None`, without building the slots)."""
    if isinstance(op, affine.LoadOp | affine.StoreOp | PaddedLoadOp):
        attrs: tuple[Attribute, ...] = (op.map,)
    elif isinstance(op, affine.ApplyOp | affine.MinOp | affine.MaxOp):
        attrs = (op.map,)
    elif isinstance(op, affine.ForOp):
        attrs = (op.lowerBoundMap, op.upperBoundMap)
    elif isinstance(op, affine.ParallelOp):
        attrs = (op.lowerBoundsMap, op.upperBoundsMap)
    elif isinstance(op, affine.IfOp):
        attrs = (op.condition,)
    else:
        return True
    return all(_maps_pure_attr(attr) for attr in attrs)


def _maps_pure_attr(attr: Attribute) -> bool:
    """Whether a map (or a condition, as `map_slots` makes it a map) is pure
    affine, remembered in `_PURE`."""
    known = _PURE.get(id(attr))
    if known is None or known[0] is not attr:
        if isinstance(attr, AffineSetAttr):
            results = condition_map(attr.data).results
        else:
            results = attr.data.results  # pyright: ignore[reportAttributeAccessIssue]
        if len(_PURE) > 100_000:
            _PURE.clear()
        known = _PURE[id(attr)] = (attr, all(e.is_pure_affine() for e in results))
    return known[1]


def _epilogue_access(op: Operation) -> bool:
    """An `affine.vector_store` or `affine.vector_load` in a block- or
    thread-mapped band: the output's epilogue on the GPU (`affinec-stage-output`'s
    16-byte copies, `affinec-mma-sync`'s paired stores), past the affine
    transformations."""
    if not isinstance(op, affine.VectorStoreOp | affine.VectorLoadOp):
        return False
    return bool({BLOCK, THREAD} & set(enclosing_mappings(op)))


# -- maps of ops ---------------------------------------------------------------------


@dataclass(frozen=True)
class MapSlot:
    """One affine map an op applies to some of its operands.

    `name` is the property holding it (`map`, `lowerBoundMap`, `upperBoundsMap`,
    `condition`...). An `affine.if` condition appears as the map of its constraints'
    left-hand sides, each compared with zero.
    """

    name: str
    map: AffineMap
    operands: tuple[SSAValue, ...]
    first_operand: int
    """Index of `operands[0]` among the op's operands."""


def map_slots(op: Operation) -> list[MapSlot]:
    """The maps `op` applies, or [] for an op that has none."""
    match op:
        case affine.LoadOp() | PaddedLoadOp():
            return [MapSlot("map", op.map.data, tuple(op.indices), 1)]
        case affine.StoreOp():
            return [MapSlot("map", op.map.data, tuple(op.indices), 2)]
        case affine.ApplyOp() | affine.MinOp() | affine.MaxOp():
            return [MapSlot("map", op.map.data, tuple(op.mapOperands), 0)]
        case affine.ForOp():
            lower = tuple(op.lowerBoundOperands)
            return [
                MapSlot("lowerBoundMap", op.lowerBoundMap.data, lower, 0),
                MapSlot(
                    "upperBoundMap",
                    op.upperBoundMap.data,
                    tuple(op.upperBoundOperands),
                    len(lower),
                ),
            ]
        case affine.ParallelOp():
            lower = tuple(op.lower_bound_operands)
            return [
                MapSlot("lowerBoundsMap", op.lowerBoundsMap.data, lower, 0),
                MapSlot(
                    "upperBoundsMap",
                    op.upperBoundsMap.data,
                    tuple(op.upper_bound_operands),
                    len(lower),
                ),
            ]
        case affine.IfOp():
            m = condition_map(op.condition.data)
            return [MapSlot("condition", m, tuple(op.args), 0)]
    return []


def condition_map(condition: AffineSet) -> AffineMap:
    """An integer set's constraints' left-hand sides less their right-hand sides,
    each compared with zero, as a map."""
    return AffineMap(
        condition.num_dims,
        condition.num_symbols,
        tuple(c.lhs - c.rhs for c in condition.constraints),
    )


def non_affine_uses(value: SSAValue) -> list[Operation]:
    """Ops that use `value` other than as an operand of one of their affine maps:
    a rewrite that folds an expression into maps cannot reach these."""
    bad: list[Operation] = []
    for use in value.uses:
        slots = map_slots(use.operation)
        if not any(
            s.first_operand <= use.index < s.first_operand + len(s.operands)
            for s in slots
        ):
            bad.append(use.operation)
    return bad


Substitution = tuple[AffineExpr, Sequence[SSAValue]]
"""An affine expression and the values its dims stand for: `(d0 * 16 + d1, [%i0,
%i1])` replaces an induction variable by its tiled form."""


def constant_index(value: SSAValue) -> int | None:
    """The value of an `index` constant (`arith.constant`), else None."""
    if isinstance(value, OpResult) and isinstance(value.op, arith.ConstantOp):
        attr = value.op.value
        if isinstance(attr, IntegerAttr) and isinstance(attr.type, IndexType):
            return attr.value.data
    return None


def compose_map(
    m: AffineMap,
    operands: Sequence[SSAValue],
    subst: Mapping[SSAValue, Substitution] | None = None,
    *,
    fold_producers: bool = True,
) -> tuple[AffineMap, list[SSAValue]]:
    """`m` applied to `operands`, as a simplified map over the values it really uses.

    Operands in `subst` are replaced by their expressions (once: the values of a
    substitution are not substituted again, so `%i -> %i0 * 16 + %i` is fine). With
    `fold_producers`, `index` constants become literals and `affine.apply` results
    their (recursively composed) expressions, as MLIR's `fullyComposeAffineMapAndOperands`.
    A value that appears twice becomes one dim; the new operands keep the order in
    which the old ones (and the values of their substitutions) come.
    """
    subst = subst or {}
    dims: list[SSAValue] = []
    syms: list[SSAValue] = []

    def leaf(v: SSAValue, as_symbol: bool) -> AffineExpr:
        space = syms if as_symbol else dims
        if v not in space:
            space.append(v)
        k = space.index(v)
        return AffineExpr.symbol(k) if as_symbol else AffineExpr.dimension(k)

    def expr_of(v: SSAValue, as_symbol: bool, nested: bool = False) -> AffineExpr:
        # Substitutions apply to the map's own operands, not to an apply's inside it.
        if v in subst and not nested:
            e, values = subst[v]
            return e.replace_dims_and_symbols([leaf(x, as_symbol) for x in values], [])
        if fold_producers:
            if (c := constant_index(v)) is not None:
                return AffineExpr.constant(c)
            if isinstance(v, OpResult) and isinstance(v.op, affine.ApplyOp):
                inner = v.op.map.data
                args = list(v.op.mapOperands)
                return inner.results[0].replace_dims_and_symbols(
                    [expr_of(a, False, True) for a in args[: inner.num_dims]],
                    [expr_of(a, True, True) for a in args[inner.num_dims :]],
                )
        return leaf(v, as_symbol)

    dim_exprs = [expr_of(v, False) for v in operands[: m.num_dims]]
    sym_exprs = [expr_of(v, True) for v in operands[m.num_dims :]]
    results = [r.replace_dims_and_symbols(dim_exprs, sym_exprs) for r in m.results]
    return _compress(results, dims, syms)


def _compress(
    results: Sequence[AffineExpr], dims: list[SSAValue], syms: list[SSAValue]
) -> tuple[AffineMap, list[SSAValue]]:
    """The map of `results` over only the dims and symbols they use, simplified."""
    used_dims: set[int] = set()
    used_syms: set[int] = set()
    for r in results:
        for e in r.dfs():
            if isinstance(e, AffineDimExpr):
                used_dims.add(e.position)
            elif isinstance(e, AffineSymExpr):
                used_syms.add(e.position)
    keep_dims = sorted(used_dims)
    keep_syms = sorted(used_syms)
    new_dims = [
        AffineExpr.dimension(keep_dims.index(k)) if k in used_dims else None
        for k in range(len(dims))
    ]
    new_syms = [
        AffineExpr.symbol(keep_syms.index(k)) if k in used_syms else None
        for k in range(len(syms))
    ]
    renumbered = [
        simplify_expr(
            r.replace_dims_and_symbols(new_dims, new_syms),  # pyright: ignore[reportArgumentType]
            len(keep_dims),
            len(keep_syms),
        )
        for r in results
    ]
    m = AffineMap(len(keep_dims), len(keep_syms), tuple(renumbered))
    return m, [dims[k] for k in keep_dims] + [syms[k] for k in keep_syms]


# -- ranges ---------------------------------------------------------------------------


def operand_ranges(
    m: AffineMap, operands: Sequence[SSAValue]
) -> tuple[list[Interval | None], list[Interval | None]]:
    """The ranges of the dim operands and of the symbol operands of `m`."""
    ranges = [value_range(v) for v in operands]
    return ranges[: m.num_dims], ranges[m.num_dims :]


def slot_ranges(slot: MapSlot) -> list[Interval | None]:
    """The interval of each result of a map slot over its operands' ranges."""
    dims, syms = operand_ranges(slot.map, slot.operands)
    return [expr_range(r, dims, syms) for r in slot.map.results]


def constant_value(m: AffineMap, k: int = 0) -> int | None:
    """Result `k` of `m` when it is a constant."""
    r = simplify_expr(m.results[k], m.num_dims, m.num_symbols)
    form = linear_form(r, m.num_dims, m.num_symbols)
    if form is not None and not any(form[0]) and not any(form[1]):
        return form[2]
    return None


# -- loops ----------------------------------------------------------------------------


def is_simple_for(loop: affine.ForOp) -> bool:
    """Lower bound 0 and step 1 (the reference design's "simple loop")."""
    lower = loop.lowerBoundMap.data
    return (
        loop.step.value.data == 1
        and len(lower.results) == 1
        and constant_value(lower) == 0
    )


def non_simple_parallel_dims(op: affine.ParallelOp) -> list[int]:
    """The dimensions of an `affine.parallel` whose lower bound is not 0 or step not 1."""
    lower = op.lowerBoundsMap.data
    bad = []
    k = 0
    for d, (g, step) in enumerate(zip(op.lower_groups, op.step_values, strict=True)):
        if step != 1 or g != 1 or constant_value(lower, k) != 0:
            bad.append(d)
        k += g
    return bad


def body_ops(block: Block) -> list[Operation]:
    """The ops of a loop body without its `affine.yield`."""
    return [op for op in block.ops if not isinstance(op, affine.YieldOp)]


def perfect_band(loop: affine.ForOp) -> list[affine.ForOp]:
    """`loop` and the loops perfectly nested in it: each body holds only the next."""
    band = [loop]
    while True:
        ops = body_ops(band[-1].body.block)
        if len(ops) != 1 or not isinstance(ops[0], affine.ForOp):
            return band
        band.append(ops[0])


def constant_trip_extent(loop: affine.ForOp) -> int | None:
    """The number of values a simple loop's variable takes, when it is a constant."""
    if not is_simple_for(loop):
        return None
    ups = [
        constant_value(loop.upperBoundMap.data, k)
        for k in range(len(loop.upperBoundMap.data.results))
    ]
    if any(u is None for u in ups):
        return None
    return max(0, min(ups))  # pyright: ignore[reportArgumentType]


def is_defined_inside(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is defined by an op nested in `op` or is a block argument of
    one of its regions."""
    owner = value.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        return parent is op or (parent is not None and op.is_ancestor(parent))
    return op.is_ancestor(owner) and owner is not op


def summation_order_kept(
    extents: Sequence[int | None], sizes: Sequence[int | None]
) -> bool:
    """Whether tiling a reduction band with `sizes` keeps the order of its iterations.

    Tiling `(c, r, s)` into `(c0, r0, s0, c1, r1, s1)` runs the tile loops first, so
    the band's points come in their natural (lexicographic) order only if, leaving out
    dimensions of extent 1, the dimensions cut into several tiles come first, all of
    them in tiles of 1 except perhaps the last, and every later dimension is whole
    (one tile). `(4, 7, 7)` in tiles of `(1, 7, 7)` or `(2, 7, 7)` keeps the order;
    `(2, 3, 7)` does not: the second tile of `c` comes back to `r = 0`. A size of None
    means the whole extent; an unknown extent (None) with a size may be cut.
    """
    seen_whole = seen_cut_points = False
    for e, t in zip(extents, sizes, strict=True):
        if e is not None and e <= 1:
            continue
        cut = t is not None and (e is None or -(-e // t) > 1)
        if not cut:
            seen_whole = True
            continue
        if seen_whole or seen_cut_points:
            return False
        seen_cut_points = t is not None and t > 1
    return True


# -- dependences ----------------------------------------------------------------------


def _accessed_memref(op: Operation) -> tuple[SSAValue, bool] | None:
    """The memref `op` reads or writes and whether it writes, for the memory ops the
    nests we rewrite contain."""
    match op:
        case affine.LoadOp() | PaddedLoadOp():
            return op.memref, False
        case affine.StoreOp():
            return op.memref, True
        case memref.LoadOp():
            return op.memref, False
        case memref.StoreOp():
            return op.memref, True
    return None


def _rank(rows: list[list[Fraction]]) -> int:
    rows = [list(r) for r in rows]
    rank = 0
    ncols = len(rows[0]) if rows else 0
    for col in range(ncols):
        pivot = next((i for i in range(rank, len(rows)) if rows[i][col] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for i in range(len(rows)):
            if i != rank and rows[i][col] != 0:
                f = rows[i][col] / rows[rank][col]
                rows[i] = [a - f * b for a, b in zip(rows[i], rows[rank], strict=True)]
        rank += 1
    return rank


def _name(value: SSAValue) -> str:
    return f"%{value.name_hint}" if value.name_hint else "a memref"


def sink_blocker(parallel: affine.ParallelOp) -> str | None:
    """Why the iterations of `parallel` may not be interleaved, or None when they may.

    Interchanging an `affine.parallel` with loops inside it, or distributing it over
    the statements of its body, runs a piece of every iteration before the next piece
    of any. That keeps the result when no iteration touches memory another one writes:
    every memref written in the body (and allocated outside it) must be accessed at one
    and the same affine index, built from the parallel's own variables so that distinct
    iterations get distinct elements, and from nothing that varies inside the body.
    The accumulation `acc[%i, %j] = acc[%i, %j] + ...` over a reduction loop is such a
    dependence, carried by the reduction loop within one iteration, and it is kept.
    """
    ivs = list(parallel.induction_variables)
    accesses: dict[SSAValue, list[Operation]] = {}
    written: set[SSAValue] = set()
    for op in parallel.body.walk():
        if op is parallel:
            continue
        found = _accessed_memref(op)
        if found is not None:
            buffer, writes = found
            accesses.setdefault(buffer, []).append(op)
            if writes:
                written.add(buffer)
            continue
        if isinstance(op, memref.AllocOp | memref.AllocaOp | memref.DeallocOp):
            continue
        if isinstance(op, MAP_OPS) or op.regions or is_side_effect_free(op):
            continue
        if op.name.startswith(("arith.", "math.")):
            continue
        return f"'{op.name}' has memory effects the sinking cannot analyse"
    for buffer in written:
        if is_defined_inside(buffer, parallel):
            continue  # private to an iteration
        ops = accesses[buffer]
        if not all(isinstance(op, AccessOp) for op in ops):
            return f"{_name(buffer)} is accessed by a non-affine memory op"
        keyed = {
            (m, tuple(v))
            for m, v in (compose_map(op.map.data, list(op.indices)) for op in ops)  # pyright: ignore
        }
        if len(keyed) != 1:
            return (
                f"{_name(buffer)} is written and accessed at different indices "
                "(a loop-carried dependence between iterations)"
            )
        ((m, values),) = keyed
        for v in values:
            if v not in ivs and is_defined_inside(v, parallel):
                return (
                    f"{_name(buffer)} is written at an index that varies inside the "
                    "loop (a loop-carried dependence between iterations)"
                )
        wide = [iv for iv in ivs if (r := value_range(iv)) is None or r[1] > r[0]]
        rows: list[list[Fraction]] = []
        for r in m.results:
            form = linear_form(r, m.num_dims, m.num_symbols)
            if form is None:
                return f"{_name(buffer)} is written at a non-linear index"
            coefficients = [*form[0], *form[1]]
            rows.append(
                [
                    Fraction(coefficients[values.index(iv)] if iv in values else 0)
                    for iv in wide
                ]
            )
        if wide and _rank(rows) < len(wide) and not _mixed_radix(rows, wide):
            return (
                f"{_name(buffer)} is written at an index that several iterations "
                "share (a loop-carried dependence between iterations)"
            )
    return None


def _mixed_radix(rows: list[list[Fraction]], ivs: list[SSAValue]) -> bool:
    """Whether an index whose results are these combinations of `ivs` (one row of
    coefficients a result) still gives distinct iterations distinct elements
    though it has fewer results than variables: each variable in one result only,
    and within a result each coefficient larger than what the smaller ones can
    add up to over their ranges (`g * 4 + k` with `k` in [0, 4): a grouped
    convolution's channel)."""
    spans = []
    for iv in ivs:
        r = value_range(iv)
        if r is None:
            return False
        spans.append(r[1] - r[0])
    for k in range(len(ivs)):
        if sum(1 for row in rows if row[k]) != 1:
            return False
    for row in rows:
        terms = sorted((abs(c), spans[k]) for k, c in enumerate(row) if c)
        reach = Fraction(0)
        for c, span in terms:
            if c <= reach:
                return False
            reach += c * span
    return True
