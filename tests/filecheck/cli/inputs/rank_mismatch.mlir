// An access with fewer indices than the memref has dimensions.
func.func @f(%A: memref<4x4x4x4xf32>) {
  affine.parallel (%i) = (0) to (4) {
    %zero = arith.constant 0.0 : f32
    affine.store %zero, %A[%i, %i, %i, %i] : memref<4x4x4x4xf32>
    %v = affine.load %A[%i, %i, %i] : memref<4x4x4x4xf32>
  }
  func.return
}
