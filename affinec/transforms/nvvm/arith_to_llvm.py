"""arith (and index) ops as llvm ops; float arithmetic, casts and constants on n-D
vectors row by row (`vector_to_llvm`)."""

from __future__ import annotations

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    VectorType,
    i64,
)
from xdsl.ir import Operation, SSAValue

from affinec.base.diagnostics import PassError
from affinec.dialects.llvm import FPToSIOp, FPToUIOp, UIToFPOp
from affinec.ir.constants import constant, integer_attr
from affinec.transforms.nvvm.converter import KernelConverter, converts
from affinec.transforms.nvvm.vector_to_llvm import (
    elementwise,
    intrinsic_call,
    vector_constant,
)

_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}


@converts(*_BINARY)
def _binary(op: Operation, c: KernelConverter):
    lhs, rhs = (c.v(v) for v in op.operands)
    t = op.results[0].type
    if isinstance(t, VectorType):
        return [elementwise(c, t, [lhs, rhs], _BINARY[type(op)])]
    return [c.emit(_BINARY[type(op)](lhs, rhs))]


_FLOAT_INTRINSICS = {
    arith.MaximumfOp: "llvm.maximum",
    arith.MinimumfOp: "llvm.minimum",
    arith.MaxnumfOp: "llvm.maxnum",
    arith.MinnumfOp: "llvm.minnum",
}


@converts(*_FLOAT_INTRINSICS)
def _float_intrinsic(op: Operation, c: KernelConverter):
    args = [c.v(v) for v in op.operands]
    return [intrinsic_call(c, _FLOAT_INTRINSICS[type(op)], args, op.results[0].type)]


@converts(arith.NegfOp)
def _negf(op: arith.NegfOp, c: KernelConverter):
    t = op.result.type
    if isinstance(t, VectorType):
        return [elementwise(c, t, [c.v(op.operand)], llvm.FNegOp)]
    return [c.emit(llvm.FNegOp(c.v(op.operand)))]


@converts(arith.ConstantOp)
def _constant(op: arith.ConstantOp, c: KernelConverter):
    value = op.value
    t = c.type(op.result.type)
    if isinstance(value, IntegerAttr):
        attr = integer_attr(value.value.data, t)
    elif isinstance(value, FloatAttr):
        attr = value
    elif isinstance(value, DenseIntOrFPElementsAttr) and isinstance(
        value.type, VectorType
    ):
        return [vector_constant(c, op, value)]
    else:
        raise PassError(op, f"cannot lower the constant {value}")
    return [c.emit(constant(llvm.ConstantOp, attr, t))]


@converts(arith.CmpiOp)
def _cmpi(op: arith.CmpiOp, c: KernelConverter):
    # arith's and llvm's predicate enums are in the same order (MLIR's).
    return [c.emit(llvm.ICmpOp(c.v(op.lhs), c.v(op.rhs), op.predicate))]


@converts(arith.CmpfOp)
def _cmpf(op: arith.CmpfOp, c: KernelConverter):
    return [c.emit(llvm.FCmpOp(c.v(op.lhs), c.v(op.rhs), op.predicate))]


@converts(arith.SelectOp)
def _select(op: arith.SelectOp, c: KernelConverter):
    return [c.emit(llvm.SelectOp(c.v(op.cond), c.v(op.lhs), c.v(op.rhs)))]


@converts(arith.MinSIOp, arith.MaxSIOp, arith.MinUIOp, arith.MaxUIOp)
def _min_max(op: Operation, c: KernelConverter):
    predicate = {
        arith.MinSIOp: "slt",
        arith.MaxSIOp: "sgt",
        arith.MinUIOp: "ult",
        arith.MaxUIOp: "ugt",
    }[type(op)]  # pyright: ignore[reportArgumentType]
    lhs, rhs = (c.v(v) for v in op.operands)
    return [c.emit(llvm.SelectOp(_icmp(c, predicate, lhs, rhs), lhs, rhs))]


def _icmp(c: KernelConverter, predicate: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    flag = llvm.ICmpPredicateFlag(predicate).to_int()
    return c.emit(llvm.ICmpOp(lhs, rhs, integer_attr(flag, i64)))


_CASTS: dict[type[Operation], type[llvm.GenericCastOp]] = {
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.SIToFPOp: llvm.SIToFPOp,
    arith.UIToFPOp: UIToFPOp,
    arith.FPToSIOp: FPToSIOp,
    arith.FPToUIOp: FPToUIOp,
}


@converts(*_CASTS)
def _cast(op: Operation, c: KernelConverter):
    cast = _CASTS[type(op)]
    t = op.results[0].type
    if isinstance(t, VectorType):
        row = VectorType(t.get_element_type(), [t.get_shape()[-1]])
        return [elementwise(c, t, [c.v(op.operands[0])], lambda v: cast(v, row))]
    return [c.emit(cast(c.v(op.operands[0]), t))]


@converts(arith.FloorDivSIOp, arith.CeilDivSIOp, arith.CeilDivUIOp)
def _rounded_division(op: Operation, c: KernelConverter):
    """A quotient rounded toward minus or plus infinity, from the one rounded
    toward zero:

        floordivsi(a, b) = q - 1 where a != q * b and a, b differ in sign, else q
        ceildivsi(a, b)  = q + 1 where a != q * b and a, b agree in sign, else q
        ceildivui(a, b)  = 0 where a == 0, else (a - 1) / b + 1

    with q = a / b (signed); scalars only."""
    t = c.type(op.results[0].type)
    if not isinstance(t, IntegerType):
        raise PassError(op, f"is lowered on scalars only, not on {t}")
    a, b = (c.v(v) for v in op.operands)
    zero, one = c.int_constant(0, t), c.int_constant(1, t)
    if isinstance(op, arith.CeilDivUIOp):
        quotient = c.emit(llvm.UDivOp(c.emit(llvm.SubOp(a, one)), b))
        rounded = c.emit(llvm.AddOp(quotient, one))
        return [c.emit(llvm.SelectOp(_icmp(c, "eq", a, zero), zero, rounded))]
    floor = isinstance(op, arith.FloorDivSIOp)
    step = c.int_constant(-1, t) if floor else one
    quotient = c.emit(llvm.SDivOp(a, b))
    inexact = _icmp(c, "ne", a, c.emit(llvm.MulOp(quotient, b)))
    signs = _icmp(
        c, "ne" if floor else "eq", _icmp(c, "slt", a, zero), _icmp(c, "slt", b, zero)
    )
    adjust = c.emit(llvm.AndOp(inexact, signs))
    return [c.emit(llvm.SelectOp(adjust, c.emit(llvm.AddOp(quotient, step)), quotient))]


@converts(arith.BitcastOp)
def _bitcast(op: arith.BitcastOp, c: KernelConverter):
    return [c.emit(llvm.BitcastOp(c.v(op.input), c.type(op.result.type)))]


@converts(arith.IndexCastOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp)
def _int_cast(op: Operation, c: KernelConverter):
    (value,) = (c.v(v) for v in op.operands)
    source, target = value.type, c.type(op.results[0].type)
    assert isinstance(source, IntegerType) and isinstance(target, IntegerType)
    a, b = source.width.data, target.width.data
    if a == b:
        return [value]
    if a > b:
        return [c.emit(llvm.TruncOp(value, target))]
    if isinstance(op, arith.ExtUIOp):
        return [c.emit(llvm.ZExtOp(value, target))]
    return [c.emit(llvm.SExtOp(value, target))]
