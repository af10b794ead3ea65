"""Whether MLIR's `affine-loop-tile` may tile a band without breaking a dependence,
decided where affinec can be sure MLIR accepts it: every pair of accesses to one
memref, one a write, has dependence distances that are constants or free (uniform
indices), or meets only at the same iteration (alike, injective indices). Anything
else is refused (`TilingRefused`): affinec has no dependence analysis to match MLIR's.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from affinec.dialects import affine
from affinec.ir.affine_exprs import linear_form
from affinec.transforms.affine.analysis import compose_map, map_slots
from affinec.transforms.affine.mlir_tile_bands import (
    ACCESSES,
    TilingRefused,
    constant_trip_count,
    enclosing_loops,
)
from affinec.transforms.affine.rewriting import as_substitution

_WRITES = (affine.StoreOp, affine.VectorStoreOp)


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
    loops_a, loops_b = enclosing_loops(a, root), enclosing_loops(b, root)
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
    loops = {loop.induction_variable: loop for loop in enclosing_loops(a, root)}
    if loops != {loop.induction_variable: loop for loop in enclosing_loops(b, root)}:
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
    accesses = [op for op in root.walk() if isinstance(op, ACCESSES)]
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
