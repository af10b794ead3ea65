// RUN: affinec-opt %s -p lower-affine | filecheck %s
// RUN: affinec-opt %s -p lower-affine,convert-scf-to-cf | filecheck %s --check-prefix=CF

// floordiv and mod of a value that may be negative keep affine semantics (MLIR's
// expansion); of a thread id, known non-negative, they are plain unsigned ops.

func.func @f(%x: index, %A: memref<8xf32>) -> (index, index, f32) {
  %q = affine.apply affine_map<(d0) -> (d0 floordiv 4)>(%x)
  %r = affine.apply affine_map<(d0) -> (d0 mod 4)>(%x)
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %u = affine.apply affine_map<(d0) -> (d0 floordiv 2 + d0 mod 2)>(%tx)
    %v = affinec.padded_load %A[%u * 3 - 1] : memref<8xf32>
    gpu.terminator
  }
  %s = affine.for %i = max affine_map<(d0) -> (0, d0 - 2)>(%x) to 8 step 2 iter_args(%acc = %x) -> (index) {
    %n = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%acc, %i)
    affine.yield %n : index
  } {affinec.unroll}
  %w = affine.load %A[%x mod 8] : memref<8xf32>
  func.return %q, %s, %w : index, index, f32
}

// CHECK-LABEL: func.func @f
// CHECK:      %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT: %{{.*}} = arith.constant -1 : index
// CHECK-NEXT: %[[NEG:.*]] = arith.cmpi slt, %[[X:.*]], %[[Z]] : index
// CHECK-NEXT: %[[FLIP:.*]] = arith.subi %{{.*}}, %[[X]] : index
// CHECK-NEXT: %[[DIVIDEND:.*]] = arith.select %[[NEG]], %[[FLIP]], %[[X]] : index
// CHECK-NEXT: %[[Q:.*]] = arith.divsi %[[DIVIDEND]], %{{.*}} : index
// CHECK:      %[[REM:.*]] = arith.remsi %[[X]], %{{.*}} : index
// CHECK-NEXT: %[[RNEG:.*]] = arith.cmpi slt, %[[REM]], %{{.*}} : index
// CHECK-NEXT: %[[FIXED:.*]] = arith.addi %[[REM]], %{{.*}} : index
// CHECK-NEXT: arith.select %[[RNEG]], %[[FIXED]], %[[REM]] : index
// CHECK:      gpu.launch
// CHECK:        arith.divui %[[TX:.*]], %{{.*}} : index
// CHECK:        arith.remui %[[TX]], %{{.*}} : index
// The padded load checks its one index with one unsigned comparison.
// CHECK:        %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK-NEXT:   scf.if %[[IN]] -> (f32) {
// CHECK-NEXT:     memref.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:        } else {
// CHECK-NEXT:     arith.constant 0.000000e+00 : f32
// CHECK:      arith.maxsi
// CHECK:      scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[X]]) -> (index) {
// CHECK:      } {affinec.unroll}
// CHECK-NOT:  affine.

// The loop's attributes move to its back edge.
// CF: cf.br ^{{.*}}(%{{.*}}, %{{.*}} : index, index) {affinec.unroll}
// CF-NOT: scf.
