// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies' | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies,affinec-map-threads,affinec-plan-shared-memory,affinec-convert-parallel-to-gpu,gpu-kernel-outlining,affinec-narrow-indices,lower-affine,cse,convert-nvgpu-to-nvvm' | filecheck %s --check-prefix=NVVM
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies' | affinec-opt - | filecheck %s
// RUN: affinec-opt %s -p 'affine-loop-tile{tile-sizes=64,64 reduction-tile-sizes=32},affinec-split,affinec-sink,affinec-canonicalize,affine-data-copy-generate{fast-mem-capacity=227 generate-dma=true reduction-innermost=true},affine-pipeline-data-transfer{stages=2},affinec-place-buffers,affinec-stage-output,affinec-insert-barriers,affinec-wgmma,affinec-tma-copies{swizzle=false}' | filecheck %s --check-prefix=PLAIN

// A 128x64x64 f16 product on the tensor-core route for sm_90a, 64x64 blocks, steps
// of 32 in two stages (the IR of wgmma_pipeline.mlir). affinec-tma-copies makes a
// tensor map of A and of B on the host and lays each tile out in slabs as wide as
// its rows' bytes allow a swizzle: A's 64x32 tile one slab of 64-byte rows (box
// 64 x 32, swizzle_64b), B's 32x64 one of 128-byte rows (box 32 x 64,
// swizzle_128b); it makes a barrier per stage that thread 0 initializes to 2
// arrivals (A and B). Each copy band becomes one thread's arrive.expect_tx of the
// tile's bytes (4096) and one TMA load per slab; each wgmma step waits, every
// thread, on its stage (t mod 2) at the parity of the stage's use ((t floordiv 2)
// mod 2), with no cp.async group or wait left. The stages are handed back on a
// second barrier each (stage_released, one arrival per warpgroup: 1 here): the
// warpgroup's first thread arrives after its step, and the thread loading step
// t + 1 into stage (t + 1) mod 2 waits, from the stage's second use on (t >= 1),
// for the phase of step t - 1; no gpu.barrier is left in the loop, the one before
// the epilogue stays (CHECK, also after printing and parsing again). Lowered, the
// loads are cp.async.bulk.tensor into the slabs and the kernel takes the tensor
// maps as grid-constant parameters (NVVM). Without the swizzle, slabs of 8 columns
// (16-byte rows): boxes of 64 x 8 and 32 x 8, 4 loads of A and 8 of B a stage
// (PLAIN). (tma_copies_refused.mlir: a matrix TMA cannot load.)

// CHECK:      %A_map = nvgpu.tma.create.descriptor %{{.+}} box[%{{.+}}, %{{.+}}] : memref<*xf16> -> !nvgpu.tensormap.descriptor<tensor = memref<64x32xf16, 3 : i64>, swizzle = swizzle_64b, l2promo = none, oob = zero, interleave = none>
// CHECK:      %B_map = nvgpu.tma.create.descriptor %{{.+}} box[%{{.+}}, %{{.+}}] : memref<*xf16> -> !nvgpu.tensormap.descriptor<tensor = memref<32x64xf16, 3 : i64>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK:      %B_shared = memref.alloc() : memref<2x1x32x64xf16, 3 : i64>
// CHECK-NEXT: %A_shared = memref.alloc() : memref<2x1x64x32xf16, 3 : i64>
// CHECK:      %stage_barriers = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
// CHECK-NEXT: %stage_released = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
// CHECK:      affine.parallel (%{{.+}}) = (0) to (1) {
// CHECK:        %[[TWO:.+]] = arith.constant 2 : index
// CHECK:        nvgpu.mbarrier.init %stage_barriers[%{{.+}}], %[[TWO]]
// CHECK:        nvgpu.mbarrier.init %stage_barriers[%{{.+}}], %[[TWO]]
// CHECK:        %[[ONE:.+]] = arith.constant 1 : index
// CHECK:        nvgpu.mbarrier.init %stage_released[%{{.+}}], %[[ONE]]
// CHECK:        nvgpu.mbarrier.init %stage_released[%{{.+}}], %[[ONE]]
// CHECK:      } {affinec.mapping = "block"}
// CHECK-NEXT: gpu.barrier
// CHECK:      %[[BYTES:.+]] = arith.constant 4096 : index
// CHECK-NEXT: nvgpu.mbarrier.arrive.expect_tx %stage_barriers[%[[S0:.+]]], %[[BYTES]]
// CHECK:      nvgpu.tma.async.load %A_map[%{{.+}}, %{{.+}}], %stage_barriers[%[[S0]]] to %{{.+}} : {{.+}} -> memref<64x32xf16, strided<[32, 1], offset: ?>, 3 : i64>
// CHECK-NOT:  nvgpu.tma.async.load %A_map
// CHECK:      nvgpu.mbarrier.arrive.expect_tx %stage_barriers[%[[S0]]]
// CHECK-NEXT: affine.apply
// CHECK-NEXT: affine.apply
// CHECK-NEXT: affine.apply
// CHECK-NEXT: memref.subview
// CHECK-NEXT: nvgpu.tma.async.load %B_map{{.+}} -> memref<32x64xf16, strided<[64, 1], offset: ?>, 3 : i64>
// CHECK-NEXT: } {affinec.mapping = "block"}
// CHECK:      affine.for %t = 0 to 2 {
// CHECK-NOT:    gpu.barrier
// CHECK:        %[[NEXT:.+]] = affine.apply affine_map<(d0) -> ((d0 + 1) mod 2)>(%t)
// CHECK:        affine.if affine_set<(d0) : (d0 - 1 >= 0)>(%t) {
// CHECK-NEXT:     %[[Q:.+]] = affine.apply affine_map<(d0) -> (((d0 + 1) floordiv 2 + 1) mod 2)>(%t)
// CHECK:          nvgpu.mbarrier.try_wait.parity %stage_released[%[[NEXT]]]
// CHECK:        nvgpu.mbarrier.arrive.expect_tx %stage_barriers[%[[NEXT]]]
// CHECK-NOT:    gpu.barrier
// CHECK:        %[[STAGE:.+]] = affine.apply affine_map<(d0) -> (d0 mod 2)>(%{{.+}})
// CHECK-NEXT:   affine.parallel (%{{.+}}) = (0) to (128) {
// CHECK-NEXT:     %[[P:.+]] = affine.apply affine_map<(d0) -> (d0 floordiv 2 mod 2)>(%{{.+}})
// CHECK:          %[[ODD:.+]] = arith.cmpi eq, %[[P]], %{{.+}} : index
// CHECK:          nvgpu.mbarrier.try_wait.parity %stage_barriers[%[[STAGE]]], %[[ODD]], %{{.+}}
// CHECK:        } {affinec.mapping = "thread"}
// CHECK-NEXT:   affine.parallel (%{{.+}}) = (0) to (128) {
// CHECK:          affinec.warpgroup_mma %fragments, %A_shared[%{{.+}}, %row], %B_shared[%{{.+}}] : memref<1x8x4xf32, 5 : i64>, memref<2x1x64x32xf16, 3 : i64>, memref<2x1x32x64xf16, 3 : i64>
// CHECK:        affine.parallel (%[[TX:.+]]) = (0) to (128) {
// CHECK-NEXT:     affine.if affine_set<(d0) : (d0 mod 128 == 0)>(%[[TX]]) {
// CHECK-NEXT:       nvgpu.mbarrier.arrive %stage_released[%[[STAGE]]]
// CHECK-NEXT:     }
// CHECK-NEXT:   } {affinec.mapping = "thread"}
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NOT:  nvgpu.device_async
// CHECK:      func.return

// NVVM:      gpu.launch_func @matmul_kernel::@matmul_kernel {{.+}} args(%C : memref<128x64xf16>, %A_map : !nvgpu.tensormap.descriptor<{{.+}}>, %B_map : !nvgpu.tensormap.descriptor<{{.+}}>)
// NVVM:      gpu.func @matmul_kernel(%C: memref<128x64xf16>, %A_map: !nvgpu.tensormap.descriptor<{{.+}}>, %B_map: !nvgpu.tensormap.descriptor<{{.+}}>)
// NVVM:      nvvm.mbarrier.arrive.expect_tx
// NVVM:      nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %{{.+}}, %{{.+}}, box[%{{.+}}, %{{.+}}]
// NVVM:      nvvm.mbarrier.try_wait.parity
// NVVM:      nvvm.wgmma.mma_async

// PLAIN:      %A_map = nvgpu.tma.create.descriptor {{.+}} -> !nvgpu.tensormap.descriptor<tensor = memref<64x8xf16, 3 : i64>, swizzle = none, l2promo = none, oob = zero, interleave = none>
// PLAIN:      %B_map = nvgpu.tma.create.descriptor {{.+}} -> !nvgpu.tensormap.descriptor<tensor = memref<32x8xf16, 3 : i64>, swizzle = none, l2promo = none, oob = zero, interleave = none>
// PLAIN:      %B_shared = memref.alloc() : memref<2x8x32x8xf16, 3 : i64>
// PLAIN-NEXT: %A_shared = memref.alloc() : memref<2x4x64x8xf16, 3 : i64>
// PLAIN:      nvgpu.mbarrier.arrive.expect_tx
// PLAIN-COUNT-4: nvgpu.tma.async.load %A_map[%{{.+}}, %{{.+}}], %stage_barriers[%{{.+}}] to %{{.+}} : {{.+}} -> memref<64x8xf16, strided<[8, 1], offset: ?>, 3 : i64>
// PLAIN:      nvgpu.mbarrier.arrive.expect_tx
// PLAIN-COUNT-8: nvgpu.tma.async.load %B_map

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
