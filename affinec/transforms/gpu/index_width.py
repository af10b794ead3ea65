"""Whether a kernel's index arithmetic fits in 32 bits (read-only analysis).

GPU integer units are 32-bit: 64-bit index arithmetic costs two instructions (or
more) for every add and multiply of an address. A kernel may compute in 32 bits when
every index value it holds, and every intermediate value of the affine expressions
that `lower-affine` will expand, stays within a signed 32-bit integer, and every
buffer has fewer than 2**31 elements (so an in-bounds access's linear offset fits
too; a padded load's out-of-bounds index is compared, unsigned, before any access).
The question is answered at the gpu level, while the loops are still affine and the
value ranges (`affinec.ir.ranges`) know every variable's bounds.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineExpr

from affinec.dialects import gpu
from affinec.ir.affine_exprs import Interval, binary_range, expr_range
from affinec.ir.ranges import as_dims, value_range
from affinec.transforms.affine.analysis import map_slots

LIMIT = 2**31


def fits_32_bits(kernel: gpu.FuncOp) -> bool:
    """See the module docstring."""
    for arg in (*kernel.arguments, *kernel.workgroup_args):
        t = arg.type
        if isinstance(t, MemRefType) and math.prod(t.get_shape()) >= LIMIT:
            return False
    known: dict[SSAValue, Interval] = {}
    for op in kernel.body.walk():
        for slot in map_slots(op):
            ranges = [value_range(v, known) for v in slot.operands]
            m = as_dims(slot.map)
            for e in m.results:
                if not _subexpressions_fit(e, ranges):
                    return False
        blocks = (b for r in op.regions for b in r.blocks)
        for v in (*op.results, *(a for b in blocks for a in b.args)):
            if isinstance(v.type, IndexType) and not _fits(value_range(v, known)):
                return False
    return True


def _subexpressions_fit(e: AffineExpr, ranges: list[Interval | None]) -> bool:
    """Whether `e` and each of its subexpressions has a range that fits (each
    range computed once, from its operands' up)."""
    return _fitting_range(e, ranges) is not None


def _fitting_range(e: AffineExpr, ranges: list[Interval | None]) -> Interval | None:
    """`expr_range(e, ranges)` where it and every subexpression's range fit, else
    None."""
    if isinstance(e, AffineBinaryOpExpr):
        a = _fitting_range(e.lhs, ranges)
        if a is None:
            return None
        b = _fitting_range(e.rhs, ranges)
        if b is None:
            return None
        r = binary_range(e.kind, a, b)
    else:
        r = expr_range(e, ranges)
    return r if _fits(r) else None


def _fits(r: Interval | None) -> bool:
    return r is not None and r[0] >= -LIMIT and r[1] < LIMIT
