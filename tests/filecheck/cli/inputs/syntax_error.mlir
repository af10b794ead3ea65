// `affine.for` without its upper bound keyword.
func.func @f(%A: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 upto 4 {
    }
  }
  func.return
}
