// RUN: affinec-opt %s -p affine-loop-tile | filecheck %s

// affine-loop-tile's own default sizes on a convolution of any batch: the batch,
// bounded by a symbol, is tiled by 1 (the only size the tiling takes for it; it
// was given 8 and refused), the rest as for a fixed batch.

// CHECK: affine.parallel (%n0, %k0, %oh0, %ow0) = (0, 0, 0, 0) to (symbol(%batch), 1, 1, 1) {
// CHECK-NEXT: affine.parallel (%n1, %k1, %oh1, %ow1) = (0, 0, 0, 0) to (1, 2, 3, 3) {
builtin.module attributes {affinec.spec = "conv n=2 c=2 h=3 w=3 k=2 r=1 s=1 stride=1,1 pad=0,0 dilation=1,1 layout=nchw filter-layout=kcrs dtype=f32 epilogue=none batch=dynamic"} {
  func.func @conv(%input: memref<?x2x3x3xf32>, %filter: memref<2x2x1x1xf32>, %output: memref<?x2x3x3xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %batch = memref.dim %input, %c0 : memref<?x2x3x3xf32>
    affine.parallel (%n, %k, %oh, %ow) = (0, 0, 0, 0) to (symbol(%batch), 2, 3, 3) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %c = 0 to 2 {
        affine.for %r = 0 to 1 {
          affine.for %s = 0 to 1 {
            %a = affine.load %input[%n, %c, %oh + %r, %ow + %s] : memref<?x2x3x3xf32>
            %b = affine.load %filter[%k, %c, %r, %s] : memref<2x2x1x1xf32>
            %prod = arith.mulf %a, %b : f32
            %old = affine.load %acc[] : memref<f32>
            %new = arith.addf %old, %prod : f32
            affine.store %new, %acc[] : memref<f32>
          }
        }
      }
      %sum = affine.load %acc[] : memref<f32>
      affine.store %sum, %output[%n, %k, %oh, %ow] : memref<?x2x3x3xf32>
    }
    func.return
  }
}
