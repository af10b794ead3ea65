"""`affinec-narrow-indices`: mark each kernel whose index arithmetic provably fits in
32 bits, so `convert-gpu-to-nvvm{index-bitwidth=0}` lowers `index` to `i32` there.

The proof (`affinec/transforms/gpu/index_width.py`) bounds every index value and
every intermediate value of every affine expression of the kernel with the value
ranges, and every buffer's size; it runs at the gpu level, before `lower-affine`
turns loops into branches whose variables no range analysis follows.

    gpu.func @conv_kernel(...) kernel attributes {...}

becomes

    gpu.func @conv_kernel(...) kernel attributes {..., affinec.index_bitwidth = 32 : i64}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from affinec.dialects import gpu
from affinec.dialects.affinec import INDEX_BITWIDTH
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.index_width import fits_32_bits


@dataclass(frozen=True)
class AffinecNarrowIndices(ModulePass):
    """Mark kernels whose index arithmetic provably fits in 32 bits."""

    name = "affinec-narrow-indices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        kernels = [f for f in op.walk() if isinstance(f, gpu.FuncOp) and f.kernel]
        for f in [f for f in kernels if fits_32_bits(f)]:
            f.attributes[INDEX_BITWIDTH] = IntegerAttr(32, i64)
