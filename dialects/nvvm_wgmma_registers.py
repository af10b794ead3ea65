"""Warpgroup MMA with A from registers (PTX's `wgmma.mma_async` with a register A
operand), a run of k16 steps on one accumulator as one op:

    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async.registers (%b0, %b1), (%a0, ..., %a7), %c
        {n = 64 : i64, kind = "f16", transposed_b}
        : !llvm.struct<(f32, ...)> -> !llvm.struct<(f32, ...)>

Step s reads A from the thread's four 32-bit registers `%a`#4s to #4s+3 (two 16-bit
elements each: warp w of the warpgroup holds rows 16 w to 16 w + 15 of the m64 x
k16 A, in `mma.sync` m16n8k16's A layout) and B through the 64-bit descriptor
`%b`#s (MN-major, "transposed", with `transposed_b`). It is inline PTX (one
statement for the run, as `nvvm.accumulation_ptx` writes descriptor runs), and MLIR
has no such op. The PTX ISA asks for a `wgmma.fence` between the writes of the A
registers (and of the accumulator) and the `wgmma`s that read them: the verifier
asks for an `nvvm.wgmma.fence.aligned` right before the op.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, StringAttr, UnitAttr, i32, i64
from xdsl.dialects.llvm import LLVMStructType
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.nvvm_intrinsics import PtxOp
from affinec.dialects.nvvm_wgmma import WgmmaFenceAlignedOp, accumulator_struct
from affinec.hardware.wgmma_layouts import is_wgmma_n


@irdl_op_definition
class WgmmaRegistersRunOp(PtxOp):
    """`nvvm.wgmma.mma_async.registers`: a run of m64nNk16 `wgmma`s, A from
    registers (see the module)."""

    name = "nvvm.wgmma.mma_async.registers"
    FEATURE: ClassVar[str] = "wgmma"

    descriptorsB = var_operand_def(i64)
    a = var_operand_def(i32)
    inouts = operand_def(LLVMStructType)
    n = prop_def(IntegerAttr)
    kind = prop_def(StringAttr)
    transposed_b = opt_prop_def(UnitAttr)
    res = result_def(LLVMStructType)

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = (
        "`(` $descriptorsB `)` `,` `(` $a `)` `,` $inouts attr-dict "
        "`:` type($inouts) `->` type($res)"
    )

    def __init__(
        self,
        descriptors_b,
        a,
        c: SSAValue,
        n: int,
        kind: str,
        transposed_b: bool,
    ):
        super().__init__(
            operands=[list(descriptors_b), list(a), c],
            properties={
                "n": IntegerAttr(n, i64),
                "kind": StringAttr(kind),
                "transposed_b": UnitAttr() if transposed_b else None,
            },
            result_types=[accumulator_struct(n)],
        )

    @property
    def columns(self) -> int:
        return self.n.value.data

    @property
    def steps(self) -> int:
        return len(self.descriptorsB)

    def verify_(self) -> None:
        n = self.columns
        if not is_wgmma_n(n):
            raise VerifyException(f"a wgmma's N is one of 8, 16, ..., 256, got {n}")
        if self.kind.data not in ("f16", "bf16"):
            raise VerifyException(f"A and B are f16 or bf16, got {self.kind.data}")
        if len(self.a) != 4 * self.steps or not self.steps:
            raise VerifyException(
                f"{self.steps} steps read 4 registers of A each, got {len(self.a)}"
            )
        expected = accumulator_struct(n)
        for what, t in (("C", self.inouts.type), ("D", self.res.type)):
            if t != expected:
                raise VerifyException(f"{what} is {expected}, got {t}")
        if not isinstance(self.prev_op, WgmmaFenceAlignedOp):
            raise VerifyException(
                "a wgmma reading A from registers needs nvvm.wgmma.fence.aligned "
                "right before it (the registers' writes ordered before its reads)"
            )

    def ptx(self) -> tuple[str, str]:
        registers = self.columns // 2
        steps = self.steps
        d = ", ".join(f"${r}" for r in range(registers))
        kind = self.kind.data
        trans = int(self.transposed_b is not None)
        lines = ["{", ".reg .pred p;", "setp.ne.b32 p, 1, 0;"]
        for s in range(steps):
            b = registers + s
            a = ", ".join(f"${registers + steps + 4 * s + r}" for r in range(4))
            lines.append(
                f"wgmma.mma_async.sync.aligned.m64n{self.columns}k16.f32.{kind}.{kind} "
                f"{{{d}}}, {{{a}}}, ${b}, p, 1, 1, {trans};"
            )
        lines.append("}")
        constraints = ",".join(
            ["=f"] * registers
            + ["l"] * steps
            + ["r"] * (4 * steps)
            + [str(r) for r in range(registers)]
        )
        return "\n".join(lines), constraints


WGMMA_REGISTER_OPS = (WgmmaRegistersRunOp,)

__all__ = ["WGMMA_REGISTER_OPS", "WgmmaRegistersRunOp"]
