"""The llvm ops xDSL 0.74 lacks, as MLIR writes them: `llvm.extractelement`,
`llvm.addrspacecast`, the casts `llvm.uitofp`, `llvm.fptosi` and `llvm.fptoui`,
`llvm.mlir.poison`, MLIR 22's `llvm.getelementptr` with its no-wrap flags, and the
intrinsics `llvm.intr.maximum`, `minimum`, `smax`, `smin`, `umax` and `umin`
(`INTRINSIC_NAMES`: the LLVM intrinsic each is). `affinec.dialects.llvm` registers
them in its `LLVM` dialect with MLIR's checks, and re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar, cast

from xdsl.dialects import llvm as xdsl_llvm
from xdsl.dialects.builtin import (
    I32,
    AnyFloatConstr,
    DenseArrayBase,
    IntegerAttr,
    IntegerType,
    UnitAttr,
    VectorType,
    i32,
)
from xdsl.dialects.utils import (
    parse_dynamic_index_list_without_types,
    print_dynamic_index_list,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    BaseAttr,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import NoMemoryEffect, Pure
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class ExtractElementOp(IRDLOperation):
    """`llvm.extractelement`: one element of a 1-D vector."""

    name = "llvm.extractelement"

    vector = operand_def(VectorType)
    position = operand_def(IntegerType)
    res = result_def()

    traits = traits_def(NoMemoryEffect())

    def __init__(self, vector: SSAValue | Operation, position: SSAValue | Operation):
        v = SSAValue.get(vector)
        assert isinstance(v.type, VectorType)
        super().__init__(
            operands=[v, SSAValue.get(position)],
            result_types=[v.type.get_element_type()],
        )

    def verify_(self) -> None:
        t = self.vector.type
        assert isinstance(t, VectorType)
        if t.get_num_dims() != 1:
            raise VerifyException(f"expected a 1-D vector, got {t}")
        if self.res.type != t.get_element_type():
            raise VerifyException(
                f"the result must be {t.get_element_type()}, got {self.res.type}"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.vector)
        printer.print_string("[")
        printer.print_ssa_value(self.position)
        printer.print_string(" : ")
        printer.print_attribute(self.position.type)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.vector.type)

    @classmethod
    def parse(cls, parser: Parser) -> ExtractElementOp:
        vector = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        position = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        position_type = parser.parse_type()
        parser.parse_punctuation("]")
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        vector_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(vector, vector_type),
            parser.resolve_operand(position, position_type),
        )
        op.attributes |= attributes
        return op


@irdl_op_definition
class AddrSpaceCastOp(IRDLOperation):
    """`llvm.addrspacecast`: the same address as a pointer of another space."""

    name = "llvm.addrspacecast"

    arg = operand_def(xdsl_llvm.LLVMPointerType)
    res = result_def(xdsl_llvm.LLVMPointerType)

    traits = traits_def(NoMemoryEffect())
    assembly_format = "$arg attr-dict `:` type($arg) `to` type($res)"

    def __init__(self, pointer: SSAValue | Operation, result: Attribute):
        super().__init__(operands=[SSAValue.get(pointer)], result_types=[result])


@irdl_op_definition
class UIToFPOp(xdsl_llvm.GenericCastOp):
    """`llvm.uitofp`: an unsigned integer as the nearest float."""

    name = "llvm.uitofp"


@irdl_op_definition
class FPToSIOp(xdsl_llvm.GenericCastOp):
    """`llvm.fptosi`: a float rounded toward zero to a signed integer (poison where
    it does not fit)."""

    name = "llvm.fptosi"


@irdl_op_definition
class FPToUIOp(xdsl_llvm.GenericCastOp):
    """`llvm.fptoui`: a float rounded toward zero to an unsigned integer (poison
    where it does not fit)."""

    name = "llvm.fptoui"


@irdl_op_definition
class PoisonOp(IRDLOperation):
    """`llvm.mlir.poison`: a value of any LLVM type that is poison (an aggregate
    being built, each member inserted after)."""

    name = "llvm.mlir.poison"

    res = result_def()

    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, t: Attribute):
        super().__init__(result_types=[t])


GEP_NO_WRAP_FLAGS = {"inbounds": 3, "nusw": 2, "nuw": 4}
"""MLIR 22's no-wrap flags of a `getelementptr` (`inbounds` implies `nusw`)."""


@lru_cache(maxsize=1024)
def _constant_indices(indices: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, list(indices))


@lru_cache(maxsize=64)
def _no_wrap_flags(flags: int) -> IntegerAttr:
    return IntegerAttr(flags, 32)


@irdl_op_definition
class GEPOp(xdsl_llvm.GEPOp):
    """`llvm.getelementptr`, its `inbounds` (and `nusw`, `nuw`) in `noWrapFlags`,
    as MLIR 22 keeps and writes them."""

    name = "llvm.getelementptr"

    # (an IRDL op's definitions are its own class's: xDSL's, declared again)
    ptr = operand_def(xdsl_llvm.LLVMPointerType)
    ssa_indices = var_operand_def(IntegerType)
    elem_type = prop_def()
    noWrapFlags = prop_def(IntegerAttr[I32])
    result = result_def(xdsl_llvm.LLVMPointerType)
    rawConstantIndices = prop_def(DenseArrayBase.constr(i32))
    inbounds = opt_prop_def(UnitAttr)
    """xDSL's way of saying `inbounds`, read from older texts; never set here."""
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        ptr: SSAValue | Operation,
        indices: Sequence[int],
        pointee_type: Attribute,
        ssa_indices: Sequence[SSAValue | Operation] | None = None,
        result_type: xdsl_llvm.LLVMPointerType | None = None,
        inbounds: bool = False,
        flags: int = 0,
    ):
        # xDSL's constructor's properties, in its order, with the flags given; its
        # attributes made once per value (hundreds of addresses a kernel).
        if inbounds:
            flags |= GEP_NO_WRAP_FLAGS["inbounds"]
        IRDLOperation.__init__(
            self,
            operands=[ptr, [] if ssa_indices is None else ssa_indices],
            result_types=[result_type or xdsl_llvm.LLVMPointerType()],
            properties={
                "rawConstantIndices": _constant_indices(tuple(indices)),
                "elem_type": pointee_type,
                "noWrapFlags": _no_wrap_flags(flags),
            },
        )

    def print(self, printer: Printer) -> None:
        flags = no_wrap_flags(self)
        words = [w for w, bits in GEP_NO_WRAP_FLAGS.items() if flags & bits == bits]
        if "inbounds" in words:
            words.remove("nusw")
        if words:
            printer.print_string(" " + "|".join(words))
        printer.print_string(" ")
        printer.print_ssa_value(self.ptr)
        print_dynamic_index_list(
            printer,
            xdsl_llvm.GEP_USE_SSA_VAL,
            self.ssa_indices,
            self.rawConstantIndices.iter_values(),
        )
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(
            [self.ptr.type, *(v.type for v in self.ssa_indices)], [self.result.type]
        )
        printer.print_string(", ")
        printer.print_attribute(self.elem_type)

    @classmethod
    def parse(cls, parser: Parser) -> GEPOp:
        flags = 0
        word = parser.parse_optional_keyword_in(list(GEP_NO_WRAP_FLAGS))
        while word is not None:
            flags |= GEP_NO_WRAP_FLAGS[word]
            word = None
            if parser.parse_optional_punctuation("|") is not None:
                word = parser.parse_keyword_in(list(GEP_NO_WRAP_FLAGS))
        ptr = parser.parse_unresolved_operand()
        ssa_refs, const_indices = parse_dynamic_index_list_without_types(
            parser, xdsl_llvm.GEP_USE_SSA_VAL
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        start = parser.pos
        ft = parser.parse_function_type()
        if len(ft.outputs.data) != 1:
            parser.raise_error(
                f"expected one result type, got {len(ft.outputs.data)}",
                start,
                parser.pos,
            )
        parser.parse_punctuation(",")
        elem_type = parser.parse_type()
        resolved = parser.resolve_operands([ptr, *ssa_refs], ft.inputs.data, parser.pos)
        # (any type: the verifier says what a result that is no pointer must be)
        result = cast(xdsl_llvm.LLVMPointerType, ft.outputs.data[0])
        op = cls(
            resolved[0],
            list(const_indices),
            elem_type,
            resolved[1:],
            result_type=result,
            flags=flags,
        )
        op.attributes |= attrs
        return op


def no_wrap_flags(op: xdsl_llvm.GEPOp) -> int:
    """A `getelementptr`'s no-wrap flags, `inbounds` among them whether kept as MLIR
    22 keeps it or as a property of its own (xDSL's `GEPOp`, an older text)."""
    flags = op.noWrapFlags.value.data
    if op.inbounds is not None:
        flags |= GEP_NO_WRAP_FLAGS["inbounds"]
    return flags


def is_inbounds(op: xdsl_llvm.GEPOp) -> bool:
    return bool(no_wrap_flags(op) & 1)


class _FloatBinaryIntrinsic(IRDLOperation):
    """A float intrinsic of two operands of one type, as MLIR prints it."""

    T: ClassVar = VarConstraint("T", AnyFloatConstr | VectorType.constr(AnyFloatConstr))
    lhs = operand_def(T)
    rhs = operand_def(T)
    res = result_def(T)
    fastmathFlags = prop_def(
        xdsl_llvm.FastMathAttr, default_value=xdsl_llvm.FastMathAttr(None)
    )

    assembly_format = (
        "`(` operands `)` attr-dict `:` functional-type(operands, results)"
    )
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])


@irdl_op_definition
class MaximumOp(_FloatBinaryIntrinsic):
    """`llvm.intr.maximum`: the larger, NaN if either is (-0 below +0)."""

    name = "llvm.intr.maximum"


@irdl_op_definition
class MinimumOp(_FloatBinaryIntrinsic):
    """`llvm.intr.minimum`: the smaller, NaN if either is (-0 below +0)."""

    name = "llvm.intr.minimum"


class _IntegerBinaryIntrinsic(IRDLOperation):
    """An integer intrinsic of two operands of one type, as MLIR prints it."""

    T: ClassVar = VarConstraint(
        "T", BaseAttr(IntegerType) | VectorType.constr(BaseAttr(IntegerType))
    )
    lhs = operand_def(T)
    rhs = operand_def(T)
    res = result_def(T)

    assembly_format = (
        "`(` operands `)` attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])


@irdl_op_definition
class SMaxOp(_IntegerBinaryIntrinsic):
    """`llvm.intr.smax`: the larger, as signed integers."""

    name = "llvm.intr.smax"


@irdl_op_definition
class SMinOp(_IntegerBinaryIntrinsic):
    """`llvm.intr.smin`: the smaller, as signed integers."""

    name = "llvm.intr.smin"


@irdl_op_definition
class UMaxOp(_IntegerBinaryIntrinsic):
    """`llvm.intr.umax`: the larger, as unsigned integers."""

    name = "llvm.intr.umax"


@irdl_op_definition
class UMinOp(_IntegerBinaryIntrinsic):
    """`llvm.intr.umin`: the smaller, as unsigned integers."""

    name = "llvm.intr.umin"


INTRINSIC_NAMES: dict[type[Operation], str] = {
    MaximumOp: "llvm.maximum",
    MinimumOp: "llvm.minimum",
    xdsl_llvm.VectorFMaxOp: "llvm.maxnum",
    xdsl_llvm.VectorFMinOp: "llvm.minnum",
    xdsl_llvm.FMAOp: "llvm.fma",
    SMaxOp: "llvm.smax",
    SMinOp: "llvm.smin",
    UMaxOp: "llvm.umax",
    UMinOp: "llvm.umin",
}
"""The intrinsic ops MLIR's lowerings write (`llvm.intr.maximum`), by the overloaded
LLVM intrinsic each is (`llvm.maximum`, its name mangled for the type at use)."""
