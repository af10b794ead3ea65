"""`convert-gpu-to-nvvm`: the kernels of every `gpu.module` into llvm and nvvm ops.

As MLIR's pass of the same name (which also brings in its arith, cf, memref and index
patterns): everything inside a kernel becomes xDSL's `llvm` dialect, the GPU's ids and
barriers our `nvvm` dialect. Memrefs become bare pointers in their address space
(global 1, shared 3); `affinec/llvm_lowering.py` has the conventions. The host side
(`func.func` with `gpu.launch_func`) is left as it is.

    gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = ...} {
      %tx = gpu.thread_id x
      %v = memref.load %a[%tx] : memref<64xf32>
      gpu.return
    }

becomes

    llvm.func @k(%a: !llvm.ptr<1> {llvm.noalias}) attributes {nvvm.kernel,
        nvvm.maxntid = array<i32: 64, 1, 1>} {
      %0 = nvvm.read.ptx.sreg.tid.x : i32
      %tx = llvm.zext nneg %0 : i32 to i64
      %1 = llvm.getelementptr inbounds %a[%tx] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %v = llvm.load %1 {alignment = 4 : i64} : !llvm.ptr<1> -> f32
      llvm.return
    }

Option `index-bitwidth` (64, as MLIR; 32 makes index arithmetic 32-bit, refused when
a buffer has 2**31 elements or more).

Differences from MLIR's pass, on MLIR's inputs: memrefs are passed as bare pointers
only, which MLIR does with `use-bare-ptr-memref-call-conv=true`; its default passes
memref descriptors, which affinec does not implement, so the option must be given
(the default is refused, not silently replaced). Kernel arguments are pointers in the
global address space (MLIR: generic pointers), and the ids read registers whose
ranges the kernel's known sizes bound; both mean the same on the GPU. Workgroup
attributions of more than 48 KiB in all (which MLIR's pass leaves to static globals,
and ptxas then refuses) are placed in dynamic shared memory, MLIR's
`gpu.dynamic_shared_memory` global (`!llvm.array<0 x i8>`, external, address space 3)
at 16-byte aligned offsets, and every `gpu.launch_func` of the kernel, and its launch
record, give that many bytes. Private
attributions, dynamic shapes, non-identity layouts and ops beyond arith, math,
memref, cf and the gpu ids and barrier are refused by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects import gpu
from affinec.dialects.affinec import INDEX_BITWIDTH
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.nvvm.lowering import (
    KernelConverter,
    check_convertible,
    dynamic_shared_bytes,
    give_dynamic_shared_memory,
)


@dataclass(frozen=True)
class ConvertGpuToNvvm(ModulePass):
    """Kernels (gpu.func with arith, memref, cf, gpu ops) to the llvm and nvvm dialects."""

    name = "convert-gpu-to-nvvm"

    index_bitwidth: int = 64
    """Width of `index` in the kernels: 64, 32, or 0 for the width each kernel is
    marked with (`affinec.index_bitwidth`, set by `affinec-narrow-indices`; 64
    where there is none)."""

    use_bare_ptr_memref_call_conv: bool = False
    """MLIR's option: pass memrefs as bare pointers. Only that convention is
    implemented, so false (MLIR's default, memref descriptors) is refused."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        if not self.use_bare_ptr_memref_call_conv:
            raise PassError(
                op,
                "affinec's convert-gpu-to-nvvm passes memrefs as bare pointers only: "
                "give use-bare-ptr-memref-call-conv=true (MLIR's default, memref "
                "descriptors, is not implemented)",
            )
        if self.index_bitwidth not in (0, 32, 64):
            raise PassError(
                op,
                f"index-bitwidth must be 32, 64 or 0 (auto), got {self.index_bitwidth}",
            )
        kernels = [
            (module, f)
            for module in op.body.block.ops
            if isinstance(module, gpu.ModuleOp)
            for f in module.body.block.ops
            if isinstance(f, gpu.FuncOp)
        ]
        widths = {}
        for _, f in kernels:
            check_convertible(f)
            if self.index_bitwidth == 32:
                _check_32_bit_indices(f)
            widths[f] = self.index_bitwidth or _marked_width(f)
        for module, f in kernels:
            dynamic = dynamic_shared_bytes(f)
            converted = KernelConverter(f, widths[f]).convert()
            module.body.block.insert_ops_before(converted, f)
            module.body.block.erase_op(f)
            if dynamic:
                give_dynamic_shared_memory(op, module, converted[-1], dynamic)


def _marked_width(f: gpu.FuncOp) -> int:
    attr = f.attributes.get(INDEX_BITWIDTH)
    if attr is None:
        return 64
    if not isinstance(attr, IntegerAttr) or attr.value.data not in (32, 64):
        raise PassError(f, f"{INDEX_BITWIDTH} must be 32 or 64, got {attr}")
    return attr.value.data


def _check_32_bit_indices(f: gpu.FuncOp) -> None:
    for arg in (*f.arguments, *f.workgroup_args):
        t = arg.type
        if isinstance(t, MemRefType) and math.prod(t.get_shape()) >= 2**31:
            raise PassError(
                f, f"{t} has 2**31 elements or more: it needs index-bitwidth=64"
            )
