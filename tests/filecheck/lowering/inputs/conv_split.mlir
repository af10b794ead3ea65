// A convolution after tiling (block tile 1x2x4x4, partial tiles on k, oh and ow),
// splitting (init / compute / write-back around a block-shaped accumulator) and
// sinking (the compute band below the reduction loops), written by hand.
builtin.module attributes {affinec.spec = "conv n=1 c=2 h=5 w=5 k=3 r=3 s=3 stride=1,1 pad=1,1 dilation=1,1 layout=nchw filter-layout=kcrs dtype=f32 epilogue=none"} {
  func.func @conv(%input: memref<1x2x5x5xf32>, %filter: memref<3x2x3x3xf32>, %output: memref<1x3x5x5xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    affine.parallel (%n0, %k0, %oh0, %ow0) = (0, 0, 0, 0) to (1, 2, 2, 2) {
      %acc = memref.alloc() : memref<1x2x4x4xf32>
      affine.parallel (%n1, %k1, %oh1, %ow1) = (0, 0, 0, 0) to (1, min(2, 3 - %k0 * 2), min(4, 5 - %oh0 * 4), min(4, 5 - %ow0 * 4)) {
        affine.store %zero, %acc[%n1, %k1, %oh1, %ow1] : memref<1x2x4x4xf32>
      } {affinec.mapping = "block"}
      affine.for %c = 0 to 2 {
        affine.for %r = 0 to 3 {
          affine.for %s = 0 to 3 {
            affine.parallel (%n1, %k1, %oh1, %ow1) = (0, 0, 0, 0) to (1, min(2, 3 - %k0 * 2), min(4, 5 - %oh0 * 4), min(4, 5 - %ow0 * 4)) {
              %a = affinec.padded_load %input[%n0 + %n1, %c, %oh0 * 4 + %oh1 + %r - 1, %ow0 * 4 + %ow1 + %s - 1] : memref<1x2x5x5xf32>
              %b = affine.load %filter[%k0 * 2 + %k1, %c, %r, %s] : memref<3x2x3x3xf32>
              %p = arith.mulf %a, %b : f32
              %old = affine.load %acc[%n1, %k1, %oh1, %ow1] : memref<1x2x4x4xf32>
              %new = arith.addf %old, %p : f32
              affine.store %new, %acc[%n1, %k1, %oh1, %ow1] : memref<1x2x4x4xf32>
            } {affinec.mapping = "block"}
          }
        }
      }
      affine.parallel (%n1, %k1, %oh1, %ow1) = (0, 0, 0, 0) to (1, min(2, 3 - %k0 * 2), min(4, 5 - %oh0 * 4), min(4, 5 - %ow0 * 4)) {
        %v = affine.load %acc[%n1, %k1, %oh1, %ow1] : memref<1x2x4x4xf32>
        affine.store %v, %output[%n0 + %n1, %k0 * 2 + %k1, %oh0 * 4 + %oh1, %ow0 * 4 + %ow1] : memref<1x3x5x5xf32>
      } {affinec.mapping = "block"}
      memref.dealloc %acc : memref<1x2x4x4xf32>
    } {affinec.mapping = "grid"}
    func.return
  }
}
