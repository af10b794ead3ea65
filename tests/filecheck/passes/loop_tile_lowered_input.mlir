// RUN: not affinec-opt %s -p affine-loop-tile 2>&1 | filecheck %s
// RUN: not affinec-opt %s -p 'affinec-split-reduction{splits=2}' 2>&1 | filecheck %s --check-prefix=SPLIT

// A naive product already lowered to cf (lower-affine, convert-scf-to-cf): the
// passes of the naive band refuse the function, located, instead of failing inside
// xDSL on its several blocks.

// CHECK: loop_tile_lowered_input.mlir:[[# @LINE + 3]]:3: error: 'func.func' op has 4 blocks, its control flow lowered to cf: affine-loop-tile tiles the unmapped affine.parallel of the naive IR, once
// SPLIT: loop_tile_lowered_input.mlir:[[# @LINE + 2]]:3: error: 'func.func' op has 4 blocks, its control flow lowered to cf: affinec-split-reduction runs on the naive IR, before affine-loop-tile
builtin.module attributes {affinec.spec = "matmul m=8 n=8 k=3 dtype=f32 epilogue=none"} {
  func.func @matmul(%A: memref<8x3xf32>, %B: memref<3x8xf32>, %C: memref<8x8xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %zero = arith.constant 0.000000e+00 : f32
    cf.br ^bb1(%c0 : index)
  ^bb1(%i: index):
    %more = arith.cmpi slt, %i, %c8 : index
    cf.cond_br %more, ^bb2, ^bb3
  ^bb2:
    memref.store %zero, %C[%i, %c0] : memref<8x8xf32>
    %next = arith.addi %i, %c1 : index
    cf.br ^bb1(%next : index)
  ^bb3:
    func.return
  }
}
