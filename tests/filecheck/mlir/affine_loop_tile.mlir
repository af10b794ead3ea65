// RUN: affinec-opt %s -split-input-file -verify-diagnostics -p 'affine-loop-tile{tile-size=32}' | filecheck %s
// RUN: affinec-opt %s -split-input-file -verify-diagnostics -p 'affine-loop-tile{tile-size=32 separate}' | filecheck %s --check-prefix=SEPARATE

// MLIR's meaning of affine-loop-tile on a band of affine.for loops (the output is
// mlir-opt 22's, up to value names: tests/test_mlir_interop.py checks it).

func.func @band(%A: memref<100x64xf32>) {
  affine.for %i = 0 to 100 {
    affine.for %j = 0 to 64 {
      %v = affine.load %A[%i, %j] : memref<100x64xf32>
      %w = arith.addf %v, %v : f32
      affine.store %w, %A[%i, %j] : memref<100x64xf32>
    }
  }
  func.return
}

// CHECK-LABEL: func.func @band
// CHECK:       affine.for %[[TI:.*]] = 0 to 100 step 32 {
// CHECK-NEXT:    affine.for %[[TJ:.*]] = 0 to 64 step 32 {
// CHECK-NEXT:      affine.for %[[I:.*]] = affine_map<(d0) -> (d0)>(%[[TI]]) to min affine_map<(d0) -> (d0 + 32, 100)>(%[[TI]]) {
// CHECK-NEXT:        affine.for %[[J:.*]] = affine_map<(d0) -> (d0)>(%[[TJ]]) to affine_map<(d0) -> (d0 + 32)>(%[[TJ]]) {
// CHECK-NEXT:          affine.load %{{.*}}[%[[I]], %[[J]]]

// SEPARATE-LABEL: func.func @band
// SEPARATE:       affine.if affine_set<(d0) : (-d0 + 68 >= 0)>(%{{.*}}) {
// SEPARATE-NEXT:    affine.for %{{.*}} to affine_map<(d0) -> (d0 + 32)>
// SEPARATE:       } else {
// SEPARATE-NEXT:    affine.for %{{.*}} to min affine_map<(d0) -> (d0 + 32, 100)>

// -----

func.func @symbolic(%A: memref<?xf32>, %n: index) {
  affine.for %i = 2 to %n step 3 {
    %v = affine.load %A[%i] : memref<?xf32>
    affine.store %v, %A[%i] : memref<?xf32>
  }
  func.return
}

// CHECK-LABEL: func.func @symbolic
// CHECK:       affine.for %[[T:.*]] = 2 to %{{.*}} step 96 {
// CHECK-NEXT:    affine.for %{{.*}} = affine_map<(d0) -> (d0)>(%[[T]]) to min affine_map<(d0)[s0] -> (d0 + 96, s0)>(%[[T]])[%{{.*}}] step 3 {

// SEPARATE-LABEL: func.func @symbolic
// SEPARATE-NOT:   affine.if

// -----

// Where affinec cannot tell what MLIR's dependence analysis would decide, it says so.

func.func @transpose(%A: memref<64x64xf32>) {
  // expected-error @+1 {{affine-loop-tile cannot tell whether tiling this band keeps its dependences}}
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 64 {
      %v = affine.load %A[%j, %i] : memref<64x64xf32>
      affine.store %v, %A[%i, %j] : memref<64x64xf32>
    }
  }
  func.return
}
