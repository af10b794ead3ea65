// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=4,4 reduction-tile-sizes=2}" > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=PARTIAL
// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=4,4 reduction-tile-sizes=2 separate=true}" | filecheck %s --check-prefix=SEPARATE
// RUN: affinec-opt %s -p "affine-loop-tile{tile-sizes=4,4 reduction-tile-sizes=2 separate=true},affinec-split,affinec-sink,affinec-canonicalize" | filecheck %s --check-prefix=PIPELINE
// RUN: affinec-opt %t.mlir | filecheck %s --check-prefix=PARTIAL

// Sizes that do not divide the extents (10x7 by 4x4 tiles, 5 in tiles of 2): the
// last tile's bounds are min groups; with separate=true, full tiles carry none.

builtin.module attributes {affinec.spec = "matmul m=10 n=7 k=5 dtype=f32 epilogue=none"} {
  func.func @matmul(%A: memref<10x5xf32>, %B: memref<5x7xf32>, %C: memref<10x7xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i, %j) = (0, 0) to (10, 7) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 5 {
        %a = affine.load %A[%i, %p] : memref<10x5xf32>
        %b = affine.load %B[%p, %j] : memref<5x7xf32>
        %prod = arith.mulf %a, %b : f32
        %old = affine.load %acc[] : memref<f32>
        %new = arith.addf %old, %prod : f32
        affine.store %new, %acc[] : memref<f32>
      }
      %sum = affine.load %acc[] : memref<f32>
      affine.store %sum, %C[%i, %j] : memref<10x7xf32>
    }
    func.return
  }
}

// PARTIAL:      affine.parallel (%[[I0:.*]], %[[J0:.*]]) = (0, 0) to (3, 2) {
// PARTIAL-NEXT:   affine.parallel (%[[I1:.*]], %[[J1:.*]]) = (0, 0) to (min(4, %[[I0]] * -4 + 10), min(4, %[[J0]] * -4 + 7)) {
// PARTIAL:          affine.for %[[P0:.*]] = 0 to 3 {
// PARTIAL-NEXT:       affine.for %[[P1:.*]] = 0 to min affine_map<(d0) -> (2, d0 * -2 + 5)>(%[[P0]]) {
// PARTIAL-NEXT:         affine.load %A[%[[I0]] * 4 + %[[I1]], %[[P0]] * 2 + %[[P1]]]
// PARTIAL-NEXT:         affine.load %B[%[[P0]] * 2 + %[[P1]], %[[J0]] * 4 + %[[J1]]]
// PARTIAL:            } {affinec.tile}
// PARTIAL:          affine.store %{{.*}}, %C[%[[I0]] * 4 + %[[I1]], %[[J0]] * 4 + %[[J1]]]
// PARTIAL-NEXT:   } {affinec.mapping = "block"}
// PARTIAL-NEXT: } {affinec.mapping = "grid"}

// The fast path: tiles 0..1 along i and 0 along j are full; constant bounds, and the
// reduction's partial tile (p = 4) peeled off after the full ones.
// SEPARATE:      affine.parallel (%[[I0:.*]], %[[J0:.*]]) = (0, 0) to (3, 2) {
// SEPARATE-NEXT:   affine.if affine_set<(d0, d1) : (-d0 + 1 >= 0, -d1 >= 0)>(%[[I0]], %[[J0]]) {
// SEPARATE-NEXT:     affine.parallel (%{{.*}}, %{{.*}}) = (0, 0) to (4, 4) {
// SEPARATE:            affine.for %[[P0:.*]] = 0 to 2 {
// SEPARATE-NEXT:         affine.for %[[P1:.*]] = 0 to 2 {
// SEPARATE-NEXT:           affine.load %A[%{{.*}}, %[[P0]] * 2 + %[[P1]]]
// SEPARATE:              } {affinec.tile}
// SEPARATE-NEXT:       affine.for %[[Q:.*]] = 0 to 1 {
// SEPARATE-NEXT:         affine.load %A[%{{.*}}, %[[Q]] + 4]
// SEPARATE:            } {affinec.mapping = "block"}
// SEPARATE-NEXT:   } else {
// SEPARATE-NEXT:     affine.parallel (%{{.*}}, %{{.*}}) = (0, 0) to (min(4, %[[I0]] * -4 + 10), min(4, %[[J0]] * -4 + 7)) {
// SEPARATE:            } {affinec.mapping = "block"}
// SEPARATE-NEXT:   }
// SEPARATE-NEXT: } {affinec.mapping = "grid"}
// SEPARATE-NOT:  min affine_map

// Split and sunk, both paths share the grid loop's accumulator buffer.
// PIPELINE:      affine.parallel (%{{.*}}, %{{.*}}) = (0, 0) to (3, 2) {
// PIPELINE-NEXT:   %[[ACC:.*]] = memref.alloc() : memref<4x4xf32>
// PIPELINE-NEXT:   affine.if
// PIPELINE-NEXT:     affine.parallel (%[[A:.*]], %[[B:.*]]) = (0, 0) to (4, 4) {
// PIPELINE-NEXT:       affine.store %zero, %[[ACC]][%[[A]], %[[B]]]
// PIPELINE:          affine.for %{{.*}} = 0 to 2 {
// PIPELINE-NEXT:       affine.parallel (%{{.*}}, %{{.*}}) = (0, 0) to (4, 4) {
// PIPELINE:          } {affinec.tile}
// PIPELINE:        } else {
// PIPELINE-NEXT:     affine.parallel (%[[C:.*]], %[[D:.*]]) = (0, 0) to (min(4,
// PIPELINE-NEXT:       affine.store %zero, %[[ACC]][%[[C]], %[[D]]]
// PIPELINE-NOT:    memref.alloc
