// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm{tile-sizes=64,64 stages=2}' | filecheck %s
// RUN: affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm{tile-sizes=64,64 stages=2},convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' -t 'ptx{arch=sm_90a}' | filecheck %s --check-prefix=PTX
// RUN: not affinec-opt %s -p 'nvvm-attach-target{chip=sm_90},affinec-wgmma-gemm' 2>&1 | filecheck %s --check-prefix=SM90
// RUN: not affinec-opt %s -p 'nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm{tile-sizes=64,512}' 2>&1 | filecheck %s --check-prefix=TILE

// The naive product (C = relu(A x B + bias), 100 x 64 x 128, f16) as a Hopper
// kernel: two 64-row blocks (the second past A's edge: TMA fills it with zeros,
// the copy-out skips it), two stages of 64 of K, MMAs left in flight.

builtin.module attributes {affinec.spec = "matmul m=100 n=64 k=128 dtype=f16 epilogue=bias-relu"} {
  func.func @matmul(%A: memref<100x128xf16>, %B: memref<128x64xf16>, %bias: memref<64xf16>, %C: memref<100x64xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i, %j) = (0, 0) to (100, 64) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 128 {
        %a = affine.load %A[%i, %p] : memref<100x128xf16>
        %a32 = arith.extf %a : f16 to f32
        %b = affine.load %B[%p, %j] : memref<128x64xf16>
        %b32 = arith.extf %b : f16 to f32
        %prod = arith.mulf %a32, %b32 : f32
        %old = affine.load %acc[] : memref<f32>
        %new = arith.addf %old, %prod : f32
        affine.store %new, %acc[] : memref<f32>
      }
      %sum = affine.load %acc[] : memref<f32>
      %bval = affine.load %bias[%j] : memref<64xf16>
      %bval32 = arith.extf %bval : f16 to f32
      %biased = arith.addf %sum, %bval32 : f32
      %relu = arith.maximumf %biased, %zero : f32
      %out = arith.truncf %relu : f32 to f16
      affine.store %out, %C[%i, %j] : memref<100x64xf16>
    }
    func.return
  }
}

// CHECK:      func.func @matmul(%A: memref<100x128xf16>, %B: memref<128x64xf16>, %bias: memref<64xf16>, %C: memref<100x64xf16>)
// CHECK:        %mapA = nvgpu.tma.create.descriptor %ua box[%ctm, %ck]
// CHECK:        gpu.launch_func @kernels::@matmul_kernel blocks in (%blocks_x, %blocks_y, %blocks_z) threads in (%threads, %c1, %c1) args(%mapA : {{.*}}, %mapB : {{.*}}, %bias : memref<64xf16>, %C : memref<100x64xf16>)
// CHECK:      gpu.func @matmul_kernel
// CHECK-SAME:   affinec.launch = {kernel = "matmul_kernel", host = "matmul", grid = array<i64: 1, 2, 1>, block = array<i64: 128, 1, 1>
// CHECK-SAME:   arguments = ["A", "B", "bias", "C"]
// CHECK:        nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes
// CHECK:        nvgpu.tma.async.load %mapA[%k0, %row0], %bar[%c0] to %sa0
// CHECK:        nvgpu.mbarrier.try_wait.parity %bar[%c0], %false, %ticks
// CHECK:        %acc0 = nvgpu.warpgroup.mma %da0, %db0, %zero {transposeB}
// CHECK:        %acc1 = nvgpu.warpgroup.mma %da1, %db1, %acc0 {transposeB}
// CHECK:        nvgpu.warpgroup.mma.store %acc1, %tile
// CHECK:        %inside = arith.andi %in_m, %in_n : i1
// CHECK:        %v = vector.load %tile[%r, %c] : memref<64x64xf32, 3 : i64>, vector<8xf32>
// CHECK:        %bias_v = vector.load %bias[%gc] : memref<64xf16>, vector<8xf16>
// CHECK:        %relu = arith.maximumf %bias_r, %zero_f : vector<8xf32>
// CHECK:        vector.store %o, %C[%gr, %gc] : memref<100x64xf16>, vector<8xf16>

// PTX:        .target sm_90a
// PTX:        .param .align 64 .b8 matmul_kernel_param_0[128]
// PTX:        cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:        wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// PTX:        ld.shared.v4.b32
// PTX:        st.global.v4.b32

// SM90:       error: {{.*}}affinec-wgmma-gemm writes wgmma, which sm_90 does not have: nvvm-attach-target{chip=sm_90a} first

// TILE:       error: {{.*}}a tile of 16, 32, 64, 128 or 256 columns, not 512
