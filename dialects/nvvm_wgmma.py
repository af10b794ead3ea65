"""Hopper's warpgroup MMA in the nvvm dialect, as MLIR names and writes it, and its
attributes (`#nvvm.wgmma_type`, `#nvvm.wgmma_scale_in`, `#nvvm.wgmma_scale_out`,
`#nvvm.mma_int_overflow`):

    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async %descA, %descB, %c, <m = 64, n = 64, k = 16>,
        D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
        : !llvm.struct<(f32, ...)> -> !llvm.struct<(f32, ...)>
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0

`wgmma.mma_async` is inline PTX (a `PtxOp`: LLVM has no intrinsic for it); the
others are intrinsic calls. A's layout `row` (MLIR's word) is K-major A, B's `row`
MN-major ("transposed") B, the tiles `nvgpu.warpgroup.mma` reads.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import Float32Type, IntegerAttr, i64
from xdsl.dialects.llvm import LLVMStructType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from affinec.dialects.nvvm_intrinsics import IntrinsicOp, PtxOp
from affinec.dialects.nvvm_mma import MMALayout, MMALayoutAttr, MMAShapeAttr
from affinec.hardware.wgmma_layouts import is_wgmma_n

# --------------------------------------------------------------------------------------
# Attributes of wgmma (MLIR's)
# --------------------------------------------------------------------------------------


class _AngleEnum:
    """`#nvvm.<name><value>`: an enum attribute written in angle brackets."""

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")  # pyright: ignore

    @classmethod
    def parse_parameter(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            return parser.parse_str_enum(cls.enum_type)  # pyright: ignore


class WGMMAType(StrEnum):
    F16 = "f16"
    BF16 = "bf16"
    TF32 = "tf32"
    F32 = "f32"


class WGMMAScaleIn(StrEnum):
    ONE = "one"
    NEG = "neg"


class WGMMAScaleOut(StrEnum):
    ZERO = "zero"
    ONE = "one"


class MMAIntOverflow(StrEnum):
    WRAPPED = "wrapped"
    SATFINITE = "satfinite"


@irdl_attr_definition
class WGMMATypeAttr(_AngleEnum, EnumAttribute[WGMMAType]):
    """`#nvvm.wgmma_type<f16>`."""

    name = "nvvm.wgmma_type"


@irdl_attr_definition
class WGMMAScaleInAttr(_AngleEnum, EnumAttribute[WGMMAScaleIn]):
    """`#nvvm.wgmma_scale_in<one>`: A or B as is, or negated."""

    name = "nvvm.wgmma_scale_in"


@irdl_attr_definition
class WGMMAScaleOutAttr(_AngleEnum, EnumAttribute[WGMMAScaleOut]):
    """`#nvvm.wgmma_scale_out<one>`: D = A·B + D, or (`zero`) D = A·B."""

    name = "nvvm.wgmma_scale_out"


@irdl_attr_definition
class MMAIntOverflowAttr(_AngleEnum, EnumAttribute[MMAIntOverflow]):
    """`#nvvm.mma_int_overflow<wrapped>` (integer MMAs only; f32 ignores it)."""

    name = "nvvm.mma_int_overflow"


# --------------------------------------------------------------------------------------
# wgmma
# --------------------------------------------------------------------------------------


@irdl_op_definition
class WgmmaFenceAlignedOp(IntrinsicOp):
    """`nvvm.wgmma.fence.aligned`: order register and shared-memory accesses before
    the `wgmma`s that follow."""

    name = "nvvm.wgmma.fence.aligned"
    FEATURE: ClassVar[str] = "wgmma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.fence.sync.aligned"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WgmmaGroupSyncAlignedOp(IntrinsicOp):
    """`nvvm.wgmma.commit.group.sync.aligned`: the `wgmma`s issued so far form a
    group."""

    name = "nvvm.wgmma.commit.group.sync.aligned"
    FEATURE: ClassVar[str] = "wgmma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.commit_group.sync.aligned"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WgmmaWaitGroupSyncOp(IntrinsicOp):
    """`nvvm.wgmma.wait.group.sync.aligned N`: wait until at most N groups of
    `wgmma` are in flight; their results are in registers then."""

    name = "nvvm.wgmma.wait.group.sync.aligned"
    FEATURE: ClassVar[str] = "wgmma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.wait_group.sync.aligned"

    group = prop_def(IntegerAttr)

    def __init__(self, group: int = 0):
        super().__init__(properties={"group": IntegerAttr(group, i64)})

    def immediates(self) -> tuple:
        return ((64, self.group.value.data),)

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaWaitGroupSyncOp:
        group = parser.parse_integer(allow_boolean=False, allow_negative=False)
        op = cls(group)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.group.value.data}")
        printer.print_op_attributes(self.attributes)


def accumulator_struct(n: int) -> LLVMStructType:
    """The registers of an m64nNk16 f32 accumulator: N/2 f32 a thread."""
    return LLVMStructType.from_type_list([Float32Type()] * (n // 2))


@irdl_op_definition
class WgmmaMmaAsyncOp(PtxOp):
    """`nvvm.wgmma.mma_async`: one `wgmma.mma_async.sync.aligned.m64nNk16.f32` of the
    warpgroup, A and B from shared memory through their 64-bit descriptors, D =
    A × B + C in each thread's N/2 registers (D = A × B with `D[<f32>, <zero>, ...]`,
    C's registers then unread)."""

    name = "nvvm.wgmma.mma_async"
    FEATURE: ClassVar[str] = "wgmma"

    descriptorA = operand_def(i64)
    descriptorB = operand_def(i64)
    inouts = operand_def(LLVMStructType)
    shape = prop_def(MMAShapeAttr)
    typeA = prop_def(WGMMATypeAttr)
    typeB = prop_def(WGMMATypeAttr)
    typeD = prop_def(WGMMATypeAttr)
    scaleD = prop_def(WGMMAScaleOutAttr)
    scaleA = prop_def(WGMMAScaleInAttr)
    scaleB = prop_def(WGMMAScaleInAttr)
    layoutA = prop_def(MMALayoutAttr)
    layoutB = prop_def(MMALayoutAttr)
    satfinite = opt_prop_def(MMAIntOverflowAttr)
    res = result_def(LLVMStructType)

    def __init__(
        self,
        a: SSAValue,
        b: SSAValue,
        c: SSAValue,
        n: int,
        operands: str,
        accumulate: bool = True,
    ):
        kind = WGMMATypeAttr(WGMMAType(operands))
        super().__init__(
            operands=[a, b, c],
            properties={
                "shape": MMAShapeAttr(64, n, 16),
                "typeA": kind,
                "typeB": kind,
                "typeD": WGMMATypeAttr(WGMMAType.F32),
                "scaleD": WGMMAScaleOutAttr(
                    WGMMAScaleOut.ONE if accumulate else WGMMAScaleOut.ZERO
                ),
                "scaleA": WGMMAScaleInAttr(WGMMAScaleIn.ONE),
                "scaleB": WGMMAScaleInAttr(WGMMAScaleIn.ONE),
                "layoutA": MMALayoutAttr(MMALayout.ROW),
                "layoutB": MMALayoutAttr(MMALayout.ROW),
                "satfinite": MMAIntOverflowAttr(MMAIntOverflow.WRAPPED),
            },
            result_types=[accumulator_struct(n)],
        )

    @property
    def n(self) -> int:
        return self.shape.n.data

    @property
    def accumulates(self) -> bool:
        return self.scaleD.data == WGMMAScaleOut.ONE

    @property
    def transposed_b(self) -> bool:
        """PTX's imm-trans-b: B is MN-major (MLIR's `row` B)."""
        return self.layoutB.data == MMALayout.ROW

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaMmaAsyncOp:
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        c = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        pos = parser.pos
        m, n, k = (x.data for x in MMAShapeAttr.parse_parameters(parser))
        if not is_wgmma_n(n):
            parser.raise_error(
                f"a wgmma's N is one of 8, 16, ..., 256, got {n}", pos, parser.pos
            )

        def operand(letter: str, scale, third) -> tuple:
            parser.parse_punctuation(",")
            parser.parse_characters(letter)
            parser.parse_punctuation("[")
            kind = WGMMATypeAttr(WGMMATypeAttr.parse_parameter(parser))
            parser.parse_punctuation(",")
            s = scale(scale.parse_parameter(parser))
            parser.parse_punctuation(",")
            t = third(third.parse_parameter(parser))
            parser.parse_punctuation("]")
            return kind, s, t

        d = operand("D", WGMMAScaleOutAttr, MMAIntOverflowAttr)
        ta = operand("A", WGMMAScaleInAttr, MMALayoutAttr)
        tb = operand("B", WGMMAScaleInAttr, MMALayoutAttr)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        c_type = parser.parse_type()
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(a, i64),
            parser.resolve_operand(b, i64),
            parser.resolve_operand(c, c_type),
            n,
            ta[0].data.value,
        )
        op.properties |= {
            "shape": MMAShapeAttr(m, n, k),
            "typeD": d[0], "scaleD": d[1], "satfinite": d[2],
            "typeA": ta[0], "scaleA": ta[1], "layoutA": ta[2],
            "typeB": tb[0], "scaleB": tb[1], "layoutB": tb[2],
        }  # fmt: skip
        op.results[0]._type = result_type  # pyright: ignore[reportAttributeAccessIssue]
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(
            (self.descriptorA, self.descriptorB, self.inouts), printer.print_ssa_value
        )
        printer.print_string(", ")
        self.shape.print_parameters(printer)
        for letter, kind, scale, third in (
            ("D", self.typeD, self.scaleD, self.satfinite),
            ("A", self.typeA, self.scaleA, self.layoutA),
            ("B", self.typeB, self.scaleB, self.layoutB),
        ):
            printer.print_string(f", {letter}[")
            for k, attr in enumerate((kind, scale, third)):
                if k:
                    printer.print_string(", ")
                attr.print_parameter(printer)  # pyright: ignore
            printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.inouts.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.res.type)

    def verify_(self) -> None:
        m, n, k = self.shape.mnk
        if (m, k) != (64, 16) or not is_wgmma_n(n):
            raise VerifyException(
                f"affinec's wgmma is m64nNk16 (N = 8, 16, ..., 256), got m{m}n{n}k{k}"
            )
        if self.typeA != self.typeB or self.typeA.data not in (
            WGMMAType.F16,
            WGMMAType.BF16,
        ):
            raise VerifyException("A and B are both f16 or both bf16")
        if self.typeD.data != WGMMAType.F32:
            raise VerifyException("D is f32")
        if self.scaleA.data != WGMMAScaleIn.ONE or self.scaleB.data != WGMMAScaleIn.ONE:
            raise VerifyException("negated operands are not supported")
        if self.layoutA.data != MMALayout.ROW:
            raise VerifyException("A is K-major (row)")
        expected = accumulator_struct(n)
        for what, t in (("C", self.inouts.type), ("D", self.res.type)):
            if t != expected:
                raise VerifyException(f"{what} is {expected}, got {t}")

    def ptx(self) -> tuple[str, str]:
        return accumulation_ptx([self])


def accumulation_run(first: WgmmaMmaAsyncOp) -> list[WgmmaMmaAsyncOp]:
    """`first` and the wgmmas right after it that accumulate into its registers:
    each takes the one before's D as its C, which nothing else reads.

        %d0 = nvvm.wgmma.mma_async %a0, %b0, %c, ...
        %d1 = nvvm.wgmma.mma_async %a1, %b1, %d0, ...   // the run [d0, d1]

    A run is written as one inline PTX statement (`accumulation_ptx`)."""
    run = [first]
    while isinstance(after := run[-1].next_op, WgmmaMmaAsyncOp) and (
        after.inouts is run[-1].res
        and run[-1].res.has_one_use()
        and after.res.type == first.res.type
    ):
        run.append(after)
    return run


def accumulation_operands(run: list[WgmmaMmaAsyncOp]) -> list[SSAValue]:
    """The inputs of a run's statement (`accumulation_ptx`): each one's two
    descriptors, then the first one's C (whose members are tied to the outputs)."""
    return [v for op in run for v in (op.descriptorA, op.descriptorB)] + [run[0].inouts]


def accumulation_ptx(run: list[WgmmaMmaAsyncOp]) -> tuple[str, str]:
    """One inline PTX statement for a run of wgmmas accumulating into the same
    registers (`accumulation_run`): their N/2 registers the outputs, tied to the
    first one's C; its inputs are `accumulation_operands`. Each wgmma as an inline
    statement of its own would tie a chain of values through the whole unrolled K
    loop, which LLVM's register coalescer joins in time quadratic in its length
    (1.7 s of a 3x3 256-channel kernel's 2.2 s compile, 288 wgmmas in two chains);
    ptxas reads the same instructions either way."""
    registers = run[0].n // 2
    d = ", ".join(f"${r}" for r in range(registers))
    statements = []
    for k, op in enumerate(run):
        kind = op.typeA.data.value
        scale_d = 1 if op.scaleD.data == WGMMAScaleOut.ONE else 0
        a, b = registers + 2 * k, registers + 2 * k + 1
        statements.append(
            "{\n.reg .pred scale_d;\n"
            f"setp.ne.b32 scale_d, {scale_d}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{op.n}k16.f32.{kind}.{kind} "
            f"{{{d}}}, ${a}, ${b}, scale_d, 1, 1, 0, {int(op.transposed_b)};\n}}"
        )
    constraints = ",".join(
        ["=f"] * registers + ["l", "l"] * len(run) + [str(r) for r in range(registers)]
    )
    return "\n".join(statements), constraints
