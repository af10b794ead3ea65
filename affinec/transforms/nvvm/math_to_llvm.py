"""math ops as LLVM intrinsics: `math.fma` is `llvm.fma.f32` (PTX `fma.rn`)."""

from __future__ import annotations

from xdsl.dialects import llvm, math

from affinec.transforms.nvvm.converter import KernelConverter, converts


@converts(math.FmaOp)
def _fma(op: math.FmaOp, c: KernelConverter):
    t = op.result.type
    name = f"llvm.fma.f{getattr(t, 'bitwidth', 32)}"
    args = [c.v(v) for v in op.operands]
    return [c.emit(llvm.CallIntrinsicOp(name, args, [t]))]
