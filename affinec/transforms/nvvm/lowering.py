"""A kernel's arith, index, memref, cf and gpu ops as xDSL's llvm dialect plus nvvm.

The work behind `convert-gpu-to-nvvm`. The kernel is translated in one walk, block by
block in dominance order, into a fresh `llvm.func`: one small converter per op kind
(`@converts`), each building llvm ops from already converted operands. Conventions:

- `index` is an integer of the pass's `index-bitwidth` (64 by default, as MLIR);
- a memref is a bare pointer to its first element, in its memory space: kernel
  arguments are global memory (address space 1; marked `noalias` in a kernel with a
  launch record, whose launches the runtime makes and checks for aliasing), workgroup attributions become internal shared
  globals (address space 3, aligned to 16 bytes) or, when they take more than the
  48 KiB of static shared memory, typed `getelementptr`s at 16-byte aligned offsets
  of one external `!llvm.array<0 x i8>` (dynamic shared memory, which the kernel's
  launches and launch record are given), `memref.alloca` an `llvm.alloca` in
  the entry block (so SROA can turn it into registers). Shapes are static and the
  layout row-major: an access is one `getelementptr inbounds` at the linearized
  offset;
- n-D vectors are LLVM arrays of 1-D vectors; nvvm ops (and the llvm ops around them)
  that `convert-nvgpu-to-nvvm` put in the kernel keep their form, and
  `affinec.element_pointer` is the address of its element, like a memref access;
- gpu ids read NVVM special registers (`nvvm.read.ptx.sreg.tid.x`, i32, zero-extended
  to `index`), `gpu.barrier` is `nvvm.barrier0`;
- the kernel is marked `nvvm.kernel` and keeps `gpu.kernel` (as MLIR's pass), with
  `nvvm.maxntid` from its known block size,
  and keeps its launch record; a loop's back edge keeps `affinec.unroll`.
"""

from affinec.transforms.nvvm import (  # noqa: F401  (importing registers the converters)
    arith_to_llvm,
    cf_to_llvm,
    gpu_to_nvvm,
    math_to_llvm,
    memref_to_llvm,
    vector_to_llvm,
)
from affinec.transforms.nvvm.converter import (
    KernelConverter,
    check_convertible,
    dynamic_shared_bytes,
)
from affinec.transforms.nvvm.launches import give_dynamic_shared_memory

__all__ = [
    "KernelConverter",
    "check_convertible",
    "dynamic_shared_bytes",
    "give_dynamic_shared_memory",
]
