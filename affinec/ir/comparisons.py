"""`arith.cmpi` as the lowering passes build it: the op `arith.CmpiOp(lhs, rhs,
predicate)` makes, with its predicate's attribute and its `i1` result type made
once rather than once an op (xDSL's constructor makes both anew each time: three
quarters of the time of building the op; attributes are immutable, so one may
stand in many ops).

    cmpi(index, size, "ult")     # %t = arith.cmpi ult, %index, %size : index
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i1, i64
from xdsl.ir import SSAValue

PREDICATES: dict[str, IntegerAttr] = {
    name: IntegerAttr(k, i64)
    for k, name in enumerate(
        ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
    )
}
"""Each predicate of `arith.cmpi` by its mnemonic, as xDSL numbers them."""


def cmpi(lhs: SSAValue, rhs: SSAValue, predicate: str) -> arith.CmpiOp:
    """`arith.CmpiOp(lhs, rhs, predicate)` (the same checks: operands of one type
    and a known mnemonic, else xDSL's error)."""
    attr = PREDICATES.get(predicate)
    if attr is None or lhs.type != rhs.type:
        return arith.CmpiOp(lhs, rhs, predicate)  # raises xDSL's error
    return arith.CmpiOp.build(
        operands=[lhs, rhs], result_types=[i1], properties={"predicate": attr}
    )
