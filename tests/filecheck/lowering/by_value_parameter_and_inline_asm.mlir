// RUN: affinec-opt %s | filecheck %s --check-prefix=ROUND
// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' | filecheck %s --check-prefix=NVVM
// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t llvm | filecheck %s --check-prefix=LLVM
// RUN: affinec-opt %s -p 'convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t ptx | filecheck %s --check-prefix=PTX

// Two things the Hopper kernels need, in MLIR's syntax: a 128-byte parameter passed
// by value (a TMA descriptor), 64-byte aligned, which the lowering keeps by value
// (MLIR's drops `llvm.byval`) and marks `nvvm.grid_constant`, so that the kernel
// addresses it where the launch put it instead of copying it to local memory; and
// inline PTX (`llvm.inline_asm`), for the instructions LLVM has no intrinsic for
// (wgmma).

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%a: memref<128xf32>, %desc: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>}) kernel {
      %t = gpu.thread_id x
      %v = memref.load %a[%t] : memref<128xf32>
      %w = llvm.inline_asm "add.f32 $0, $1, $1;", "=f,f" %v : (f32) -> f32
      %l = llvm.inline_asm has_side_effects "ld.param.b32 $0, [$1];", "=r,l" %desc : (!llvm.ptr) -> i32
      memref.store %w, %a[%t] : memref<128xf32>
      gpu.return
    }
  }
}

// ROUND: gpu.func @k(%a: memref<128xf32>, %desc: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>}) kernel {

// NVVM: llvm.func @k(%a: !llvm.ptr<1>, %desc: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// NVVM: %w = llvm.inline_asm "add.f32 $0, $1, $1;", "=f,f" %v : (f32) -> f32
// NVVM: llvm.inline_asm has_side_effects "ld.param.b32 $0, [$1];", "=r,l" %desc : (!llvm.ptr) -> i32

// LLVM: define external ptx_kernel void @"k"(ptr addrspace(1) %"a", [128 x i8]* byval([128 x i8]) align 64 %"desc")
// LLVM: call float asm  "add.f32 $0, $1, $1;", "=f,f"
// LLVM: call i32 asm sideeffect "ld.param.b32 $0, [$1];", "=r,l"
// LLVM: !{ void (ptr addrspace(1), [128 x i8]*)* @"k", !"grid_constant", ![[IDX:[0-9]+]] }

// PTX:      .param .align 64 .b8 k_param_1[128]
// PTX:      mov.b64 %rd[[P:[0-9]+]], k_param_1;
// PTX-NEXT: cvta.param.u64 %rd{{[0-9]+}}, %rd[[P]];
// PTX-NOT:  __local_depot
// PTX:      add.f32
// PTX:      ld.param.b32
