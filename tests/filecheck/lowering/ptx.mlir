// RUN: affinec-opt %S/inputs/conv_split.mlir -p 'affinec-lower-to-nvvm' -t ptx | filecheck %s
// RUN: affinec-opt %S/inputs/conv_split.mlir -p 'affinec-lower-to-nvvm' -t 'ptx{arch=sm_90}' | filecheck %s --check-prefix=SM90
// RUN: affinec-opt %S/inputs/conv_split.mlir -p 'affinec-lower-to-nvvm' -t llvm | filecheck %s --check-prefix=LLVM
// RUN: affinec gen conv --n 1 --c 3 --h 9 --w 9 --k 4 --r 3 --s 3 --stride 2 --pad 1 --dtype f16 --epilogue bias-relu | affinec-opt -p affinec-default -t ptx | filecheck %s --check-prefix=DEFAULT

// CHECK:      .version 8.0
// CHECK-NEXT: .target sm_80
// CHECK-NEXT: .address_size 64
// CHECK:      .visible .entry conv_kernel(
// CHECK-NEXT:   .param .u64 .ptr .global .align 1 conv_kernel_param_0,
// CHECK:      .maxntid 32, 1, 1
// CHECK-NEXT: .minnctapersm 1
// CHECK:        mov.u32 %r{{[0-9]+}}, %ctaid.x;
// CHECK:        mov.u32 %r{{[0-9]+}}, %tid.x;
// CHECK-NOT:  .local
// CHECK:        ret;

// SM90: .version 8.0
// SM90: .target sm_90

// LLVM: target triple = "nvptx64-nvidia-cuda"
// LLVM: define external ptx_kernel void @"conv_kernel"(ptr addrspace(1) noalias %"input", ptr addrspace(1) noalias %"filter", ptr addrspace(1) noalias %"output")
// LLVM: call i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
// LLVM: !nvvm.annotations = !{ !0, !1, !2, !3 }
// LLVM: !"maxntidx", i32 32
// LLVM: !"minctasm", i32 1

// DEFAULT: .entry conv_kernel(
// DEFAULT: ld.global.nc.b16
// DEFAULT: cvt.f32.f16
// DEFAULT: max.NaN.f32
// DEFAULT: cvt.rn.f16.f32
// DEFAULT: st.global.b16
