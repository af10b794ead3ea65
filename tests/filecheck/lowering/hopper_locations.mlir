// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm' --print-debuginfo | filecheck %s
// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm' --print-debuginfo | not grep '<stdin>'
// RUN: not affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm,nvvm-attach-target{chip=sm_80},convert-nvgpu-to-nvvm' 2>&1 | filecheck %s --check-prefix=LATER

// The ops affinec-wgmma-gemm writes stand for the function they replace and carry
// its location, so that a later pass's diagnostic points at the user's file (they
// were located in the pass's own generated text, at `<stdin>:L:C`).

// CHECK: gpu.launch_func @kernels::@matmul_kernel
// CHECK-SAME: loc("{{.*}}hopper_locations.mlir":[[# @LINE + 8]]:3)
// CHECK: nvgpu.warpgroup.mma
// CHECK-SAME: loc("{{.*}}hopper_locations.mlir":[[# @LINE + 6]]:3)

// LATER-NOT: <stdin>
// LATER: hopper_locations.mlir:[[# @LINE + 3]]:3: error: 'nvgpu.{{.*}}' op needs sm_90 or sm_90a
// LATER-NOT: <stdin>
builtin.module attributes {affinec.spec = "matmul m=128 n=128 k=256 dtype=f16 epilogue=none"} {
  func.func @matmul(%A: memref<128x256xf16>, %B: memref<256x128xf16>, %C: memref<128x128xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i, %j) = (0, 0) to (128, 128) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 256 {
        %a = affine.load %A[%i, %p] : memref<128x256xf16>
        %a32 = arith.extf %a : f16 to f32
        %b = affine.load %B[%p, %j] : memref<256x128xf16>
        %b32 = arith.extf %b : f16 to f32
        %prod = arith.mulf %a32, %b32 : f32
        %old = affine.load %acc[] : memref<f32>
        %new = arith.addf %old, %prod : f32
        affine.store %new, %acc[] : memref<f32>
      }
      %sum = affine.load %acc[] : memref<f32>
      %out = arith.truncf %sum : f32 to f16
      affine.store %out, %C[%i, %j] : memref<128x128xf16>
    }
    func.return
  }
}
