// RUN: affinec-opt %s -p affinec-canonicalize > %t.mlir
// RUN: filecheck %s --input-file=%t.mlir
// RUN: affinec-opt %t.mlir -p affinec-canonicalize | filecheck %s

// Maps composed and simplified, redundant bounds dropped, single-iteration loops
// and decided conditions removed, dead index ops erased.

func.func @canonicalize(%A: memref<16x16xf32>, %B: memref<16xf32>) {
  %c2 = arith.constant 2 : index
  affine.parallel (%i0) = (0) to (4) {
    affine.parallel (%i1) = (0) to (min(4, %i0 * -4 + 16)) {
      affine.for %r0 = 0 to 1 {
        affine.for %r1 = 0 to 8 {
          %x = affine.apply affine_map<(d0, d1) -> (d0 * 4 + d1)>(%i0, %i1)
          %y = affine.apply affine_map<(d0, d1) -> (d0 * 8 + d1 * 1 + 0)>(%r0, %r1)
          %dead = affine.apply affine_map<(d0) -> (d0 + 1)>(%x)
          %v = affine.load %A[%x, %y + symbol(%c2) - 2] : memref<16x16xf32>
          affine.if affine_set<(d0) : (d0 - 16 >= 0)>(%x) {
            affine.store %v, %B[%x] : memref<16xf32>
          }
          affine.if affine_set<(d0) : (-d0 + 20 >= 0)>(%x) {
            affine.store %v, %B[%x] : memref<16xf32>
          }
          affine.if affine_set<(d0, d1) : (d0 * 4 - d1 * 4 - 8 >= 0)>(%i1, %r1) {
            affine.store %v, %B[%i1] : memref<16xf32>
          }
        }
      } {affinec.tile}
    } {affinec.mapping = "block"}
  } {affinec.mapping = "grid"}
  func.return
}

// CHECK-LABEL: func.func @canonicalize
// CHECK:       affine.parallel (%[[I0:.*]]) = (0) to (4) {
// CHECK-NEXT:    affine.parallel (%[[I1:.*]]) = (0) to (4) {
// CHECK-NEXT:      affine.for %[[R1:.*]] = 0 to 8 {
// CHECK-NEXT:        %[[V:.*]] = affine.load %A[%[[I0]] * 4 + %[[I1]], %[[R1]]] : memref<16x16xf32>
// CHECK-NEXT:        affine.store %[[V]], %B[%[[I0]] * 4 + %[[I1]]] : memref<16xf32>
// CHECK-NEXT:        affine.if affine_set<(d0, d1) : (d0 - d1 - 2 >= 0)>(%[[I1]], %[[R1]]) {
// CHECK-NEXT:          affine.store %[[V]], %B[%[[I1]]] : memref<16xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    } {affinec.mapping = "block"}
// CHECK-NEXT:  } {affinec.mapping = "grid"}
// CHECK-NOT:   affine.apply
