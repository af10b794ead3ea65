// RUN: not affinec-opt %s -p 'affinec-split-reduction{splits=8}' 2>&1 | filecheck %s
// RUN: not affinec-opt %s -p 'affinec-split-reduction{splits=8},affinec-default' 2>&1 | filecheck %s
// RUN: not affinec-opt %s -p 'affinec-split-reduction{splits=-1},affinec-default' 2>&1 | filecheck %s --check-prefix=NEGATIVE
// RUN: affinec-opt %s -p 'affinec-split-reduction{splits=3}' | sed 's/affinec.splits = 3/affinec.splits = 5/' | not affinec-opt - -p affinec-default 2>&1 | filecheck %s --check-prefix=RECORDED

// A split that does not suit the spec is refused by affinec-split-reduction, located
// and in its own words, whether affinec-default follows it or not (affinec-default
// is built before the passes run, for the split asked: it no longer fails building).
// A split recorded in the module that affinec-default has no configuration for is
// refused at its band when affinec-default runs.

// CHECK-NOT: internal error
// CHECK: split_reduction_then_default.mlir:[[# @LINE + 10]]:7: error: 'affine.for' op splits=8 needs at least 8 iterations of the channel loop, it has 3
// CHECK-NOT: internal error
// NEGATIVE: split_reduction_then_default.mlir:[[# @LINE + 2]]:1: error: 'builtin.module' op splits must be between 1 and 64, got -1
// RECORDED: <stdin>:4:5: error: 'affine.parallel' op affinec-default: splits=5: the reduction has 3 steps
builtin.module attributes {affinec.spec = "matmul m=8 n=8 k=3 dtype=f32 epilogue=none"} {
  func.func @matmul(%A: memref<8x3xf32>, %B: memref<3x8xf32>, %C: memref<8x8xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i, %j) = (0, 0) to (8, 8) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 3 {
        %a = affine.load %A[%i, %p] : memref<8x3xf32>
        %b = affine.load %B[%p, %j] : memref<3x8xf32>
        %prod = arith.mulf %a, %b : f32
        %old = affine.load %acc[] : memref<f32>
        %new = arith.addf %old, %prod : f32
        affine.store %new, %acc[] : memref<f32>
      }
      %sum = affine.load %acc[] : memref<f32>
      affine.store %sum, %C[%i, %j] : memref<8x8xf32>
    }
    func.return
  }
}
