// RUN: not affinec-opt %s --split-input-file 2>&1 | filecheck %s

// An affine or index constant past 64 bits is refused where mlir-opt 22 refuses
// it, in its words and at its column (tests/test_fuzz_findings.py runs mlir-opt on
// the same inputs): lower-affine would otherwise make an index constant of it that
// the levels read differently. The largest constants that fit are read.

// CHECK: affine_constant_range.mlir:[[# @LINE + 3]]:39: error: constant too large for index
func.func @in_a_set(%A: memref<4xf32>, %v: f32) {
  affine.for %i = 0 to 4 {
    affine.if affine_set<(d0) : (d0 - 9223372036854775808 >= 0)>(%i) {
      affine.store %v, %A[%i] : memref<4xf32>
    }
  }
  func.return
}

// -----

// CHECK: affine_constant_range.mlir:[[# @LINE + 3]]:30: error: constant too large for index
func.func @in_a_subscript(%A: memref<4xf32>, %v: f32) {
  affine.for %i = 0 to 4 {
    affine.store %v, %A[%i * 9223372036854775808] : memref<4xf32>
  }
  func.return
}

// -----

// CHECK: affine_constant_range.mlir:[[# @LINE + 1]]:38: error: constant too large for index
#m = affine_map<(d0) -> (d0 floordiv 9223372036854775808)>
func.func @in_a_map(%i: index) -> index {
  %j = affine.apply #m(%i)
  func.return %j : index
}

// -----

// CHECK: affine_constant_range.mlir:[[# @LINE + 2]]:24: error: integer constant out of range for attribute
func.func @a_loop_bound(%A: memref<4xf32>, %v: f32) {
  affine.for %i = 0 to 9223372036854775808 {
    affine.store %v, %A[%i] : memref<4xf32>
  }
  func.return
}

// -----

// CHECK: affine_constant_range.mlir:[[# @LINE + 2]]:20: error: integer constant out of range for attribute
func.func @a_negative_loop_bound(%A: memref<4xf32>, %v: f32) {
  affine.for %i = -9223372036854775809 to 4 {
    affine.store %v, %A[%i] : memref<4xf32>
  }
  func.return
}

// -----

// CHECK: affine_constant_range.mlir:[[# @LINE + 2]]:43: error: constant too large for index
func.func @a_parallel_step(%A: memref<4xf32>, %v: f32) {
  affine.parallel (%i) = (0) to (4) step (9223372036854775808) {
    affine.store %v, %A[%i] : memref<4xf32>
  }
  func.return
}

// -----

// CHECK: affine_constant_range.mlir:[[# @LINE + 2]]:23: error: integer constant out of range for attribute
func.func @an_index_constant() -> index {
  %c = arith.constant 9223372036854775808 : index
  func.return %c : index
}

// -----

// CHECK-NOT: error
// CHECK-LABEL: func.func @the_largest_that_fit
// CHECK: affine.for %{{.*}} = -9223372036854775807 to 4
// CHECK: affine_set<(d0) : (d0 - 9223372036854775807 >= 0)>
// CHECK: arith.constant 9223372036854775807 : index
func.func @the_largest_that_fit(%A: memref<4xf32>, %v: f32) -> index {
  affine.for %i = -9223372036854775807 to 4 {
    affine.if affine_set<(d0) : (d0 - 9223372036854775807 >= 0)>(%i) {
      affine.store %v, %A[%i] : memref<4xf32>
    }
  }
  %c = arith.constant 9223372036854775807 : index
  func.return %c : index
}
