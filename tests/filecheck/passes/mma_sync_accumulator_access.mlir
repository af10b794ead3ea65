// RUN: not affinec-opt %s -p 'affinec-mma-sync{warp-grid=1,2}' 2>&1 | filecheck %s
// RUN: sed 's/%%sum = affinec.padded_load %%acc/%%sum = affine.load %%acc/' %s | not affinec-opt - -p 'affinec-mma-sync{warp-grid=1,2}' 2>&1 | filecheck %s --check-prefix=COMPUTE
// RUN: sed 's/affinec.padded_load %%acc/affine.load %%acc/' %s | affinec-opt - -p 'affinec-mma-sync{warp-grid=1,2}' | filecheck %s --check-prefix=REWRITTEN

// A 16x16x16 f16 product just before affinec-mma-sync, its accumulator read by
// affinec.padded_load (not what the pipeline makes): the rewrite moves the
// accumulator into the lanes' registers and rewrites only its affine.load and
// affine.store, so any other access is refused, located (it failed inside xDSL,
// erasing the read while it still had uses). Read by affine.load, it is rewritten.

// CHECK: mma_sync_accumulator_access.mlir:[[# @LINE + 69]]:16: error: 'affinec.padded_load' op uses the accumulator: the MMA rewrite takes it read by affine.load and written by affine.store only
// COMPUTE: <stdin>:73:18: error: 'affinec.padded_load' op uses the accumulator: the MMA rewrite takes it read by affine.load and written by affine.store only
// REWRITTEN: nvgpu.mma.sync
// REWRITTEN-NOT: %acc

builtin.module attributes {affinec.spec = "matmul m=16 n=16 k=16 dtype=f16 epilogue=none"} {
  func.func @matmul(%A: memref<16x16xf16>, %B: memref<16x16xf16>, %C: memref<16x16xf16>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i0, %j0) = (0, 0) to (1, 1) {
      %B_shared = memref.alloc() : memref<16x16xf16, 3 : i64>
      %A_shared = memref.alloc() : memref<16x16xf16, 3 : i64>
      %acc = memref.alloc() : memref<16x16xf32, 5 : i64>
      %output_shared = memref.alloc() {affinec.overlay} : memref<16x16xf16, 3 : i64>
      affine.parallel (%i1, %j1) = (0, 0) to (16, 16) {
        affine.store %zero, %acc[%i1, %j1] : memref<16x16xf32, 5 : i64>
      } {affinec.mapping = "block"}
      affine.parallel (%0, %1) = (0, 0) to (16, 2) {
        %2 = affine.apply affine_map<(d0, d1, d2) -> (d0 * 16 + d1)>(%i0, %0, %1)
        %3 = affine.max affine_map<(d0) -> (d0, 0)>(%2)
        %4 = affine.min affine_map<(d0) -> (d0, 15)>(%3)
        %5 = affine.apply affine_map<(d0, d1, d2) -> (d2 * 8)>(%i0, %0, %1)
        %6 = affine.max affine_map<(d0) -> (d0, 0)>(%5)
        %7 = affine.min affine_map<(d0) -> (d0, 8)>(%6)
        %8 = arith.constant 8 : index
        %9 = arith.constant 0 : index
        %10 = affine.if affine_set<(d0, d1) : (d0 >= 0, -d0 + 15 >= 0, d1 >= 0, -d1 + 15 >= 0)>(%2, %5) -> (index) {
          affine.yield %8 : index
        } else {
          affine.yield %9 : index
        }
        %11 = affine.apply affine_map<(d0, d1) -> (d0)>(%0, %1)
        %12 = affine.apply affine_map<(d0, d1) -> (d1 * 8)>(%0, %1)
        %13 = nvgpu.device_async_copy %A[%4, %7], %A_shared[%11, %12], 8, %10 : memref<16x16xf16> to memref<16x16xf16, 3 : i64>
      } {affinec.mapping = "block"}
      affine.parallel (%14, %15) = (0, 0) to (16, 2) {
        %16 = affine.apply affine_map<(d0, d1, d2) -> (d1)>(%j0, %14, %15)
        %17 = affine.max affine_map<(d0) -> (d0, 0)>(%16)
        %18 = affine.min affine_map<(d0) -> (d0, 15)>(%17)
        %19 = affine.apply affine_map<(d0, d1, d2) -> (d0 * 16 + d2 * 8)>(%j0, %14, %15)
        %20 = affine.max affine_map<(d0) -> (d0, 0)>(%19)
        %21 = affine.min affine_map<(d0) -> (d0, 8)>(%20)
        %22 = arith.constant 8 : index
        %23 = arith.constant 0 : index
        %24 = affine.if affine_set<(d0, d1) : (d0 >= 0, -d0 + 15 >= 0, d1 >= 0, -d1 + 15 >= 0)>(%16, %19) -> (index) {
          affine.yield %22 : index
        } else {
          affine.yield %23 : index
        }
        %25 = affine.apply affine_map<(d0, d1) -> (d0)>(%14, %15)
        %26 = affine.apply affine_map<(d0, d1) -> (d1 * 8)>(%14, %15)
        %27 = nvgpu.device_async_copy %B[%18, %21], %B_shared[%25, %26], 8, %24 : memref<16x16xf16> to memref<16x16xf16, 3 : i64>
      } {affinec.mapping = "block"}
      %28 = nvgpu.device_async_create_group {}
      nvgpu.device_async_wait %28 {numGroups = 0 : i32}
      gpu.barrier
      affine.parallel (%i1_1, %j1_1) = (0, 0) to (16, 16) {
        affine.for %p1 = 0 to 16 {
          %a = affine.load %A_shared[%i1_1, %p1] : memref<16x16xf16, 3 : i64>
          %a32 = arith.extf %a : f16 to f32
          %b = affine.load %B_shared[%p1, %j1_1] : memref<16x16xf16, 3 : i64>
          %b32 = arith.extf %b : f16 to f32
          %prod = arith.mulf %a32, %b32 : f32
          %old = affinec.padded_load %acc[%i1_1, %j1_1] : memref<16x16xf32, 5 : i64>
          %new = arith.addf %old, %prod : f32
          affine.store %new, %acc[%i1_1, %j1_1] : memref<16x16xf32, 5 : i64>
        }
      } {affinec.mapping = "block"}
      gpu.barrier
      affine.parallel (%i1_2, %j1_2) = (0, 0) to (16, 16) {
        %sum = affinec.padded_load %acc[%i1_2, %j1_2] : memref<16x16xf32, 5 : i64>
        %out = arith.truncf %sum : f32 to f16
        affine.store %out, %output_shared[%i1_2, %j1_2] : memref<16x16xf16, 3 : i64>
      } {affinec.mapping = "block"}
      gpu.barrier
      affine.parallel (%m, %kv) = (0, 0) to (16, 2) {
        %i1_3 = affine.apply affine_map<(d0) -> (d0)>(%m)
        %j1_3 = affine.apply affine_map<(d0) -> (d0 * 8)>(%kv)
        %29 = affine.vector_load %output_shared[%m, %kv * 8] : memref<16x16xf16, 3 : i64>, vector<8xf16>
        affine.vector_store %29, %C[%i0 * 16 + %i1_3, %j0 * 16 + %j1_3] : memref<16x16xf16>, vector<8xf16>
      } {affinec.mapping = "block", affinec.unroll}
    } {affinec.mapping = "grid"}
    func.return
  }
}