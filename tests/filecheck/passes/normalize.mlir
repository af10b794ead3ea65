// RUN: affinec-opt %s -p affine-loop-normalize | filecheck %s
// RUN: affinec-opt %s -p affine-loop-normalize,affine-loop-tile{tile-sizes=2},affinec-canonicalize | filecheck %s --check-prefix=TILE

// Lower bound 0 and step 1, the new variable composed into users' maps (an
// affine.apply for a user without a map), so that affine-loop-tile can take the loops.

func.func @normalize(%A: memref<32xf32>, %B: memref<32xindex>) {
  affine.parallel (%i) = (2) to (11) step (3) {
    affine.for %j = 1 to 7 step 2 {
      %v = affine.load %A[%i + %j] : memref<32xf32>
      affine.store %v, %A[%i] : memref<32xf32>
    }
    %k = arith.addi %i, %i : index
    affine.store %k, %B[%i] : memref<32xindex>
  }
  func.return
}

// CHECK-LABEL: func.func @normalize
// CHECK:       affine.parallel (%[[I:.*]]) = (0) to (3) {
// CHECK-NEXT:    %[[X:.*]] = affine.apply affine_map<(d0) -> (d0 * 3 + 2)>(%[[I]])
// CHECK-NEXT:    affine.for %[[J:.*]] = 0 to 3 {
// CHECK-NEXT:      affine.load %A[%[[I]] * 3 + %[[J]] * 2 + 3] : memref<32xf32>
// CHECK-NEXT:      affine.store %{{.*}}, %A[%[[I]] * 3 + 2] : memref<32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    arith.addi %[[X]], %[[X]] : index
// CHECK-NEXT:    affine.store %{{.*}}, %B[%[[I]] * 3 + 2] : memref<32xindex>

// TILE:        affine.parallel (%[[I0:.*]]) = (0) to (2) {
// TILE-NEXT:     affine.parallel (%[[I1:.*]]) = (0) to (min(2, %[[I0]] * -2 + 3)) {
// TILE-NEXT:       affine.apply affine_map<(d0, d1) -> (d0 * 6 + d1 * 3 + 2)>(%[[I0]], %[[I1]])
