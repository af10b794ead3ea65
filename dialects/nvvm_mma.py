"""The tensor-core ops of the nvvm dialect: `nvvm.ldmatrix` (a warp loads 8x8 tiles of
16-bit elements from shared memory into registers) and `nvvm.mma.sync` (a warp's
matrix multiply-accumulate, f16, bf16 or tf32 into f32), with their attributes
`#nvvm.mma_layout`, `#nvvm.mma_type` and `#nvvm.shape`. `affinec.ir.mma_layouts` has
the fragment layouts, lane by lane.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float16Type,
    Float32Type,
    IntAttr,
    IntegerAttr,
    VectorType,
    i32,
)
from xdsl.dialects.llvm import LLVMPointerType, LLVMStructType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from affinec.dialects.nvgpu import MMA_KINDS, MmaKind
from affinec.dialects.nvvm_intrinsics import IntrinsicOp

# --------------------------------------------------------------------------------------
# Attributes of the tensor-core ops
# --------------------------------------------------------------------------------------


class MMALayout(StrEnum):
    ROW = "row"
    COL = "col"


@irdl_attr_definition
class MMALayoutAttr(EnumAttribute[MMALayout]):
    """`#nvvm.mma_layout<row>`: how a matrix operand is laid out (ldmatrix: `col` is
    its transposing form)."""

    name = "nvvm.mma_layout"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> MMALayout:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(MMALayout)


class MMATypes(StrEnum):
    F16 = "f16"
    BF16 = "bf16"
    TF32 = "tf32"
    F32 = "f32"


@irdl_attr_definition
class MMATypesAttr(EnumAttribute[MMATypes]):
    """`#nvvm.mma_type<bf16>`: what the i32 registers of an MMA operand hold."""

    name = "nvvm.mma_type"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> MMATypes:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(MMATypes)


@irdl_attr_definition
class MMAShapeAttr(ParametrizedAttribute):
    """`#nvvm.shape<m = 16, n = 8, k = 16>`: the shape of one `mma.sync`."""

    name = "nvvm.shape"

    m: IntAttr
    n: IntAttr
    k: IntAttr

    def __init__(self, m: int, n: int, k: int):
        super().__init__(IntAttr(m), IntAttr(n), IntAttr(k))

    @property
    def mnk(self) -> tuple[int, int, int]:
        return (self.m.data, self.n.data, self.k.data)

    def print_parameters(self, printer: Printer) -> None:
        m, n, k = self.mnk
        printer.print_string(f"<m = {m}, n = {n}, k = {k}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        values = []
        parser.parse_punctuation("<")
        for k, dim in enumerate("mnk"):
            if k:
                parser.parse_punctuation(",")
            parser.parse_keyword(dim)
            parser.parse_punctuation("=")
            values.append(IntAttr(parser.parse_integer(allow_boolean=False)))
        parser.parse_punctuation(">")
        return values


# --------------------------------------------------------------------------------------
# ldmatrix and mma.sync
# --------------------------------------------------------------------------------------


def _i32_struct(count: int) -> Attribute:
    return i32 if count == 1 else LLVMStructType.from_type_list([i32] * count)


@irdl_op_definition
class LdMatrixOp(IntrinsicOp):
    """`nvvm.ldmatrix`: `ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16`; each
    lane gets one i32 (two 16-bit elements) per tile: an i32 for one tile, a struct
    of i32 for 2 or 4. `layout = #nvvm.mma_layout<col>` transposes.

        %r = nvvm.ldmatrix %p {num = 2 : i32, layout = #nvvm.mma_layout<col>}
            : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32)>
    """

    name = "nvvm.ldmatrix"

    ptr = operand_def(LLVMPointerType)
    num = prop_def(IntegerAttr)
    layout = prop_def(MMALayoutAttr)
    res = result_def()

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$ptr attr-dict `:` `(` type($ptr) `)` `->` type($res)"

    def __init__(self, ptr: SSAValue | Operation, num: int, transpose: bool = False):
        super().__init__(
            operands=[SSAValue.get(ptr)],
            properties={
                "num": IntegerAttr(num, i32),
                "layout": MMALayoutAttr(MMALayout.COL if transpose else MMALayout.ROW),
            },
            result_types=[_i32_struct(num)],
        )

    @property
    def tiles(self) -> int:
        return self.num.value.data

    @property
    def is_transposed(self) -> bool:
        return self.layout.data == MMALayout.COL

    def intrinsic(self) -> str:
        trans = ".trans" if self.is_transposed else ""
        return f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{self.tiles}{trans}.b16.p3"

    def verify_(self) -> None:
        if self.tiles not in (1, 2, 4):
            raise VerifyException(f"num must be 1, 2 or 4, got {self.tiles}")
        space = self.ptr.type.addr_space  # pyright: ignore[reportAttributeAccessIssue]
        if not isinstance(space, IntAttr) or space.data != 3:
            raise VerifyException(
                f"ldmatrix reads shared memory (!llvm.ptr<3>), got {self.ptr.type}"
            )
        if self.res.type != _i32_struct(self.tiles):
            raise VerifyException(
                f"{self.tiles} tiles give {_i32_struct(self.tiles)}, got {self.res.type}"
            )


_MMA_OPERAND_TYPES = {"f16": MMATypes.F16, "bf16": MMATypes.BF16, "tf32": MMATypes.TF32}


@irdl_op_definition
class MmaOp(IntrinsicOp):
    """`nvvm.mma.sync`: `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` and its
    bf16 and tf32 forms; operands are each lane's registers of A, B and C, the result
    its registers of D (a struct of four f32).

        %d = nvvm.mma.sync A[%a0, %a1, %a2, %a3] B[%b0, %b1] C[%c0, %c1, %c2, %c3]
            {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
             multiplicandAPtxType = #nvvm.mma_type<bf16>,
             multiplicandBPtxType = #nvvm.mma_type<bf16>,
             shape = #nvvm.shape<m = 16, n = 8, k = 16>}
            : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>

    f16 registers are `vector<2xf16>`; bf16 (two per register) and tf32 (one) are
    i32, named by the multiplicand types.
    """

    name = "nvvm.mma.sync"

    operandA = var_operand_def()
    operandB = var_operand_def()
    operandC = var_operand_def()
    shape = prop_def(MMAShapeAttr)
    layoutA = prop_def(MMALayoutAttr)
    layoutB = prop_def(MMALayoutAttr)
    multiplicandAPtxType = opt_prop_def(MMATypesAttr)
    multiplicandBPtxType = opt_prop_def(MMATypesAttr)
    res = result_def(LLVMStructType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    _PROPERTIES: ClassVar[tuple[str, ...]] = (
        "layoutA",
        "layoutB",
        "multiplicandAPtxType",
        "multiplicandBPtxType",
        "shape",
    )

    def __init__(
        self,
        kind: MmaKind,
        a: Sequence[SSAValue | Operation],
        b: Sequence[SSAValue | Operation],
        c: Sequence[SSAValue | Operation],
    ):
        typed = (
            None
            if kind.operands == "f16"
            else MMATypesAttr(_MMA_OPERAND_TYPES[kind.operands])
        )
        super().__init__(
            operands=[[SSAValue.get(v) for v in operands] for operands in (a, b, c)],
            properties={
                "shape": MMAShapeAttr(*kind.shape),
                "layoutA": MMALayoutAttr(MMALayout.ROW),
                "layoutB": MMALayoutAttr(MMALayout.COL),
                "multiplicandAPtxType": typed,
                "multiplicandBPtxType": typed,
            },
            result_types=[
                LLVMStructType.from_type_list([Float32Type()] * kind.c_fragment[0] * 2)
            ],
        )

    @property
    def kind(self) -> MmaKind:
        """The MMA this op performs (the op must verify)."""
        a = self.multiplicandAPtxType
        name = "f16" if a is None else a.data.value
        for kind in MMA_KINDS:
            if kind.operands == name and kind.shape == self.shape.mnk:
                return kind
        raise VerifyException(
            f"unsupported mma.sync: {self.shape} with {name} operands (supported: "
            + ", ".join(k.describe() for k in MMA_KINDS)
            + ")"
        )

    def intrinsic(self) -> str:
        kind = self.kind
        m, n, k = kind.shape
        suffix = "f32.f32" if kind.operands == "f16" else kind.operands
        return f"llvm.nvvm.mma.m{m}n{n}k{k}.row.col.{suffix}"

    def verify_(self) -> None:
        if self.multiplicandAPtxType != self.multiplicandBPtxType:
            raise VerifyException("A and B must hold one type")
        if (self.layoutA.data, self.layoutB.data) != (MMALayout.ROW, MMALayout.COL):
            raise VerifyException("only row-major A and column-major B are supported")
        kind = self.kind
        register = VectorType(Float16Type(), [2]) if kind.operands == "f16" else i32
        f32 = Float32Type()
        for what, operands, count, t in (
            ("A", self.operandA, kind.a_fragment[0], register),
            ("B", self.operandB, kind.b_fragment[0], register),
            ("C", self.operandC, kind.c_fragment[0] * 2, f32),
        ):
            types = [v.type for v in operands]
            if types != [t] * count:
                raise VerifyException(
                    f"{kind.describe()} takes {what} as {count} x {t}, got "
                    f"{', '.join(str(x) for x in types) or 'none'}"
                )
        expected = LLVMStructType.from_type_list([f32] * kind.c_fragment[0] * 2)
        if self.res.type != expected:
            raise VerifyException(f"the result must be {expected}, got {self.res.type}")

    def print(self, printer: Printer) -> None:
        for what, operands in zip(
            "ABC", (self.operandA, self.operandB, self.operandC), strict=True
        ):
            printer.print_string(f" {what}[")
            printer.print_list(operands, printer.print_ssa_value)
            printer.print_string("]")
        attributes = {
            name: self.properties[name]
            for name in self._PROPERTIES
            if name in self.properties
        }
        printer.print_op_attributes(attributes | dict(self.attributes))
        printer.print_string(" : (")
        printer.print_list(
            [self.operandA[0].type, self.operandB[0].type, self.operandC[0].type],
            printer.print_attribute,
        )
        printer.print_string(") -> ")
        printer.print_attribute(self.res.type)

    @classmethod
    def parse(cls, parser: Parser) -> MmaOp:
        groups = []
        for what in "ABC":
            parser.parse_keyword(what)
            groups.append(
                parser.parse_comma_separated_list(
                    Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
                )
            )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_type
        )
        if len(types) != 3:
            parser.raise_error("expected the types of A, B and C")
        parser.parse_punctuation("->")
        result = parser.parse_type()
        properties = {
            name: attributes.pop(name) for name in cls._PROPERTIES if name in attributes
        }
        op = cls.create(
            operands=[
                parser.resolve_operand(v, t)
                for group, t in zip(groups, types, strict=True)
                for v in group
            ],
            result_types=[result],
            properties=properties,
            attributes=attributes,
        )
        op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(
            i32, [len(g) for g in groups]
        )
        return op
