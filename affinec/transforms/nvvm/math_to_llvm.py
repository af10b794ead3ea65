"""math ops as LLVM intrinsics: `math.fma` is `llvm.fma.f32` (PTX `fma.rn`), on a
vector `llvm.fma.v2f16`, on an n-D vector one call per row."""

from __future__ import annotations

from xdsl.dialects import math

from affinec.transforms.nvvm.converter import KernelConverter, converts
from affinec.transforms.nvvm.vector_to_llvm import intrinsic_call


@converts(math.FmaOp)
def _fma(op: math.FmaOp, c: KernelConverter):
    args = [c.v(v) for v in op.operands]
    return [intrinsic_call(c, "llvm.fma", args, op.result.type)]
