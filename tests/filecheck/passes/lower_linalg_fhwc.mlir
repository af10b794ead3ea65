// RUN: affinec-opt %s -p affinec-lower-linalg 2>&1 | filecheck %s
// RUN: affinec-opt %s --verify-diagnostics -p affinec-lower-linalg

// TOSA's convolution (what tosa.conv2d becomes): its filter is F x R x S x C, a
// layout no spec has, so it enters as its contraction's naive IR without a spec
// (affinec-default then runs with its defaults), and a remark names the op that is
// a spec.

// CHECK: remark: is no spec affinec knows (y[n, oh, ow, f] = +(x[n, oh * 2 + r, ow + s * 2, c] * w[f, r, s, c]))
// CHECK: remark: has its filter F x R x S x C, a layout no spec of affinec's has: linalg.conv_2d_nhwc_hwcf
// CHECK: builtin.module {
// CHECK: func.func @tosa_conv(%x: memref<1x9x9x3xf32>, %w: memref<8x3x3x3xf32>, %y: memref<1x4x5x8xf32>)
// CHECK: affine.parallel (%n, %oh, %ow, %f) = (0, 0, 0, 0) to (1, 4, 5, 8)
// CHECK: affine.load %x[%n, %oh * 2 + %r, %ow + %s * 2, %c] : memref<1x9x9x3xf32>
// CHECK: affine.load %w[%f, %r, %s, %c] : memref<8x3x3x3xf32>
// CHECK-NOT: linalg.

func.func @tosa_conv(%x: memref<1x9x9x3xf32>, %w: memref<8x3x3x3xf32>, %y: memref<1x4x5x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<1x4x5x8xf32>)
  // expected-remark @+2 {{is no spec affinec knows}}
  // expected-remark @+1 {{has its filter F x R x S x C}}
  linalg.conv_2d_nhwc_fhwc {dilations = dense<[1, 2]> : tensor<2xi64>, strides = dense<[2, 1]> : tensor<2xi64>} ins(%x, %w : memref<1x9x9x3xf32>, memref<8x3x3x3xf32>) outs(%y : memref<1x4x5x8xf32>)
  func.return
}
