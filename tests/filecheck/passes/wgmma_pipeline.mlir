// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers' | filecheck %s --check-prefix=BEFORE
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-map-threads,affinec-plan-shared-memory' | filecheck %s --check-prefix=LAYOUT
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-map-threads,affinec-plan-shared-memory,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm' | filecheck %s --check-prefix=NVVM
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-map-threads,affinec-plan-shared-memory{pad=false},affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm' | filecheck %s --check-prefix=PACKED
// RUN: sed 's/sm_90a/sm_80/' %s | not affinec-opt - -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma' 2>&1 | filecheck %s --check-prefix=SM80

// A 128x64x64 f16 product on the tensor-core route for sm_90a: 64x64 blocks, steps
// of 32 in two stages, the output staged. affinec-wgmma takes the IR affinec-mma-sync
// takes (BEFORE, the compute band reading the promoted tiles) and writes one
// affinec.warpgroup_mma a step, the accumulator in each thread's registers, zeroed
// and written back as affinec-mma-sync does (CHECK). The planner lays the tiles out
// as 8x8 core matrices, their rows unpadded, the copies writing into them; the
// bank model puts A's core matrices 10 rows of 16 bytes apart and B's 9 (LAYOUT;
// packed, a row's 16-byte copies would all land on the same four banks). The
// lowering writes each step as wgmma.mma_async on descriptors whose fields follow
// the tiles' shapes: A (64x32, K-major) LBO 160 B, SBO 640 B; B (32x64, MN-major,
// PTX's transposed B) LBO 1152 B, SBO 144 B; a step of 16 moves A by 320 B and B
// by 2304 B (NVVM). Packed (the planner told not to pad): A LBO 128 B, SBO 512 B;
// B LBO 1024 B, SBO 128 B; steps 256 B and 2048 B (PACKED). Another target is
// refused (SM80).

// BEFORE:      %B_shared = memref.alloc() : memref<2x32x64xf16, 3 : i64>
// BEFORE-NEXT: %A_shared = memref.alloc() : memref<2x64x32xf16, 3 : i64>
// BEFORE:      nvgpu.device_async_wait
// BEFORE:      gpu.barrier
// BEFORE-NEXT: affine.parallel (%[[I:.+]], %[[J:.+]]) = (0, 0) to (64, 64) {
// BEFORE-NEXT:   affine.for %[[P:.+]] = 0 to 32 {
// BEFORE-NEXT:     affine.load %A_shared[%{{.+}}, %[[I]], %[[P]]]
// BEFORE:          affine.load %B_shared[%{{.+}}, %[[P]], %[[J]]]

// CHECK:      %fragments = memref.alloc() : memref<1x8x4xf32, 5 : i64>
// CHECK:      affine.parallel (%tx) = (0) to (128) {
// CHECK:        affine.store %zero, %fragments[0, %nt, %e]
// CHECK:      } {affinec.mapping = "thread"}
// CHECK:      nvgpu.device_async_wait
// CHECK:      gpu.barrier
// CHECK-NEXT: affine.parallel (%[[TX:.+]]) = (0) to (128) {
// CHECK:        %row = affine.apply affine_map<(d0) -> (d0 floordiv 128 * 64)>(%[[TX]])
// CHECK:        affinec.warpgroup_mma %fragments, %A_shared[%{{.+}}, %row], %B_shared[%{{.+}}] : memref<1x8x4xf32, 5 : i64>, memref<2x64x32xf16, 3 : i64>, memref<2x32x64xf16, 3 : i64>
// CHECK-NEXT: } {affinec.mapping = "thread"}
// CHECK-NOT:  affine.load %A_shared
// CHECK:      affine.load %fragments
// CHECK:      affine.vector_store %{{.+}}, %output_shared

// LAYOUT:      %B_shared = memref.alloc() : memref<2x4x8x9x8xf16, 3 : i64>
// LAYOUT-NEXT: %A_shared = memref.alloc() : memref<2x8x4x10x8xf16, 3 : i64>
// LAYOUT:      nvgpu.device_async_copy %A[%{{.+}}, %{{.+}}], %A_shared[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}], 8, %{{.+}} : memref<128x64xf16> to memref<2x8x4x10x8xf16, 3 : i64>
// LAYOUT:      affinec.warpgroup_mma %fragments, %A_shared[%{{.+}}, %row], %B_shared[%{{.+}}] : memref<1x8x4xf32, 5 : i64>, memref<2x8x4x10x8xf16, 3 : i64>, memref<2x4x8x9x8xf16, 3 : i64>

// NVVM:      %[[PA:.+]] = affinec.element_pointer %A_shared[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<2x8x4x10x8xf16, 3 : i64>
// NVVM:      %[[SA:.+]] = arith.shrui
// NVVM:      affinec.element_pointer %B_shared
// NVVM:      %[[SB:.+]] = arith.shrui
// NVVM-NEXT: %[[FA:.+]] = arith.constant 171799347200 : i64
// NVVM-NEXT: %[[FB:.+]] = arith.constant 38659424256 : i64
// NVVM-NEXT: %[[DA0:.+]] = arith.ori %[[SA]], %[[FA]] : i64
// NVVM-NEXT: %[[DB0:.+]] = arith.ori %[[SB]], %[[FB]] : i64
// NVVM-NEXT: %[[STEPA:.+]] = arith.constant 20 : i64
// NVVM-NEXT: %[[A1:.+]] = arith.addi %[[SA]], %[[STEPA]] : i64
// NVVM-NEXT: %[[DA1:.+]] = arith.ori %[[A1]], %[[FA]] : i64
// NVVM-NEXT: %[[STEPB:.+]] = arith.constant 144 : i64
// NVVM-NEXT: %[[B1:.+]] = arith.addi %[[SB]], %[[STEPB]] : i64
// NVVM-NEXT: %[[DB1:.+]] = arith.ori %[[B1]], %[[FB]] : i64
// NVVM:      nvvm.fence.proxy.async.shared_cta
// NVVM:      nvvm.wgmma.fence.aligned
// NVVM-NEXT: %[[D0:.+]] = nvvm.wgmma.mma_async %[[DA0]], %[[DB0]], %{{.+}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// NVVM-NEXT: nvvm.wgmma.mma_async %[[DA1]], %[[DB1]], %[[D0]], <m = 64, n = 64, k = 16>
// NVVM-NEXT: nvvm.wgmma.commit.group.sync.aligned
// NVVM-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// NVVM:      memref.store %{{.+}}, %fragments

// PACKED:      %[[PA:.+]] = affinec.element_pointer %A_shared[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<2x8x4x8x8xf16, 3 : i64>
// PACKED:      %[[SA:.+]] = arith.shrui
// PACKED:      affinec.element_pointer %B_shared
// PACKED:      %[[SB:.+]] = arith.shrui
// PACKED-NEXT: %[[FA:.+]] = arith.constant 137439477760 : i64
// PACKED-NEXT: %[[FB:.+]] = arith.constant 34363932672 : i64
// PACKED-NEXT: %[[DA0:.+]] = arith.ori %[[SA]], %[[FA]] : i64
// PACKED-NEXT: %[[DB0:.+]] = arith.ori %[[SB]], %[[FB]] : i64
// PACKED-NEXT: %[[STEPA:.+]] = arith.constant 16 : i64
// PACKED-NEXT: %[[A1:.+]] = arith.addi %[[SA]], %[[STEPA]] : i64
// PACKED-NEXT: %[[DA1:.+]] = arith.ori %[[A1]], %[[FA]] : i64
// PACKED-NEXT: %[[STEPB:.+]] = arith.constant 128 : i64
// PACKED-NEXT: %[[B1:.+]] = arith.addi %[[SB]], %[[STEPB]] : i64
// PACKED-NEXT: %[[DB1:.+]] = arith.ori %[[B1]], %[[FB]] : i64
// PACKED:      nvvm.fence.proxy.async.shared_cta
// PACKED:      nvvm.wgmma.fence.aligned
// PACKED-NEXT: %[[D0:.+]] = nvvm.wgmma.mma_async %[[DA0]], %[[DB0]], %{{.+}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// PACKED-NEXT: nvvm.wgmma.mma_async %[[DA1]], %[[DB1]], %[[D0]], <m = 64, n = 64, k = 16>
// PACKED-NEXT: nvvm.wgmma.commit.group.sync.aligned
// PACKED-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// PACKED:      memref.store %{{.+}}, %fragments

// SM80: error: 'affine.parallel' op wgmma needs sm_90a; the module is compiled for sm_80

builtin.module attributes {affinec.spec = "matmul m=128 n=64 k=64 dtype=f16 epilogue=none", affinec.target = #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">} {
  func.func @matmul(%A: memref<128x64xf16>, %B: memref<64x64xf16>, %C: memref<128x64xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i, %j) = (0, 0) to (128, 64) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 64 {
        %a = affine.load %A[%i, %p] : memref<128x64xf16>
        %a32 = arith.extf %a : f16 to f32
        %b = affine.load %B[%p, %j] : memref<64x64xf16>
        %b32 = arith.extf %b : f16 to f32
        %prod = arith.mulf %a32, %b32 : f32
        %old = affine.load %acc[] : memref<f32>
        %new = arith.addf %old, %prod : f32
        affine.store %new, %acc[] : memref<f32>
      }
      %sum = affine.load %acc[] : memref<f32>
      %out = arith.truncf %sum : f32 to f16
      affine.store %out, %C[%i, %j] : memref<128x64xf16>
    }
    func.return
  }
}
