"""Constants as the lowering passes build them, hundreds a pass: the same ops as
`arith.ConstantOp(attr)` and `llvm.ConstantOp(attr, type)` make, built without
their constructors' argument processing (two thirds of the time of building an op
through an IRDL constructor), and their values' attributes made once (xDSL's
attributes are immutable, so one may stand in many ops).

    index_constant(16)                       # %c16 = arith.constant 16 : index
    constant(llvm.ConstantOp, integer_attr(4, i32), i32)
"""

from __future__ import annotations

from functools import lru_cache

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Attribute

INDEX = IndexType()


@lru_cache(maxsize=4096)
def integer_attr(value: int, t: Attribute) -> IntegerAttr:
    """`IntegerAttr(value, t)`, made once."""
    return IntegerAttr(value, t)  # pyright: ignore[reportArgumentType]


def constant(
    op_class: type[arith.ConstantOp] | type[llvm.ConstantOp],
    value: Attribute,
    t: Attribute,
) -> arith.ConstantOp | llvm.ConstantOp:
    """`op_class(value, t)`: a constant of `value` (its property) and type `t`."""
    return op_class.create(result_types=[t], properties={"value": value})


def index_constant(value: int) -> arith.ConstantOp:
    """`arith.constant value : index`."""
    op = constant(arith.ConstantOp, integer_attr(value, INDEX), INDEX)
    assert isinstance(op, arith.ConstantOp)
    return op
