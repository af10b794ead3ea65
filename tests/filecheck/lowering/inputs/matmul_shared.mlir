// A matrix product tiled 3x3 per block, whose block stages the tile of B it needs
// (4 rows at a time) in a block buffer: the copy band writes it at (row, column),
// the compute band reads it at (reduction index, its own column), so threads share
// it: shared memory, with a barrier after each copy and before the next one.
builtin.module attributes {affinec.spec = "matmul m=6 n=5 k=7 dtype=f32 epilogue=none"} {
  func.func @matmul(%A: memref<6x7xf32>, %B: memref<7x5xf32>, %C: memref<6x5xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%i0, %j0) = (0, 0) to (2, 2) {
      %acc = memref.alloc() : memref<3x3xf32>
      %tile = memref.alloc() : memref<4x3xf32>
      affine.parallel (%i1, %j1) = (0, 0) to (3, min(3, 5 - %j0 * 3)) {
        affine.store %zero, %acc[%i1, %j1] : memref<3x3xf32>
      } {affinec.mapping = "block"}
      affine.for %p0 = 0 to 2 {
        affine.parallel (%pp, %jj) = (0, 0) to (min(4, 7 - %p0 * 4), min(3, 5 - %j0 * 3)) {
          %b = affine.load %B[%p0 * 4 + %pp, %j0 * 3 + %jj] : memref<7x5xf32>
          affine.store %b, %tile[%pp, %jj] : memref<4x3xf32>
        } {affinec.mapping = "block"}
        affine.parallel (%i1, %j1) = (0, 0) to (3, min(3, 5 - %j0 * 3)) {
          affine.for %pp = 0 to min affine_map<(d0) -> (4, 7 - d0 * 4)>(%p0) {
            %a = affine.load %A[%i0 * 3 + %i1, %p0 * 4 + %pp] : memref<6x7xf32>
            %b = affine.load %tile[%pp, %j1] : memref<4x3xf32>
            %prod = arith.mulf %a, %b : f32
            %old = affine.load %acc[%i1, %j1] : memref<3x3xf32>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[%i1, %j1] : memref<3x3xf32>
          }
        } {affinec.mapping = "block"}
      }
      affine.parallel (%i1, %j1) = (0, 0) to (3, min(3, 5 - %j0 * 3)) {
        %sum = affine.load %acc[%i1, %j1] : memref<3x3xf32>
        affine.store %sum, %C[%i0 * 3 + %i1, %j0 * 3 + %j1] : memref<6x5xf32>
      } {affinec.mapping = "block"}
    } {affinec.mapping = "grid"}
    func.return
  }
}
