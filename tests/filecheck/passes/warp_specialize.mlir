// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=128,64 reduction-tile-sizes=16},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies,affinec-map-threads,affinec-warp-specialize' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=128,64 reduction-tile-sizes=16},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies,affinec-map-threads,affinec-warp-specialize' | affinec-opt - | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=128,64 reduction-tile-sizes=16},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies,affinec-map-threads,affinec-warp-specialize,affinec-plan-shared-memory,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}' | filecheck %s --check-prefix=NVVM
// RUN: not affinec-opt %s -p 'affine-loop-tile{tile-sizes=128,64 reduction-tile-sizes=16},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies,affinec-map-threads,affinec-warp-specialize{producer-registers=60}' 2>&1 | filecheck %s --check-prefix=REFUSED

// A 128x64x64 f16 product on the tensor-core route for sm_90a, one 128x64 block (two
// warpgroups of 64 rows), steps of 16 in two stages loaded by TMA (the IR of
// tma_copies.mlir, threads mapped). affinec-warp-specialize gives the block a third
// warpgroup, the producer: the barriers' initialization keeps thread 0 (its band
// now of 384 threads, its body for the first 256); the reduction becomes one band
// split on the warpgroup. The producer (threads 256 to 383) lowers its registers to
// 56 and its first thread (256) issues every load: the first two steps' into both
// stages, then, for steps 2 and 3, each after waiting on its stage's release. The
// consumers (threads 0 to 255) raise theirs to 224, zero their fragments, and each
// step wait on its stage, multiply and hand the stage back (the first thread of
// each warpgroup arrives on stage_released), then store C: no load and no
// gpu.barrier among them (CHECK, also after printing and parsing again). Lowered,
// setmaxregister is what MLIR calls it and the kernel takes 384 threads (NVVM). A
// producer register count setmaxnreg cannot take is refused, located (REFUSED).

// CHECK:      affine.parallel (%tx) = (0) to (384) {
// CHECK-NEXT:   affine.if affine_set<(d0) : (-d0 + 255 >= 0)>(%tx) {
// CHECK:          nvgpu.mbarrier.init %stage_barriers
// CHECK:      gpu.barrier
// CHECK-NEXT: affine.parallel (%[[TX:.+]]) = (0) to (384) {
// CHECK-NEXT:   affine.if affine_set<(d0) : (d0 - 256 >= 0)>(%[[TX]]) {
// CHECK-NEXT:     nvvm.setmaxregister decrease 56
// CHECK:          affine.if affine_set<(d0) : (d0 - 256 == 0)>(%[[TX]]) {
// CHECK:            nvgpu.mbarrier.arrive.expect_tx %stage_barriers
// CHECK:            nvgpu.tma.async.load %A_map
// CHECK:          affine.if affine_set<(d0) : (d0 - 256 == 0)>(%[[TX]]) {
// CHECK:            nvgpu.mbarrier.arrive.expect_tx %stage_barriers
// CHECK:            nvgpu.tma.async.load %B_map
// CHECK:          affine.for %t = 0 to 4 {
// CHECK-NEXT:       affine.if affine_set<(d0) : (-d0 + 2 >= 0)>(%t) {
// CHECK:              affine.if affine_set<(d0) : (d0 - 256 == 0)>(%[[TX]]) {
// CHECK:                affine.if affine_set<(d0) : (d0 - 1 >= 0)>(%t) {
// CHECK:                  nvgpu.mbarrier.try_wait.parity %stage_released
// CHECK:                nvgpu.mbarrier.arrive.expect_tx %stage_barriers
// CHECK:                nvgpu.tma.async.load %A_map
// CHECK:                nvgpu.mbarrier.try_wait.parity %stage_released
// CHECK:                nvgpu.tma.async.load %B_map
// CHECK:        {{^        }}} else {
// CHECK-NEXT:     nvvm.setmaxregister increase 224
// CHECK-NOT:      nvgpu.tma.async.load
// CHECK:          affine.store %zero, %fragments
// CHECK:          affine.for %[[T:.+]] = 0 to 4 {
// CHECK-NOT:        nvgpu.tma.async.load
// CHECK:            nvgpu.mbarrier.try_wait.parity %stage_barriers
// CHECK-NOT:        gpu.barrier
// CHECK:            affinec.warpgroup_mma %fragments
// CHECK-NEXT:       %{{.+}} = affine.apply affine_map<(d0) -> (d0)>(%[[TX]])
// CHECK-NEXT:       affine.if affine_set<(d0) : (d0 mod 128 == 0)>
// CHECK-NEXT:         %{{.+}} = nvgpu.mbarrier.arrive %stage_released
// CHECK-NOT:      nvgpu.tma.async.load
// CHECK:          affine.vector_store %{{.+}}, %C
// CHECK:      } {affinec.mapping = "thread"}
// CHECK-NEXT: } {affinec.mapping = "grid"}

// NVVM:      nvvm.maxntid = array<i32: 384, 1, 1>
// NVVM:      nvvm.setmaxregister decrease 56
// NVVM:      nvvm.setmaxregister increase 224

// REFUSED: error: 'builtin.module' op producer-registers must be a multiple of 8 from 24 to 256, got 60

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
