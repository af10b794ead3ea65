// RUN: affinec-opt %s -p 'affinec-mma-sync{warp-grid=1,1}' | filecheck %s
// RUN: sed 's/to min affine_map<(d0) -> (16, d0 \* -16 + 24)>(%%p0)/to 16/' %s | affinec-opt - -p 'affinec-mma-sync{warp-grid=1,1}' | filecheck %s --check-prefix=WHOLE

// A 16x8x48 f16 product in two splits of 24 channels, steps of 16, just before
// affinec-mma-sync: each split's second step has 8 channels, and its tiles' other 8
// hold the next split's (the copies read inside the tensor). The MMAs read the
// whole 16, so the short step first zeroes them in both tiles (a guarded band and
// a barrier) before the warps' MMAs. With steps all whole (the bound a constant),
// nothing is added.

// CHECK:      affine.for %p0 = 0 to 2 {
// CHECK:        affine.store %B_1, %B_shared
// CHECK:        gpu.barrier
// CHECK-NEXT:   affine.if affine_set<(d0) : (d0 * 16 - 9 >= 0)>(%p0) {
// CHECK-NEXT:     affine.parallel (%[[M:.+]], %[[C:.+]]) = (0, 0) to (16, min(16, %p0 * 16 - 8)) {
// CHECK-NEXT:       %[[Z:.+]] = arith.constant 0.000000e+00 : f16
// CHECK-NEXT:       %[[AT:.+]] = affine.apply affine_map<(d0, d1) -> (d0 * -16 + d1 + 24)>(%p0, %[[C]])
// CHECK-NEXT:       affine.store %[[Z]], %A_shared[%[[M]], %[[AT]]]
// CHECK:          affine.parallel (%[[N:.+]], %[[C2:.+]]) = (0, 0) to (8, min(16, %p0 * 16 - 8)) {
// CHECK:            %[[AT2:.+]] = affine.apply affine_map<(d0, d1) -> (d0 * -16 + d1 + 24)>(%p0, %[[C2]])
// CHECK-NEXT:       affine.store %{{.+}}, %B_shared[%[[AT2]], %[[N]]]
// CHECK:          gpu.barrier
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.parallel (%tx{{.*}}) = (0) to (32) {
// CHECK:          nvgpu.mma.sync

// WHOLE:      affine.store %B_1, %B_shared
// WHOLE:      gpu.barrier
// WHOLE-NEXT: affine.parallel (%tx{{.*}}) = (0) to (32) {
// WHOLE-NOT:  arith.constant 0.000000e+00 : f16
// WHOLE:      nvgpu.mma.sync

builtin.module attributes {affinec.spec = "matmul m=16 n=8 k=48 dtype=f16 epilogue=none"} {
  func.func @matmul(%A: memref<16x48xf16>, %B: memref<48x8xf16>, %C: memref<16x8xf16>, %partials: memref<2x16x8xf32> {affinec.workspace}) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%sk0, %i0, %j0) = (0, 0, 0) to (2, 1, 1) {
      %B_shared = memref.alloc() : memref<16x8xf16, 3 : i64>
      %A_shared = memref.alloc() : memref<16x16xf16, 3 : i64>
      %acc = memref.alloc() : memref<16x8xf32, 5 : i64>
      affine.parallel (%i1, %j1) = (0, 0) to (16, 8) {
        affine.store %zero, %acc[%i1, %j1] : memref<16x8xf32, 5 : i64>
      } {affinec.mapping = "block"}
      affine.for %p0 = 0 to 2 {
        gpu.barrier
        affine.parallel (%0, %1) = (0, 0) to (16, 16) {
          %A_1 = affinec.padded_load %A[%i0 * 16 + %0, %sk0 * 24 + %p0 * 16 + %1] : memref<16x48xf16>
          affine.store %A_1, %A_shared[%0, %1] : memref<16x16xf16, 3 : i64>
        } {affinec.mapping = "block"}
        affine.parallel (%2, %3) = (0, 0) to (16, 8) {
          %B_1 = affinec.padded_load %B[%sk0 * 24 + %p0 * 16 + %2, %j0 * 8 + %3] : memref<48x8xf16>
          affine.store %B_1, %B_shared[%2, %3] : memref<16x8xf16, 3 : i64>
        } {affinec.mapping = "block"}
        gpu.barrier
        affine.parallel (%i1_1, %j1_1) = (0, 0) to (16, 8) {
          affine.for %p1 = 0 to min affine_map<(d0) -> (16, d0 * -16 + 24)>(%p0) {
            %a = affine.load %A_shared[%i1_1, %p1] : memref<16x16xf16, 3 : i64>
            %a32 = arith.extf %a : f16 to f32
            %b = affine.load %B_shared[%p1, %j1_1] : memref<16x8xf16, 3 : i64>
            %b32 = arith.extf %b : f16 to f32
            %prod = arith.mulf %a32, %b32 : f32
            %old = affine.load %acc[%i1_1, %j1_1] : memref<16x8xf32, 5 : i64>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[%i1_1, %j1_1] : memref<16x8xf32, 5 : i64>
          }
        } {affinec.mapping = "block"}
      } {affinec.tile}
      affine.parallel (%i1_2, %j1_2) = (0, 0) to (16, 8) {
        %sum = affine.load %acc[%i1_2, %j1_2] : memref<16x8xf32, 5 : i64>
        affine.store %sum, %partials[%sk0, %i0 * 16 + %i1_2, %j0 * 8 + %j1_2] : memref<2x16x8xf32>
      } {affinec.mapping = "block"}
    } {affinec.splits = 2 : i64, affinec.mapping = "grid"}
    affine.parallel (%i0_1, %j0_1) = (0, 0) to (1, 1) {
      affine.parallel (%i1_3, %j1_3) = (0, 0) to (16, 8) {
        %partial0 = affine.load %partials[0, %i0_1 * 16 + %i1_3, %j0_1 * 8 + %j1_3] : memref<2x16x8xf32>
        %partial1 = affine.load %partials[1, %i0_1 * 16 + %i1_3, %j0_1 * 8 + %j1_3] : memref<2x16x8xf32>
        %partials_1 = arith.addf %partial0, %partial1 : f32
        %out = arith.truncf %partials_1 : f32 to f16
        affine.store %out, %C[%i0_1 * 16 + %i1_3, %j0_1 * 8 + %j1_3] : memref<16x8xf16>
      } {affinec.mapping = "block"}
    } {affinec.mapping = "grid"}
    func.return
  }
}
