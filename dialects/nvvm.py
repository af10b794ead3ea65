"""An nvvm dialect named after MLIR's: NVIDIA's special registers, barriers,
tensor-core instructions and asynchronous copies.

Each op stands for one LLVM intrinsic call (`IntrinsicOp.intrinsic()` names it, and
`immediates()` gives the constant i32 arguments that follow the operands; the emitter
calls it, nothing else needs to know):

    %tid = nvvm.read.ptx.sreg.tid.x : i32      // llvm.nvvm.read.ptx.sreg.tid.x
    nvvm.barrier0                              // llvm.nvvm.barrier.cta.sync.aligned.all(0)
    %r = nvvm.ldmatrix %p {num = 4 : i32, layout = #nvvm.mma_layout<row>}
        : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
                                     // llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3
    %d = nvvm.mma.sync A[%a0, %a1, %a2, %a3] B[%b0, %b1] C[%c0, %c1, %c2, %c3]
        {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
         shape = #nvvm.shape<m = 16, n = 8, k = 16>}
        : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
                                     // llvm.nvvm.mma.m16n8k16.row.col.f32.f32
    nvvm.cp.async.shared.global %dst, %src, 16, cache = cg, %bytes
        : !llvm.ptr<3>, !llvm.ptr<1>, i32
                                     // llvm.nvvm.cp.async.cg.shared.global.16.s
    nvvm.cp.async.commit.group       // llvm.nvvm.cp.async.commit.group
    nvvm.cp.async.wait.group 1       // llvm.nvvm.cp.async.wait.group(1)

The warp-level ops (`ldmatrix`, `mma.sync`) mean what PTX says, lane by lane:
`affinec.ir.mma_layouts` has the fragment layouts. bf16 and tf32 MMA operands travel
as i32 registers (two bf16, or one tf32, each), with `multiplicandAPtxType` and
`multiplicandBPtxType` naming what they hold, as in MLIR.
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
    IntegerType,
    VectorType,
    i32,
)
from xdsl.dialects.llvm import LLVMPointerType, LLVMStructType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
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


class IntrinsicOp(IRDLOperation):
    """An op that is one call of an LLVM intrinsic: the operands, then `immediates()`
    as i32 constants; the op's one result (if any) is the call's."""

    INTRINSIC: ClassVar[str]
    INTRINSIC_ARGS: ClassVar[tuple[int, ...]] = ()

    def intrinsic(self) -> str:
        """The name of the intrinsic this op calls."""
        return self.INTRINSIC

    def immediates(self) -> tuple[int, ...]:
        """Constant i32 arguments after the operands."""
        return self.INTRINSIC_ARGS


class SpecialRegisterOp(IntrinsicOp):
    """`%r = nvvm.read.ptx.sreg.<name> : i32`: a PTX special register, as an i32."""

    INTRINSIC: ClassVar[str]
    UPPER_BOUND: ClassVar[int | None] = None
    """The register's values lie in `[0, upper_bound)` (LLVM knows it too).."""

    res = result_def(IntegerType)
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self):
        super().__init__(result_types=[i32])


@irdl_op_definition
class BarrierOp(IntrinsicOp):
    """`nvvm.barrier0`: `bar.sync 0`, CUDA's `__syncthreads()`."""

    name = "nvvm.barrier0"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.barrier.cta.sync.aligned.all"
    INTRINSIC_ARGS: ClassVar[tuple[int, ...]] = (0,)
    """Constant i32 arguments the intrinsic takes: barrier 0."""

    assembly_format = "attr-dict"


def _sreg(register: str, bound: int | None) -> type[SpecialRegisterOp]:
    name = f"nvvm.read.ptx.sreg.{register}"

    class Op(SpecialRegisterOp):
        INTRINSIC: ClassVar[str] = f"llvm.{name}"
        UPPER_BOUND: ClassVar[int | None] = bound

    Op.name = name  # pyright: ignore[reportAttributeAccessIssue]
    Op.__name__ = Op.__qualname__ = (
        "".join(p.capitalize() for p in register.split(".")) + "Op"
    )
    Op.__doc__ = f"`%r = {name} : i32`."
    return irdl_op_definition(Op)


KERNEL = "nvvm.kernel"
"""Unit attribute marking an `llvm.func` as a kernel entry point (MLIR's name)."""

MAXNTID = "nvvm.maxntid"
"""Attribute on a kernel `llvm.func`: the most threads per block it is launched with."""

MINCTASM = "nvvm.minctasm"
"""Integer attribute on a kernel `llvm.func`: the fewest blocks per multiprocessor
the kernel must allow (PTX `.minnctapersm`). With `.maxntid` alone ptxas may cap the
registers for an occupancy of its own choosing and spill a register tile; saying
one block is enough lets it keep the tile in registers."""

_MAX_BLOCK = 1024
_MAX_GRID = (1 << 31) - 1

ThreadIdXOp = _sreg("tid.x", _MAX_BLOCK)
ThreadIdYOp = _sreg("tid.y", _MAX_BLOCK)
ThreadIdZOp = _sreg("tid.z", 64)
BlockDimXOp = _sreg("ntid.x", _MAX_BLOCK + 1)
BlockDimYOp = _sreg("ntid.y", _MAX_BLOCK + 1)
BlockDimZOp = _sreg("ntid.z", 65)
BlockIdXOp = _sreg("ctaid.x", _MAX_GRID)
BlockIdYOp = _sreg("ctaid.y", 65535)
BlockIdZOp = _sreg("ctaid.z", 65535)
GridDimXOp = _sreg("nctaid.x", _MAX_GRID + 1)
GridDimYOp = _sreg("nctaid.y", 65536)
GridDimZOp = _sreg("nctaid.z", 65536)
LaneIdOp = _sreg("laneid", 32)
WarpSizeOp = _sreg("warpsize", 33)

SPECIAL_REGISTERS: dict[tuple[str, str], type[SpecialRegisterOp]] = {
    ("thread_id", "x"): ThreadIdXOp,
    ("thread_id", "y"): ThreadIdYOp,
    ("thread_id", "z"): ThreadIdZOp,
    ("block_dim", "x"): BlockDimXOp,
    ("block_dim", "y"): BlockDimYOp,
    ("block_dim", "z"): BlockDimZOp,
    ("block_id", "x"): BlockIdXOp,
    ("block_id", "y"): BlockIdYOp,
    ("block_id", "z"): BlockIdZOp,
    ("grid_dim", "x"): GridDimXOp,
    ("grid_dim", "y"): GridDimYOp,
    ("grid_dim", "z"): GridDimZOp,
}
"""The register behind each gpu id/size op, by (gpu op kind, dimension)."""


# --------------------------------------------------------------------------------------
# Attributes of the tensor-core ops and copies
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


class LoadCacheModifier(StrEnum):
    CA = "ca"
    CG = "cg"


@irdl_attr_definition
class LoadCacheModifierAttr(EnumAttribute[LoadCacheModifier]):
    """`cp.async`'s cache operator: `ca` (cache in L1 too) or `cg` (L2 only, 16-byte
    copies only)."""

    name = "nvvm.load_cache_modifier"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> LoadCacheModifier:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(LoadCacheModifier)


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


# --------------------------------------------------------------------------------------
# Asynchronous copies
# --------------------------------------------------------------------------------------


@irdl_op_definition
class CpAsyncOp(IntrinsicOp):
    """`nvvm.cp.async.shared.global`: start copying `size` bytes (4, 8 or 16) from
    global to shared memory; with `cpSize` (i32 bytes, at most `size`) only that many
    are read and the rest of the destination is zero-filled.

        nvvm.cp.async.shared.global %dst, %src, 16, cache = cg
            : !llvm.ptr<3>, !llvm.ptr<1>
        nvvm.cp.async.shared.global %dst, %src, 16, cache = cg, %bytes
            : !llvm.ptr<3>, !llvm.ptr<1>, i32
    """

    name = "nvvm.cp.async.shared.global"

    dst = operand_def(LLVMPointerType)
    src = operand_def(LLVMPointerType)
    cpSize = opt_operand_def(IntegerType)
    size = prop_def(IntegerAttr)
    modifier = prop_def(LoadCacheModifierAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        size: int,
        bypass_l1: bool,
        cp_size: SSAValue | Operation | None = None,
    ):
        modifier = LoadCacheModifier.CG if bypass_l1 else LoadCacheModifier.CA
        super().__init__(
            operands=[
                SSAValue.get(dst),
                SSAValue.get(src),
                [] if cp_size is None else [SSAValue.get(cp_size)],
            ],
            properties={
                "size": IntegerAttr(size, i32),
                "modifier": LoadCacheModifierAttr(modifier),
            },
        )

    @property
    def bytes(self) -> int:
        return self.size.value.data

    def intrinsic(self) -> str:
        suffix = ".s" if self.cpSize is not None else ""
        return (
            f"llvm.nvvm.cp.async.{self.modifier.data.value}.shared.global."
            f"{self.bytes}{suffix}"
        )

    def verify_(self) -> None:
        if self.bytes not in (4, 8, 16):
            raise VerifyException(f"size must be 4, 8 or 16 bytes, got {self.bytes}")
        if self.modifier.data == LoadCacheModifier.CG and self.bytes != 16:
            raise VerifyException("cache = cg copies 16 bytes only")
        for what, ptr, space in (("dst", self.dst, 3), ("src", self.src, 1)):
            addr = ptr.type.addr_space  # pyright: ignore[reportAttributeAccessIssue]
            if not isinstance(addr, IntAttr) or addr.data != space:
                raise VerifyException(
                    f"{what} must be an !llvm.ptr<{space}>, got {ptr.type}"
                )
        if self.cpSize is not None and self.cpSize.type != i32:
            raise VerifyException(f"cpSize must be an i32, got {self.cpSize.type}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list((self.dst, self.src), printer.print_ssa_value)
        printer.print_string(f", {self.bytes}, cache = {self.modifier.data.value}")
        if self.cpSize is not None:
            printer.print_string(", ")
            printer.print_ssa_value(self.cpSize)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.operands], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncOp:
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        src = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        size = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation(",")
        parser.parse_keyword("cache")
        parser.parse_punctuation("=")
        modifier = parser.parse_str_enum(LoadCacheModifier)
        cp_size = None
        if parser.parse_optional_punctuation(",") is not None:
            cp_size = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        while parser.parse_optional_punctuation(",") is not None:
            types.append(parser.parse_type())
        names = [dst, src] + ([cp_size] if cp_size is not None else [])
        if len(types) != len(names):
            parser.raise_error(f"expected {len(names)} operand types")
        values = [
            parser.resolve_operand(v, t) for v, t in zip(names, types, strict=True)
        ]
        op = cls(
            values[0],
            values[1],
            size,
            modifier == LoadCacheModifier.CG,
            values[2] if cp_size is not None else None,
        )
        op.attributes |= attributes
        return op


@irdl_op_definition
class CpAsyncCommitGroupOp(IntrinsicOp):
    """`nvvm.cp.async.commit.group`: the thread's copies started since the last
    group form a group."""

    name = "nvvm.cp.async.commit.group"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.cp.async.commit.group"
    assembly_format = "attr-dict"


@irdl_op_definition
class CpAsyncWaitGroupOp(IntrinsicOp):
    """`nvvm.cp.async.wait.group N`: wait until at most N of the thread's groups are
    in flight."""

    name = "nvvm.cp.async.wait.group"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.cp.async.wait.group"
    n = prop_def(IntegerAttr)

    def __init__(self, n: int):
        super().__init__(properties={"n": IntegerAttr(n, i32)})

    @property
    def groups(self) -> int:
        return self.n.value.data

    def immediates(self) -> tuple[int, ...]:
        return (self.groups,)

    def verify_(self) -> None:
        if not 0 <= self.groups <= 7:
            raise VerifyException(f"n must be between 0 and 7, got {self.groups}")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.groups}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncWaitGroupOp:
        op = cls(parser.parse_integer(allow_boolean=False, allow_negative=False))
        op.attributes |= parser.parse_optional_attr_dict()
        return op


NVVM = Dialect(
    "nvvm",
    [
        BarrierOp,
        *SPECIAL_REGISTERS.values(),
        LaneIdOp,
        WarpSizeOp,
        LdMatrixOp,
        MmaOp,
        CpAsyncOp,
        CpAsyncCommitGroupOp,
        CpAsyncWaitGroupOp,
    ],
    [MMALayoutAttr, MMATypesAttr, MMAShapeAttr, LoadCacheModifierAttr],
)
